package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// wireFixture is one captured JSON value and the type that must carry it.
type wireFixture struct {
	name string
	new  func() any
	json string
}

// generic decodes JSON into plain maps/slices with exact numbers, so two
// encodings compare equal iff they have the same keys, nulls and values.
func generic(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// assertSameJSON fails when got and want differ semantically.
func assertSameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	g, w := generic(t, got), generic(t, want)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON differs\n got: %s\nwant: %s\ndiff: %s", got, want, firstDiff(g, w, "$"))
	}
}

// firstDiff describes the first difference between two generic JSON values.
func firstDiff(g, w any, path string) string {
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok {
			return path + ": not an object"
		}
		keys := make([]string, 0, len(wv)+len(gv))
		for k := range wv {
			keys = append(keys, k)
		}
		for k := range gv {
			if _, ok := wv[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			a, aok := gv[k]
			b, bok := wv[k]
			switch {
			case !aok:
				return path + "." + k + ": missing"
			case !bok:
				return path + "." + k + ": unexpected"
			case !reflect.DeepEqual(a, b):
				return firstDiff(a, b, path+"."+k)
			}
		}
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			return path + ": array differs"
		}
		for i := range wv {
			if !reflect.DeepEqual(gv[i], wv[i]) {
				return firstDiff(gv[i], wv[i], path+"[]")
			}
		}
	}
	return path + ": value differs"
}

// roundTrip unmarshals s into v, marshals v and returns the result.
func roundTrip(t *testing.T, v any, s string) []byte {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("unmarshal into %T: %v", v, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return out
}

// TestCapturedFramesRoundTrip checks that every captured value keeps its
// exact keys, nulls and absent keys through our types.
func TestCapturedFramesRoundTrip(t *testing.T) {
	if len(wireFixtures) < 40 {
		t.Fatalf("only %d fixtures", len(wireFixtures))
	}
	for _, f := range wireFixtures {
		t.Run(f.name, func(t *testing.T) {
			assertSameJSON(t, roundTrip(t, f.new(), f.json), []byte(f.json))
		})
	}
}

// fixture returns the captured JSON named name.
func fixture(t *testing.T, name string) string {
	t.Helper()
	for _, f := range wireFixtures {
		if f.name == name {
			return f.json
		}
	}
	t.Fatalf("no fixture %q", name)
	return ""
}

func TestCapturedFramesDecodeToVariants(t *testing.T) {
	var n ItemCompletedNotification
	if err := json.Unmarshal([]byte(fixture(t, "item/completed commandExecution")), &n); err != nil {
		t.Fatal(err)
	}
	cmd, ok := n.Item.Body.(*CommandExecutionItem)
	if !ok {
		t.Fatalf("body is %T", n.Item.Body)
	}
	if cmd.Status != StatusCompleted || cmd.ExitCode == nil || *cmd.ExitCode != 0 ||
		cmd.AggregatedOutput == nil || *cmd.AggregatedOutput != "hello-from-shell\n" {
		t.Errorf("unexpected command item %+v", cmd)
	}
	if len(cmd.CommandActions) != 1 || cmd.CommandActions[0].Type != ActionUnknown {
		t.Errorf("command actions %+v", cmd.CommandActions)
	}
	if n.Item.StartedAtMs == nil || n.Item.CompletedAtMs == nil || n.ContentTokenCount != nil {
		t.Errorf("timestamps/contentTokenCount not decoded: %+v", n)
	}

	var req CommandExecutionRequestApprovalParams
	if err := json.Unmarshal([]byte(fixture(t, "item/commandExecution/requestApproval")), &req); err != nil {
		t.Fatal(err)
	}
	if len(req.AvailableDecisions) != 3 ||
		req.AvailableDecisions[1].Decision != DecisionAcceptWithExecpolicyAmendment ||
		!reflect.DeepEqual(req.AvailableDecisions[1].ExecpolicyAmendment, []string{"echo", "hello-from-shell"}) {
		t.Errorf("decisions %+v", req.AvailableDecisions)
	}

	var failed TurnCompletedNotification
	if err := json.Unmarshal([]byte(fixture(t, "turn/completed failed")), &failed); err != nil {
		t.Fatal(err)
	}
	if failed.Turn.Status != TurnFailed || failed.Turn.Error == nil ||
		failed.Turn.Error.CodexErrorInfo == nil || failed.Turn.Error.CodexErrorInfo.Code != ErrOther {
		t.Errorf("failed turn %+v", failed.Turn)
	}

	var items ThreadItemsListResult
	if err := json.Unmarshal([]byte(fixture(t, "thread/items/list result")), &items); err != nil {
		t.Fatal(err)
	}
	var kinds []ThreadItemType
	for _, e := range items.Data {
		kinds = append(kinds, e.Item.Body.ItemType())
	}
	want := []ThreadItemType{ItemUserMessage, ItemReasoning, ItemAgentMessage, ItemUserMessage,
		ItemDynamicToolCall, ItemAgentMessage, ItemUserMessage, ItemCommandExecution, ItemAgentMessage, ItemUserMessage}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("item kinds %v, want %v", kinds, want)
	}
}

