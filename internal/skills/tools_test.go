package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/registry"
)

// toolEnv is a catalog with a local root and a remote provider, exposed
// through a real registry dispatcher.
type toolEnv struct {
	t      *testing.T
	root   string
	cwd    string
	remote *mcpServer
	cat    *Catalog
	disp   *registry.Dispatcher
	reg    *registry.Registry
	calls  int
}

func newToolEnv(t *testing.T, localSkills int) *toolEnv {
	env := &toolEnv{t: t, root: t.TempDir(), cwd: t.TempDir(), remote: newMCPServer(t)}
	for i := range localSkills {
		writeSkill(t, filepath.Join(env.root, fmt.Sprintf("skill-%03d", i)), fmt.Sprintf("skill-%03d", i),
			fmt.Sprintf("Skill number %d: use it when the task needs step %d. %s", i, i, strings.Repeat("Details. ", 20)))
	}
	env.remote.setPages([]map[string]any{
		skillResource("skill://plugin_demo/deploy", "demo-plugin", "deploy", "Deploy the app"),
		skillResource("skill://plugin_demo/release", "demo-plugin", "release", "Cut a release"),
	})
	env.remote.setContent("skill://plugin_demo/deploy/SKILL.md", "# Deploy\nRun the deploy.\n")
	env.remote.setContent("skill://plugin_demo/deploy/references/deploy.md", "reference")
	cat, err := New(Config{
		Roots:  []string{env.root},
		Remote: map[string]RemoteConfig{"codex_apps": {URL: env.remote.srv.URL, BearerTokenEnv: "SKILLS_TOKEN"}},
	}, Options{Remote: RemoteOptions{Getenv: func(string) string { return testToken }}})
	require.NoError(t, err)
	t.Cleanup(cat.Close)
	env.cat = cat
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, Register(b, cat))
	_, env.reg = b.Build()
	env.disp = env.reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: "turn-1", Cwd: env.cwd}})
	return env
}

// call dispatches skills.<name> with raw arguments and checks the hard cap
// on the exact text the model receives.
func (e *toolEnv) call(name, args string) (string, bool) {
	e.t.Helper()
	e.calls++
	item, err := e.disp.Dispatch(testCtx(e.t), registry.Call{
		CallID: fmt.Sprintf("call-%d", e.calls), Namespace: Namespace, Name: name,
		Payload: registry.FunctionPayload{Arguments: args},
	})
	require.NoError(e.t, err)
	out := item.Output.Text
	require.LessOrEqual(e.t, len(out), MaxResultBytes, "tool result over the hard cap")
	return out, item.Output.Succeeded()
}

func (e *toolEnv) mustCall(name string, args any, v any) string {
	e.t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(e.t, err)
	out, ok := e.call(name, string(raw))
	require.True(e.t, ok, "skills.%s failed: %s", name, out)
	require.NoError(e.t, json.Unmarshal([]byte(out), v))
	return out
}

func (e *toolEnv) mustFail(name string, args any) string {
	e.t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		require.NoError(e.t, err)
		raw = string(b)
	}
	out, success := e.call(name, raw)
	require.False(e.t, success, "skills.%s unexpectedly succeeded: %s", name, out)
	return out
}

// listAll pages through skills.list and returns every skill.
func (e *toolEnv) listAll() ([]ListedSkill, int) {
	var all []ListedSkill
	args := map[string]any{}
	pages := 0
	for {
		var res ListResult
		raw := e.mustCall(ListTool, args, &res)
		pages++
		assert.Contains(e.t, raw, `"next_cursor":`)
		all = append(all, res.Skills...)
		if res.NextCursor == nil {
			return all, pages
		}
		require.True(e.t, res.Truncated)
		args = map[string]any{"cursor": *res.NextCursor}
	}
}