func TestCapturedParamsDecode(t *testing.T) {
	var ip InitializeParams
	if err := json.Unmarshal([]byte(tuiInitializeParams), &ip); err != nil {
		t.Fatal(err)
	}
	if ip.ClientInfo.Name != "codex-tui" || ip.ClientInfo.Title != nil || ip.ClientInfo.Version != "0.169.0" ||
		ip.Capabilities == nil || !ip.Capabilities.ExperimentalAPI || ip.Capabilities.OptOutNotificationMethods != nil ||
		ip.Capabilities.RequiredHumanApproval == nil || !*ip.Capabilities.RequiredHumanApproval {
		t.Errorf("initialize params %+v %+v", ip, ip.Capabilities)
	}

	var sp ThreadStartParams
	if err := json.Unmarshal([]byte(threadStartParamsJSON), &sp); err != nil {
		t.Fatal(err)
	}
	if sp.ApprovalPolicy == nil || sp.ApprovalPolicy.Policy != ApprovalOnRequest ||
		sp.Sandbox == nil || *sp.Sandbox != SandboxWorkspaceWrite ||
		sp.HistoryMode == nil || *sp.HistoryMode != HistoryPaginated || sp.ServiceTier.Set {
		t.Errorf("thread/start params %+v", sp)
	}
	if len(sp.DynamicTools) != 2 || sp.DynamicTools[0].Type != DynamicToolNamespace ||
		len(sp.DynamicTools[0].Tools) != 1 || sp.DynamicTools[0].Tools[0].DeferLoading == nil ||
		sp.DynamicTools[1].Name != "lookup_weather" || len(sp.DynamicTools[1].InputSchema) == 0 {
		t.Errorf("dynamic tools %+v", sp.DynamicTools)
	}
	// Specs are written back exactly as the client sent them.
	var raw struct {
		DynamicTools json.RawMessage `json:"dynamicTools"`
	}
	if err := json.Unmarshal([]byte(threadStartParamsJSON), &raw); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(sp.DynamicTools)
	if err != nil {
		t.Fatal(err)
	}
	assertSameJSON(t, out, raw.DynamicTools)

	var tp TurnStartParams
	if err := json.Unmarshal([]byte(turnStartParamsJSON), &tp); err != nil {
		t.Fatal(err)
	}
	if len(tp.Input) != 1 || tp.Input[0].Type != UserInputText || tp.Input[0].Text != "Say hello" ||
		tp.ClientUserMessageID == nil || *tp.ClientUserMessageID != "cmsg-1" {
		t.Errorf("turn/start params %+v", tp)
	}
	assertSameJSON(t, roundTrip(t, new(TurnStartParams), turnStartParamsJSON), []byte(turnStartParamsJSON))
}

// marshalString marshals v and fails the test on error.
func marshalString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}