func TestRegisterOnlyWithProviders(t *testing.T) {
	empty, err := NewCatalog(nil)
	require.NoError(t, err)
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, Register(b, empty))
	require.NoError(t, Register(b, nil))
	specs, _ := b.Build()
	assert.Empty(t, specs, "no provider, no skills namespace")
	assert.False(t, Config{}.Configured(), "the workspace defaults alone do not offer the tools")
	assert.True(t, Config{Roots: []string{"/x"}}.Configured())

	cat, err := New(Config{Roots: []string{t.TempDir()}}, Options{})
	require.NoError(t, err)
	b = registry.NewBuilder(registry.Config{})
	require.NoError(t, Register(b, cat))
	specs, reg := b.Build()
	require.Len(t, specs, 1)
	assert.True(t, specs[0].SupportsParallelToolCalls)
	h, ok := reg.Handler(Namespace, ReadTool)
	require.True(t, ok)
	assert.False(t, h.IsMutating(context.Background(), registry.Invocation{}))

	raw, err := json.Marshal(specs[0].Spec)
	require.NoError(t, err)
	assert.JSONEq(t, `{
	  "type": "namespace", "name": "skills", "description": "Tools in the skills namespace.",
	  "tools": [
	    {"type": "function", "name": "list", "strict": false, "description": `+jsonString(ListDescription)+`,
	     "parameters": {"type": "object", "additionalProperties": false, "properties": {
	       "cursor": {"type": "string", "description": "Opaque next_cursor from a previous skills.list result; omit for the first page."}}}},
	    {"type": "function", "name": "read", "strict": false, "description": `+jsonString(ReadDescription)+`,
	     "parameters": {"type": "object", "additionalProperties": false, "required": ["authority", "package", "resource"], "properties": {
	       "authority": {"type": "object", "description": "The authority object returned by skills.list for the package.", "additionalProperties": false, "required": ["kind", "id"], "properties": {
	         "kind": {"type": "string", "description": "Authority kind, exactly as returned by skills.list."},
	         "id": {"type": "string", "description": "Authority id, exactly as returned by skills.list."}}},
	       "package": {"type": "string", "description": "Package id returned by skills.list."},
	       "resource": {"type": "string", "description": "Resource id inside the package; start with the skill's main_resource."},
	       "cursor": {"type": "string", "description": "Opaque next_cursor from the previous skills.read of this resource; omit to read from the beginning."}}}}
	  ]}`, string(raw))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestListAcrossPagesAndReadInPieces is the scenario at the tool
// level: the model lists skills across pages and reads a 50 KB resource
// with emoji and CJK text in pieces; every result fits 8 192 bytes and the
// pieces reassemble the file byte for byte.
func TestListAcrossPagesAndReadInPieces(t *testing.T) {
	env := newToolEnv(t, 30)
	skills, pages := env.listAll()
	assert.GreaterOrEqual(t, pages, 2)
	require.Len(t, skills, 32)
	assert.Equal(t, Authority{Kind: KindLocal, ID: LocalAuthorityID}, skills[0].Authority)
	assert.Equal(t, "skill-000", skills[0].Name)
	last := skills[31]
	assert.Equal(t, ListedSkill{
		Authority: Authority{Kind: KindRemote, ID: "codex_apps"}, Package: "skill://plugin_demo/release",
		Name: "demo-plugin:release", Description: "Cut a release", MainResource: "skill://plugin_demo/release/SKILL.md",
	}, last)

	// A 50 KB resource: emoji, CJK, quotes and newlines.
	var big strings.Builder
	for big.Len() < 50_000 {
		fmt.Fprintf(&big, "## Step %d 🚀\n部署应用程序到生产环境。\"quoted\" \\path\\ \t👩‍💻\n", big.Len())
	}
	text := big.String()
	skill := skills[7]
	writeFile(t, filepath.Join(env.root, "skill-007", "references", "big.md"), text)
	resource := skill.Package + "/references/big.md"
	var got strings.Builder
	args := map[string]any{"authority": skill.Authority, "package": skill.Package, "resource": resource}
	pieces := 0
	for {
		var res ReadResult
		raw := env.mustCall(ReadTool, args, &res)
		pieces++
		assert.LessOrEqual(t, len(raw), PageBudgetBytes)
		assert.Equal(t, resource, res.Resource)
		got.WriteString(res.Contents)
		if res.NextCursor == nil {
			assert.False(t, res.Truncated)
			break
		}
		assert.True(t, res.Truncated)
		args["cursor"] = *res.NextCursor
	}
	assert.Greater(t, pieces, 6)
	assert.Equal(t, text, got.String(), "the pieces concatenate to the resource byte for byte")

	// The main resource of a remote skill, routed to its provider.
	var res ReadResult
	env.mustCall(ReadTool, map[string]any{"authority": last.Authority, "package": "skill://plugin_demo/deploy", "resource": "skill://plugin_demo/deploy/SKILL.md"}, &res)
	assert.Equal(t, ReadResult{Resource: "skill://plugin_demo/deploy/SKILL.md", Contents: "# Deploy\nRun the deploy.\n"}, res)
}

func TestListArguments(t *testing.T) {
	env := newToolEnv(t, 2)
	out, ok := env.call(ListTool, "")
	require.True(t, ok, out)
	assert.True(t, strings.HasPrefix(out, `{"skills":[{"authority":{"kind":"local","id":"local"},"package":"skill://local/user-`), out)
	out, ok = env.call(ListTool, "  ")
	assert.True(t, ok, out)
	out = env.mustFail(ListTool, `{"cursor":"x","extra":1}`)
	assert.Contains(t, out, `failed to parse function arguments: json: unknown field "extra"`)
	out = env.mustFail(ListTool, `{"cursor":"0"}`)
	assert.Contains(t, out, "invalid skills.list cursor")
	out = env.mustFail(ListTool, `[1]`)
	assert.Contains(t, out, "failed to parse function arguments")
	long := env.mustFail(ListTool, `{"`+strings.Repeat("x", 20000)+`":1}`)
	assert.LessOrEqual(t, len(long), maxErrorBytes)
}

func TestListCursorIsTamperEvidentAndGoesStale(t *testing.T) {
	env := newToolEnv(t, 30)
	var first ListResult
	env.mustCall(ListTool, map[string]any{}, &first)
	require.NotNil(t, first.NextCursor)
	cur := *first.NextCursor

	forged := []byte(cur)
	forged[5] ^= 1
	out := env.mustFail(ListTool, map[string]any{"cursor": string(forged)})
	assert.Contains(t, out, "invalid skills.list cursor")

	// A catalog rebuilt in the same process (a config reload) accepts it.
	rebuilt, err := New(Config{
		Roots:  []string{env.root},
		Remote: map[string]RemoteConfig{"codex_apps": {URL: env.remote.srv.URL, BearerTokenEnv: "SKILLS_TOKEN"}},
	}, Options{Remote: RemoteOptions{Getenv: func(string) string { return testToken }}})
	require.NoError(t, err)
	t.Cleanup(rebuilt.Close)
	second, _, err := rebuilt.List(testCtx(t), env.cwd, cur)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("skill-%03d", len(first.Skills)), second.Skills[0].Name)

	// A cursor from another process (another key) is rejected the same way.
	other, err := New(Config{Roots: []string{env.root}}, Options{})
	require.NoError(t, err)
	other.codec = newCursorCodec()
	_, _, err = other.List(testCtx(t), env.cwd, cur)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid skills.list cursor")

	// The catalog changes: the cursor is stale.
	writeSkill(t, filepath.Join(env.root, "aaa-new"), "aaa-new", "new")
	env.cat.Local().Invalidate()
	out = env.mustFail(ListTool, map[string]any{"cursor": cur})
	assert.Contains(t, out, "skills.list cursor is stale")
}