func TestUnionEncodings(t *testing.T) {
	str := func(s string) *string { return &s }
	code := 502
	ms := int64(1700000000123)
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"idle status", ThreadStatus{Type: ThreadIdle, ActiveFlags: []ThreadActiveFlag{FlagWaitingOnApproval}}, `{"type":"idle"}`},
		{"active status without flags", ThreadStatus{Type: ThreadActive}, `{"type":"active","activeFlags":[]}`},
		{"active status with flag", ThreadStatus{Type: ThreadActive, ActiveFlags: []ThreadActiveFlag{FlagWaitingOnUserInput}},
			`{"type":"active","activeFlags":["waitingOnUserInput"]}`},
		{"error info string", CodexErrorInfo{Code: ErrContextWindowExceeded}, `"contextWindowExceeded"`},
		{"error info http", CodexErrorInfo{Code: ErrResponseStreamDisconnected, HTTPStatusCode: &code},
			`{"responseStreamDisconnected":{"httpStatusCode":502}}`},
		{"error info http null", CodexErrorInfo{Code: ErrHTTPConnectionFailed}, `{"httpConnectionFailed":{"httpStatusCode":null}}`},
		{"error info not steerable", CodexErrorInfo{Code: ErrActiveTurnNotSteerable, TurnKind: "review"},
			`{"activeTurnNotSteerable":{"turnKind":"review"}}`},
		{"approval string", AskForApproval{Policy: ApprovalNever}, `"never"`},
		{"approval granular", AskForApproval{Granular: &GranularApproval{SandboxApproval: true, McpElicitations: true}},
			`{"granular":{"sandbox_approval":true,"rules":false,"skill_approval":false,"request_permissions":false,"mcp_elicitations":true}}`},
		{"sandbox danger", SandboxPolicy{Type: SandboxPolicyDangerFullAccess, NetworkAccess: true}, `{"type":"dangerFullAccess"}`},
		{"sandbox external", SandboxPolicy{Type: SandboxPolicyExternalSandbox}, `{"type":"externalSandbox","networkAccess":"restricted"}`},
		{"sandbox workspace", SandboxPolicy{Type: SandboxPolicyWorkspaceWrite},
			`{"type":"workspaceWrite","writableRoots":[],"networkAccess":false,"excludeTmpdirEnvVar":false,"excludeSlashTmp":false}`},
		{"text input", UserInput{Type: UserInputText, Text: "hi"}, `{"type":"text","text":"hi","text_elements":[]}`},
		{"image by file", UserInput{Type: UserInputImage, FileID: "file_1"}, `{"type":"image","fileId":"file_1"}`},
		{"image by url with detail", UserInput{Type: UserInputImage, URL: "https://x/y.png", Detail: new(ImageDetailHigh)},
			`{"type":"image","url":"https://x/y.png","detail":"high"}`},
		{"local image", UserInput{Type: UserInputLocalImage, Path: "/a.png"}, `{"type":"localImage","path":"/a.png"}`},
		{"skill", UserInput{Type: UserInputSkill, Name: "s", Path: "/s/SKILL.md"}, `{"type":"skill","name":"s","path":"/s/SKILL.md"}`},
		{"patch update", PatchChangeKind{Type: PatchUpdate}, `{"type":"update","move_path":null}`},
		{"patch add", PatchChangeKind{Type: PatchAdd, MovePath: str("x")}, `{"type":"add"}`},
		{"read action", CommandAction{Type: ActionRead, Command: "cat a", Name: "a", Path: str("/w/a")},
			`{"type":"read","command":"cat a","name":"a","path":"/w/a"}`},
		{"search action", CommandAction{Type: ActionSearch, Command: "rg x"}, `{"type":"search","command":"rg x","query":null,"path":null}`},
		{"decision amendment", CommandExecutionApprovalDecision{Decision: DecisionAcceptWithExecpolicyAmendment, ExecpolicyAmendment: []string{"ls"}},
			`{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["ls"]}}`},
		{"decision network", CommandExecutionApprovalDecision{Decision: DecisionApplyNetworkPolicyAmendment,
			NetworkPolicyAmendment: &NetworkPolicyAmendment{Host: "example.com", Action: NetworkAllow}},
			`{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"example.com","action":"allow"}}}`},
		{"content image", DynamicToolCallOutputContentItem{Type: ContentInputImage, ImageURL: "data:x"}, `{"type":"inputImage","imageUrl":"data:x"}`},
		{"content empty text", DynamicToolCallOutputContentItem{Type: ContentInputText}, `{"type":"inputText","text":""}`},
		{"session source custom", SessionSource{Custom: str("bot")}, `{"custom":"bot"}`},
		{"session source", SessionSource{Name: "appServer"}, `"appServer"`},
		{"function spec without type", DynamicToolSpec{Name: "f", Description: "d", InputSchema: json.RawMessage(`{}`)},
			`{"type":"function","name":"f","description":"d","inputSchema":{}}`},
		{"items cursor anchor", ThreadItemsListCursor{AnchorItemID: "i1"}, `{"type":"item","itemId":"i1"}`},
		{"items cursor opaque", ThreadItemsListCursor{Opaque: "c1"}, `"c1"`},
		{"web search open page", WebSearchAction{Type: WebSearchOpenPage}, `{"type":"openPage","url":null}`},
		{"nil list", struct {
			A List[string]         `json:"a"`
			B []string             `json:"b"`
			M Map[int]             `json:"m"`
			R Map[json.RawMessage] `json:"r"`
		}{}, `{"a":[],"b":null,"m":{},"r":{}}`},
		{"context compaction item", ThreadItem{Body: &ContextCompactionItem{ID: "c1"}, StartedAtMs: &ms},
			`{"type":"contextCompaction","id":"c1","startedAtMs":1700000000123,"completedAtMs":null}`},
		{"reasoning item with nil slices", ThreadItem{Body: &ReasoningItem{ID: "rs_1"}},
			`{"type":"reasoning","id":"rs_1","summary":[],"content":[],"startedAtMs":null,"completedAtMs":null}`},
		{"dynamic tool item in progress", ThreadItem{Body: &DynamicToolCallItem{ID: "call_1", Tool: "t", Arguments: json.RawMessage(`{"a":1}`), Status: StatusInProgress}},
			`{"type":"dynamicToolCall","id":"call_1","namespace":null,"tool":"t","arguments":{"a":1},"status":"inProgress","contentItems":null,"success":null,"durationMs":null,"startedAtMs":null,"completedAtMs":null}`},
		{"request id int", IntRequestID(-5), `-5`},
		{"request id string", StringRequestID(""), `""`},
		{"serviceTier absent", TurnStartParams{ThreadID: "t"}, `{"threadId":"t","input":[]}`},
		{"serviceTier null", TurnStartParams{ThreadID: "t", ServiceTier: Nullable[string]{Set: true}}, `{"threadId":"t","input":[],"serviceTier":null}`},
		{"serviceTier value", TurnStartParams{ThreadID: "t", ServiceTier: NullableValue("fast")}, `{"threadId":"t","input":[],"serviceTier":"fast"}`},
		{"config read without layers", ConfigReadResult{Config: map[string]any{}, Origins: map[string]ConfigLayerMetadata{}}, `{"config":{},"origins":{}}`},
		{"layer source project", ConfigLayerSource{Type: LayerProject, DotCodexFolder: "/w/.codex"}, `{"type":"project","dotCodexFolder":"/w/.codex"}`},
		{"layer source session flags", ConfigLayerSource{Type: LayerSessionFlags}, `{"type":"sessionFlags"}`},
		{"account chatgpt", Account{Type: AccountChatgpt, PlanType: "plus"}, `{"type":"chatgpt","email":null,"planType":"plus","workspaceName":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertSameJSON(t, []byte(marshalString(t, tt.v)), []byte(tt.want))
		})
	}
}

func TestUnionDecodings(t *testing.T) {
	t.Run("sandbox defaults", func(t *testing.T) {
		var p SandboxPolicy
		if err := json.Unmarshal([]byte(`{"type":"externalSandbox"}`), &p); err != nil || p.ExternalNetworkAccess != NetworkRestricted {
			t.Errorf("got %+v, %v", p, err)
		}
		if err := json.Unmarshal([]byte(`{"type":"readOnly","networkAccess":true}`), &p); err != nil || !p.NetworkAccess {
			t.Errorf("got %+v, %v", p, err)
		}
		if err := json.Unmarshal([]byte(`{"type":"bogus"}`), &p); err == nil {
			t.Error("bogus sandbox policy decoded")
		}
	})
	t.Run("granular approval defaults", func(t *testing.T) {
		var a AskForApproval
		if err := json.Unmarshal([]byte(`{"granular":{"sandbox_approval":true,"rules":false,"mcp_elicitations":false}}`), &a); err != nil ||
			a.Granular == nil || !a.Granular.SandboxApproval || a.Granular.SkillApproval {
			t.Errorf("got %+v, %v", a, err)
		}
	})
	t.Run("error info unknown object kept", func(t *testing.T) {
		in := `{"somethingNew":{"x":1}}`
		var e CodexErrorInfo
		if err := json.Unmarshal([]byte(in), &e); err != nil {
			t.Fatal(err)
		}
		assertSameJSON(t, []byte(marshalString(t, e)), []byte(in))
	})
	t.Run("decision rejects unknown", func(t *testing.T) {
		var d CommandExecutionApprovalDecision
		for _, in := range []string{`"approve"`, `{"bogus":{}}`, `{"acceptWithExecpolicyAmendment":{}}`} {
			if err := json.Unmarshal([]byte(in), &d); err == nil {
				t.Errorf("%s decoded as %+v", in, d)
			}
		}
	})
	t.Run("raw thread items round trip verbatim", func(t *testing.T) {
		for _, in := range []string{
			`{"type":"sleep","id":"s1","durationMs":5}`,
			`{"type":"imageGeneration","id":"g1","status":"completed","revisedPrompt":null,"failure":null,"generationId":null,"result":"abc"}`,
			`{"type":"futureThing","id":"f1","x":[1,2]}`,
		} {
			var it ThreadItem
			if err := json.Unmarshal([]byte(in), &it); err != nil {
				t.Fatal(err)
			}
			raw, ok := it.Body.(*RawThreadItem)
			if !ok || raw.ItemID() == "" {
				t.Fatalf("%s decoded as %T", in, it.Body)
			}
			assertSameJSON(t, []byte(marshalString(t, it)), []byte(in))
		}
	})
	t.Run("review mode items keep their kind", func(t *testing.T) {
		for _, in := range []string{
			`{"type":"enteredReviewMode","id":"r1","review":"current changes","startedAtMs":1,"completedAtMs":2}`,
			`{"type":"exitedReviewMode","id":"r1","review":"No issues.","startedAtMs":1,"completedAtMs":null}`,
		} {
			var it ThreadItem
			if err := json.Unmarshal([]byte(in), &it); err != nil {
				t.Fatal(err)
			}
			if _, ok := it.Body.(*ReviewModeItem); !ok {
				t.Fatalf("%s decoded as %T", in, it.Body)
			}
			assertSameJSON(t, []byte(marshalString(t, it)), []byte(in))
		}
	})
	t.Run("thread item without type", func(t *testing.T) {
		var it ThreadItem
		if err := json.Unmarshal([]byte(`{"id":"x"}`), &it); err == nil {
			t.Error("item without type decoded")
		}
		if _, err := json.Marshal(ThreadItem{}); err == nil {
			t.Error("item without body encoded")
		}
	})
	t.Run("request ids", func(t *testing.T) {
		ok := map[string]RequestID{
			`"initialize"`:         StringRequestID("initialize"),
			`-5`:                   IntRequestID(-5),
			`9223372036854775807`:  IntRequestID(9223372036854775807),
			`-9223372036854775808`: IntRequestID(-9223372036854775808),
			`""`:                   StringRequestID(""),
		}
		for in, want := range ok {
			var id RequestID
			if err := json.Unmarshal([]byte(in), &id); err != nil || id != want {
				t.Errorf("%s: got %+v, %v", in, id, err)
			}
			if got := marshalString(t, id); got != in {
				t.Errorf("%s re-encoded as %s", in, got)
			}
		}
		// 0.169.0 drops frames with these ids.
		for _, in := range []string{`9223372036854775808`, `1.5`, `null`, `true`, `1e3`} {
			var id RequestID
			if err := json.Unmarshal([]byte(in), &id); err == nil {
				t.Errorf("%s decoded as %+v", in, id)
			}
		}
	})
	t.Run("nullable", func(t *testing.T) {
		var p ThreadStartParams
		if err := json.Unmarshal([]byte(`{"serviceTier":null}`), &p); err != nil || !p.ServiceTier.Set || p.ServiceTier.Value != nil {
			t.Errorf("null: %+v, %v", p.ServiceTier, err)
		}
		p = ThreadStartParams{}
		if err := json.Unmarshal([]byte(`{"serviceTier":"fast"}`), &p); err != nil || p.ServiceTier.Value == nil || *p.ServiceTier.Value != "fast" {
			t.Errorf("value: %+v, %v", p.ServiceTier, err)
		}
	})
	t.Run("thread list cwd", func(t *testing.T) {
		var p ThreadListParams
		if err := json.Unmarshal([]byte(`{"cwd":"/a"}`), &p); err != nil || !reflect.DeepEqual(p.Cwd, StringList{"/a"}) {
			t.Errorf("string: %+v, %v", p.Cwd, err)
		}
		if err := json.Unmarshal([]byte(`{"cwd":["/a","/b"]}`), &p); err != nil || len(p.Cwd) != 2 {
			t.Errorf("array: %+v, %v", p.Cwd, err)
		}
		if err := json.Unmarshal([]byte(`{"cwd":7}`), &p); err == nil {
			t.Error("number cwd decoded")
		}
	})
}

// protocolCoreMethods are the client methods of docs/protocol.md §4 and §9.1.
var protocolCoreMethods = []string{
	"initialize", "thread/start", "thread/resume", "thread/fork", "thread/archive",
	"thread/unarchive", "thread/list", "thread/read", "thread/turns/list",
	"thread/items/list", "thread/name/set", "thread/unsubscribe", "turn/start",
	"turn/steer", "turn/interrupt", "model/list", "skills/list",
	"mcpServerStatus/list", "mcpServer/tool/call", "command/exec", "config/read",
	"account/read", "configRequirements/read", "thread/loaded/list",
	"collaborationMode/list", "hooks/list", "config/value/write", "config/batchWrite",
	"process/spawn", "process/writeStdin", "process/resizePty", "process/kill",
}

func TestClientMethodsCoverProtocol(t *testing.T) {
	for _, m := range protocolCoreMethods {
		if _, ok := ClientMethods[m]; !ok {
			t.Errorf("%s missing from ClientMethods", m)
		}
	}
	for _, m := range []string{
		MethodInitialize, MethodThreadStart, MethodThreadResume, MethodThreadFork, MethodThreadArchive,
		MethodThreadUnarchive, MethodThreadList, MethodThreadLoadedList, MethodThreadRead,
		MethodThreadTurnsList, MethodThreadItemsList, MethodThreadNameSet, MethodThreadUnsubscribe,
		MethodTurnStart, MethodTurnSteer, MethodTurnInterrupt, MethodModelList, MethodSkillsList,
		MethodMcpServerStatusList, MethodMcpServerToolCall, MethodCommandExec, MethodConfigRead,
		MethodConfigRequirementsRead, MethodAccountRead, MethodHooksList, MethodCollaborationModeList,
		MethodProcessSpawn, MethodProcessWriteStdin, MethodProcessResizePty, MethodProcessKill,
	} {
		if _, ok := ClientMethods[m]; !ok {
			t.Errorf("constant %s missing from ClientMethods", m)
		}
	}
	var exp int
	for m, info := range ClientMethods {
		if m == "" || strings.TrimSpace(m) != m {
			t.Errorf("bad method name %q", m)
		}
		if info.Experimental {
			exp++
		}
	}
	// Counts of the 0.171.0 bundles: 110 stable + 79 experimental.
	if len(ClientMethods) != 189 || exp != 79 {
		t.Errorf("got %d methods, %d experimental; want 189, 79", len(ClientMethods), exp)
	}
	for m, want := range map[string]MethodInfo{
		"initialize":                                {},
		"account/read":                              {},
		"configRequirements/read":                   {NullParams: true},
		"account/logout":                            {NullParams: true},
		"config/mcpServer/reload":                   {NullParams: true},
		"account/rateLimits/read":                   {NullParams: true},
		"collaborationMode/list":                    {Experimental: true},
		"thread/readState/update":                   {Experimental: true},
		"remoteControl/status/read":                 {Experimental: true, NullParams: true},
		"fs/readFile":                               {},
		"account/bedrock/checkGovCloudRequirements": {Experimental: true},
	} {
		if got := ClientMethods[m]; got != want {
			t.Errorf("%s: got %+v, want %+v", m, got, want)
		}
	}
	for _, m := range LegacyClientMethods {
		if _, ok := ClientMethods[m]; ok {
			t.Errorf("legacy %s is in ClientMethods", m)
		}
	}
}