func TestListWarnings(t *testing.T) {
	env := newToolEnv(t, 1)
	writeFile(t, filepath.Join(env.root, "broken", SkillFileName), "no front matter")
	env.remote.srv.Close() // the remote provider is down
	var res ListResult
	env.mustCall(ListTool, map[string]any{}, &res)
	assert.Len(t, res.Skills, 1)
	require.Len(t, res.Warnings, 2)
	assert.Contains(t, res.Warnings[0], "missing YAML frontmatter")
	assert.Contains(t, res.Warnings[1], "skills from remote:codex_apps are unavailable: remote skill discovery failed")
	for _, w := range res.Warnings {
		assert.LessOrEqual(t, len(w), maxWarningBytes)
	}
}

func TestListCapsAtHundredSkills(t *testing.T) {
	env := newToolEnv(t, 110)
	skills, pages := env.listAll()
	assert.Len(t, skills, MaxListedSkills)
	assert.GreaterOrEqual(t, pages, 5)
	var res ListResult
	env.mustCall(ListTool, map[string]any{}, &res)
	assert.True(t, res.Truncated)
}

// TestReadRejections covers every rejection with the text the model reads.
func TestReadRejections(t *testing.T) {
	env := newToolEnv(t, 3)
	skills, _ := env.listAll()
	local := skills[0]
	pkg := local.Package
	remote := Authority{Kind: KindRemote, ID: "codex_apps"}
	writeFile(t, filepath.Join(env.root, "skill-000", "binary.bin"), "\xff\xfe\x00")
	read := func(a Authority, p, r string) map[string]any {
		return map[string]any{"authority": a, "package": p, "resource": r}
	}
	cases := []struct {
		name string
		args any
		want string
	}{
		{"cross-package", read(local.Authority, pkg, skills[1].Package+"/SKILL.md"), "not inside the requested package (cross-package resources are rejected)"},
		{"cross-authority package", read(remote, pkg, pkg+"/SKILL.md"), "skill package is not available from the requested authority"},
		{"package itself", read(local.Authority, pkg, pkg), "names the package itself"},
		{"non-canonical scheme", read(local.Authority, pkg, "SKILL"+strings.TrimPrefix(pkg, "skill")+"/SKILL.md"), "non-canonical"},
		{"non-canonical escape", read(local.Authority, pkg, pkg+"/%41.md"), "non-canonical"},
		{"query string", read(local.Authority, pkg, pkg+"/SKILL.md?raw=1"), "query strings are not allowed"},
		{"fragment", read(local.Authority, pkg, pkg+"/SKILL.md#intro"), "fragments are not allowed"},
		{"dot-dot", read(local.Authority, pkg, pkg+"/../skill-001/SKILL.md"), "dot segments (. and ..) are not allowed"},
		{"encoded dot-dot", read(local.Authority, pkg, pkg+"/%2e%2e/skill-001/SKILL.md"), "encoded dots or path separators"},
		{"encoded slash", read(local.Authority, pkg, pkg+"/..%2fskill-001%2fSKILL.md"), "encoded dots or path separators"},
		{"absolute path", read(local.Authority, pkg, "/etc/passwd"), "absolute filesystem paths are not accepted"},
		{"absolute path package", read(local.Authority, "/etc", "/etc/passwd"), "package is not a valid skill URI: absolute filesystem paths"},
		{"unknown authority id", read(Authority{Kind: KindRemote, ID: "nope"}, pkg, pkg+"/SKILL.md"), "unknown skill authority remote:nope"},
		{"unknown authority kind", read(Authority{Kind: "cloud", ID: "x"}, pkg, pkg+"/SKILL.md"), `unknown skill authority kind "cloud"`},
		{"unknown package", read(local.Authority, "skill://local/user-0000000000/nope", "skill://local/user-0000000000/nope/SKILL.md"), "skill package is not available from the requested authority"},
		{"unknown remote package", read(remote, "skill://plugin_demo/gone", "skill://plugin_demo/gone/SKILL.md"), "skill package is not available from the requested authority"},
		{"missing resource", read(local.Authority, pkg, pkg+"/nope.md"), "resource not found in the skill package"},
		{"binary resource", read(local.Authority, pkg, pkg+"/binary.bin"), "resource is not UTF-8 text"},
		{"remote missing resource", read(remote, "skill://plugin_demo/deploy", "skill://plugin_demo/deploy/nope.md"), "failed to read the resource: MCP error -32002: Resource not found"},
		{"control character", read(local.Authority, pkg, pkg+"/\x01"), "resource must be non-empty, contain no control characters, and be at most 2048 bytes"},
		{"empty package", read(local.Authority, "", pkg+"/SKILL.md"), "package must be non-empty"},
		{"long authority id", read(Authority{Kind: KindRemote, ID: strings.Repeat("a", 300)}, pkg, pkg+"/SKILL.md"), "authority.id must be non-empty, contain no control characters, and be at most 256 bytes"},
		{"too long resource", read(local.Authority, pkg, pkg+"/"+strings.Repeat("a", 3000)), "resource must be non-empty, contain no control characters, and be at most 2048 bytes"},
		{"unknown field", `{"authority":{"kind":"local","id":"local"},"package":"` + pkg + `","resource":"` + pkg + `/SKILL.md","path":"/etc"}`, `json: unknown field "path"`},
		{"unknown authority field", `{"authority":{"kind":"local","id":"local","x":1},"package":"` + pkg + `","resource":"` + pkg + `/SKILL.md"}`, `json: unknown field "x"`},
		{"forged cursor", map[string]any{"authority": local.Authority, "package": pkg, "resource": pkg + "/SKILL.md", "cursor": "1000"}, "invalid skills.read cursor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := env.mustFail(ReadTool, tc.args)
			assert.Contains(t, out, tc.want)
		})
	}
}

func TestReadCursorRules(t *testing.T) {
	env := newToolEnv(t, 2)
	skills, _ := env.listAll()
	s0, s1 := skills[0], skills[1]
	writeFile(t, filepath.Join(env.root, "skill-000", "big.md"), strings.Repeat("0123456789\n", 3000))
	writeFile(t, filepath.Join(env.root, "skill-000", "big2.md"), strings.Repeat("abcdefghij\n", 3000))
	args := map[string]any{"authority": s0.Authority, "package": s0.Package, "resource": s0.Package + "/big.md"}
	var first ReadResult
	env.mustCall(ReadTool, args, &first)
	require.NotNil(t, first.NextCursor)
	cur := *first.NextCursor

	// A list cursor is not a read cursor.
	var list ListResult
	env.mustCall(ListTool, map[string]any{}, &list)
	withCursor := func(resource, cursor string) map[string]any {
		return map[string]any{"authority": s0.Authority, "package": s0.Package, "resource": resource, "cursor": cursor}
	}
	// Another resource of the same package.
	out := env.mustFail(ReadTool, withCursor(s0.Package+"/big2.md", cur))
	assert.Contains(t, out, "invalid skills.read cursor: it continues a different resource")
	// Another package.
	out = env.mustFail(ReadTool, map[string]any{"authority": s1.Authority, "package": s1.Package, "resource": s1.Package + "/SKILL.md", "cursor": cur})
	assert.Contains(t, out, "it continues a different resource")
	// Tampered.
	forged := []byte(cur)
	forged[10] ^= 2
	out = env.mustFail(ReadTool, withCursor(s0.Package+"/big.md", string(forged)))
	assert.Contains(t, out, "invalid skills.read cursor")

	// The resource changes: the cursor is stale.
	writeFile(t, filepath.Join(env.root, "skill-000", "big.md"), strings.Repeat("9876543210\n", 3000))
	out = env.mustFail(ReadTool, withCursor(s0.Package+"/big.md", cur))
	assert.Contains(t, out, "skills.read cursor is stale")
}

func TestReadPackageRemovedSinceList(t *testing.T) {
	env := newToolEnv(t, 2)
	skills, _ := env.listAll()
	s := skills[1]
	require.NoError(t, os.RemoveAll(filepath.Join(env.root, "skill-001")))
	out := env.mustFail(ReadTool, map[string]any{"authority": s.Authority, "package": s.Package, "resource": s.MainResource})
	assert.Equal(t, "skill package is not available from the requested authority", out)

	remote := skills[len(skills)-1]
	require.Equal(t, KindRemote, remote.Authority.Kind)
	env.remote.setPages([]map[string]any{skillResource("skill://plugin_demo/deploy", "demo-plugin", "deploy", "Deploy the app")})
	out = env.mustFail(ReadTool, map[string]any{"authority": remote.Authority, "package": remote.Package, "resource": remote.MainResource})
	assert.Equal(t, "skill package is not available from the requested authority", out)
}

func TestReadWithoutAuthority(t *testing.T) {
	env := newToolEnv(t, 1)
	skills, _ := env.listAll()
	var res ReadResult
	env.mustCall(ReadTool, map[string]any{"package": skills[0].Package, "resource": skills[0].MainResource}, &res)
	assert.Contains(t, res.Contents, "name: skill-000")
}

// lyingProvider answers reads with another resource id.
type lyingProvider struct{ *LocalProvider }

func (p lyingProvider) Authority() Authority { return Authority{Kind: KindRemote, ID: "liar"} }

func (p lyingProvider) Read(ctx context.Context, q Query, pkg, resource string) (Resource, error) {
	r, err := p.LocalProvider.Read(ctx, q, pkg, resource)
	r.ID += "x"
	return r, err
}

func TestReadDifferentResourceIsFatal(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "a"), "a", "d")
	cat, err := NewCatalog(nil, lyingProvider{NewLocalProvider([]string{root}, LocalOptions{})})
	require.NoError(t, err)
	l, err := cat.Providers()[0].List(testCtx(t), Query{})
	require.NoError(t, err)
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, Register(b, cat))
	_, reg := b.Build()
	args, _ := json.Marshal(map[string]any{"authority": Authority{Kind: KindRemote, ID: "liar"}, "package": l.Entries[0].Package, "resource": l.Entries[0].MainResource})
	_, err = reg.NewDispatcher(registry.DispatcherConfig{}).Dispatch(testCtx(t), registry.Call{
		CallID: "c", Namespace: Namespace, Name: ReadTool, Payload: registry.FunctionPayload{Arguments: string(args)},
	})
	require.ErrorIs(t, err, registry.ErrFatal)
	assert.Contains(t, err.Error(), "skill provider returned a different resource")
}

func TestExternalContextMarker(t *testing.T) {
	env := newToolEnv(t, 1)
	for _, name := range []string{ListTool, ReadTool} {
		h, ok := env.reg.Handler(Namespace, name)
		require.True(t, ok)
		r, ok := h.(ExternalContextReporter)
		require.True(t, ok, "skills handlers report external context")
		assert.True(t, r.ContainsExternalContext())
		assert.True(t, IsExternalContext(Namespace, name))
	}
	assert.False(t, IsExternalContext("", "shell"))
}

func TestNewCatalogValidatesAuthorities(t *testing.T) {
	lp := NewLocalProvider([]string{t.TempDir()}, LocalOptions{})
	_, err := NewCatalog(nil, lp, lp)
	assert.Error(t, err)
	_, err = NewCatalog(nil, nil)
	assert.Error(t, err)
	_, err = New(Config{Remote: map[string]RemoteConfig{"bad id": {URL: "https://x"}}}, Options{})
	assert.Error(t, err)
}

// The namespace spec is built once, its tools' JSON with it: every turn
// gets the same tools, encoded from memory, the bytes they encode to.
func TestSpecBuiltOnce(t *testing.T) {
	a, b := Spec(), Spec()
	require.Same(t, &a.Tools[0], &b.Tools[0])
	for _, f := range a.Tools {
		require.True(t, a.Cache.Has(f), f.Name)
	}
	fresh := buildSpec()
	want, err := fresh.MarshalJSON()
	require.NoError(t, err)
	got, err := registry.EncodeSpec(a)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}
