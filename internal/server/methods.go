package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/jsonscan"
	"github.com/appserver/appserver/internal/turns"
)

// Info is what the server reports about itself and its configuration in
// initialize and the informational startup methods the Codex TUI calls.
type Info struct {
	// Version is the daemon version, reported in userAgent.
	Version string
	// Home is the absolute data directory, reported as codexHome.
	Home string
	// Models answers model/list; exactly one should be the default.
	Models []api.Model
	// Config answers config/read for a principal ("" for the operator's
	// credentials); nil reports an empty config.
	Config func(principal string) api.ConfigReadResult
	// Warnings are sent as configWarning notifications after initialize.
	Warnings []api.ConfigWarningNotification
}

func (i *Info) setDefaults() {
	if i.Version == "" {
		i.Version = "dev"
	}
}

// registerCoreMethods installs the connection-level and informational
// methods; threads and turns are registered by their own layer.
func (s *Server) registerCoreMethods() {
	s.Handle("initialize", s.initialize)
	s.registerAccountMethods()
	s.Handle("account/read", func(context.Context, *Call) (any, error) {
		// What the reference answers for a custom (non-OpenAI-auth) provider.
		return api.AccountReadResult{RequiresOpenaiAuth: false}, nil
	})
	s.Handle("configRequirements/read", func(context.Context, *Call) (any, error) {
		t := true
		return api.ConfigRequirementsReadResult{SupportsIndependentSpeedModes: &t}, nil
	})
	s.Handle("config/read", s.configRead)
	s.Handle("model/list", s.modelList)
	s.Handle("hooks/list", s.hooksList)
	s.Handle("thread/loaded/list", s.loadedList)
	s.Handle("permissionProfile/list", s.permissionProfileList)
	s.Handle("config/value/write", func(ctx context.Context, c *Call) (any, error) {
		var p api.ConfigValueWriteParams
		if err := DecodeParams(c, &p, "keyPath", "mergeStrategy"); err != nil {
			return nil, err
		}
		return s.writeConfig(ctx, c, api.ConfigBatchWriteParams{Edits: []api.ConfigEdit{p.ConfigEdit}, FilePath: p.FilePath, ExpectedVersion: p.ExpectedVersion})
	})
	s.Handle("config/batchWrite", func(ctx context.Context, c *Call) (any, error) {
		var p api.ConfigBatchWriteParams
		if err := DecodeParams(c, &p, "edits"); err != nil {
			return nil, err
		}
		return s.writeConfig(ctx, c, p)
	})
	s.registerPlugins()
	s.Handle("account/bedrock/checkGovCloudRequirements", func(context.Context, *Call) (any, error) {
		// No Bedrock accounts: nothing for the TUI to warn about.
		return api.GovCloudRequirementsResult{}, nil
	})
	s.Handle("collaborationMode/list", func(context.Context, *Call) (any, error) {
		// The two built-in modes the reference offers; the TUI's plan mode
		// toggles between them.
		plan, def := api.ModePlan, api.ModeDefault
		medium := "medium"
		return api.CollaborationModeListResult{Data: api.List[api.CollaborationModeMask]{
			{Name: "Plan", Mode: &plan, ReasoningEffort: &medium},
			{Name: "Default", Mode: &def},
		}}, nil
	})
}

// writeConfig checks the edits' merge strategies and hands them to the
// ConfigWriter; a refusal it classifies is answered as the reference
// answers it, -32600 with data {config_write_error_code}.
func (s *Server) writeConfig(ctx context.Context, c *Call, p api.ConfigBatchWriteParams) (any, error) {
	principal := c.Session.who.Name()
	if s.cfg.ConfigWriter == nil {
		return nil, InvalidRequest("config writes are not supported by this server")
	}
	for _, e := range p.Edits {
		if e.MergeStrategy != "replace" && e.MergeStrategy != "upsert" {
			return nil, InvalidRequest("Invalid request: unknown variant `%s`, expected `replace` or `upsert`", e.MergeStrategy)
		}
	}
	res, err := s.cfg.ConfigWriter.WriteConfig(ctx, principal, p)
	s.auditConfigWrite(ctx, c.Method, p, err)
	if err != nil {
		return nil, codedConfigError(err)
	}
	return res, nil
}

// codedConfigError answers a refused config write as the reference does:
// one the writer classified is -32600 with data {config_write_error_code};
// any other error is mapped as usual.
func codedConfigError(err error) error {
	var coded interface {
		ConfigWriteErrorCode() api.ConfigWriteErrorCode
	}
	if errors.As(err, &coded) {
		re := toRPCError(err)
		re.Data = api.ConfigWriteErrorData{ConfigWriteErrorCode: coded.ConfigWriteErrorCode()}
		return re
	}
	return err
}

// auditConfigWrite records a write of configuration keys by the method
// of that name (the keys, not their values: a value may be a secret) and
// its outcome.
func (s *Server) auditConfigWrite(ctx context.Context, method string, p api.ConfigBatchWriteParams, err error) {
	keys := make([]string, len(p.Edits))
	for i, e := range p.Edits {
		keys[i] = e.KeyPath
	}
	s.cfg.Audit.Record(ctx, audit.Entry{Kind: audit.KindConfigWrite, Detail: configWriteDetail{
		Method: method, Keys: keys, FilePath: p.FilePath, Error: errText(err),
	}})
}

// configWriteDetail is the detail of a config_write entry.
type configWriteDetail struct {
	// Method is the JSON-RPC method that wrote.
	Method   string   `json:"method"`
	Keys     []string `json:"keys"`
	FilePath *string  `json:"filePath,omitempty"`
	// Enabled is what a skills/config/write set.
	Enabled *bool `json:"enabled,omitempty"`
	// Error says why the write was refused; absent when it was made.
	Error string `json:"error,omitempty"`
}

// errText is err's message, "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// permissionProfileList lists the built-in permission profiles, paged by
// an index cursor when the client gives a limit: every one allowed, but
// for a principal those beyond its ceiling.
func (s *Server) permissionProfileList(_ context.Context, c *Call) (any, error) {
	var p api.PermissionProfileListParams
	if err := DecodeParams(c, &p); err != nil {
		return nil, err
	}
	all := turns.PermissionProfiles
	start := 0
	if p.Cursor != nil {
		n, err := strconv.Atoi(*p.Cursor)
		if err != nil || n < 0 || n > len(all) {
			return nil, InvalidRequest("invalid cursor: %s", *p.Cursor)
		}
		start = n
	}
	end := len(all)
	if p.Limit != nil && *p.Limit > 0 && start+int(*p.Limit) < end {
		end = start + int(*p.Limit)
	}
	res := api.PermissionProfileListResult{Data: api.List[api.PermissionProfileSummary]{}}
	ceiling, bounded := c.Session.who.Ceiling()
	for _, id := range all[start:end] {
		allowed := !bounded || ceiling.AllowsSandbox(turns.ProfileSandboxMode(id))
		res.Data = append(res.Data, api.PermissionProfileSummary{ID: id, Allowed: allowed})
	}
	if end < len(all) {
		next := strconv.Itoa(end)
		res.NextCursor = &next
	}
	return res, nil
}

// invoke runs the handler of c.Method after the protocol-level checks: the
// method must exist, experimental methods need the capability, and object
// params must be present.
func (s *Server) invoke(ctx context.Context, c *Call) (any, error) {
	info, inProtocol := api.ClientMethods[c.Method]
	if inProtocol && info.Experimental && !c.Session.experimental {
		return nil, InvalidRequest("%s requires experimentalApi capability", c.Method)
	}
	h, ok := s.methods[c.Method]
	if !ok {
		return nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found: " + c.Method}
	}
	if c.Params == nil && !(inProtocol && info.NullParams) {
		return nil, InvalidRequest("Invalid request: missing field `params`")
	}
	if err := s.admit(ctx, c); err != nil {
		return nil, err
	}
	return h(ctx, c)
}

// methodLabel bounds metric label cardinality: names outside the protocol
// and our table are counted as "unknown".
func (s *Server) methodLabel(method string) string {
	if _, ok := s.methods[method]; ok {
		return method
	}
	if _, ok := api.ClientMethods[method]; ok {
		return method
	}
	return "unknown"
}

// DecodeParams decodes c.Params into v, first checking that every dotted
// path in required is present, so that missing fields get the reference's
// `Invalid request: missing field` message. The checks read the members
// found when the frame was read; only v's decode decodes the params.
func DecodeParams(c *Call, v any, required ...string) error {
	raw := c.Params
	if raw == nil || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	members, ok := c.members()
	for _, path := range required {
		if err := requireField(raw, members, ok, path); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return InvalidRequest("Invalid request: %s", describeDecodeError(err))
	}
	return nil
}

// members returns the top-level members of c.Params found when its frame
// was read; ok is false when there are none to use (c.Params is not an
// object the scan settled, or c was not made by the connection).
func (c *Call) members() ([]jsonscan.Member, bool) {
	if c.req == nil || !sameBytes(c.Params, c.req.Params) {
		return nil, false
	}
	return c.req.Members()
}

func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// requireField checks that the dotted path is present in raw, whose
// top-level members are given when known: each level must be an object
// (JSON null counts as an empty one) holding the next key, matched
// exactly, the last of repeated keys counting, as decoding into a map
// does. What the scan does not settle goes to requirePath.
func requireField(raw json.RawMessage, members []jsonscan.Member, known bool, path string) error {
	var buf [16]jsonscan.Member
	rest := path
	for rest != "" {
		var key string
		key, rest, _ = strings.Cut(rest, ".")
		if !known {
			switch v := bytes.TrimSpace(raw); {
			case string(v) == "null":
				members, known = nil, true
			case len(v) > 0 && v[0] == '{':
				members, known = jsonscan.Object(v, buf[:0])
			}
			if !known {
				return requirePath(raw, strings.Split(path, "."))
			}
		}
		v, found := lastMember(members, key)
		if !found {
			return InvalidRequest("Invalid request: missing field `%s`", key)
		}
		raw, members, known = v, nil, false
	}
	return nil
}

// lastMember returns the value of the last member named key.
func lastMember(members []jsonscan.Member, key string) (json.RawMessage, bool) {
	var v json.RawMessage
	found := false
	for _, m := range members {
		if m.Plain && string(m.Key) == key || !m.Plain && jsonscan.Unquote(m.Key, true, true) == key {
			v, found = m.Value, true
		}
	}
	return v, found
}

// requirePath is requireField by decoding each level into a map.
func requirePath(raw json.RawMessage, path []string) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return InvalidRequest("Invalid request: invalid type: expected an object")
	}
	v, ok := obj[path[0]]
	if !ok {
		return InvalidRequest("Invalid request: missing field `%s`", path[0])
	}
	if len(path) == 1 {
		return nil
	}
	return requirePath(v, path[1:])
}

func describeDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if ok := asTypeError(err, &te); ok {
		return fmt.Sprintf("invalid type for field `%s`: expected %s", te.Field, te.Type)
	}
	return err.Error()
}

func asTypeError(err error, target **json.UnmarshalTypeError) bool {
	te, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*target = te
	}
	return ok
}

// validHeaderValue mirrors the HTTP header value rule the reference applies
// to clientInfo.name: visible ASCII, space and tab, no control characters.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		b := v[i]
		if b == '\t' || (b >= 0x20 && b < 0x7f) {
			continue
		}
		return false
	}
	return true
}

func (s *Server) initialize(_ context.Context, c *Call) (any, error) {
	sess := c.Session
	if sess.initialized.Load() {
		return nil, InvalidRequest("Already initialized")
	}
	var p api.InitializeParams
	if err := DecodeParams(c, &p, "clientInfo", "clientInfo.name", "clientInfo.version"); err != nil {
		return nil, err
	}
	if !validHeaderValue(p.ClientInfo.Name) {
		return nil, InvalidRequest("Invalid clientInfo.name: '%s'. Must be a valid HTTP header value.", p.ClientInfo.Name)
	}
	sess.clientName = p.ClientInfo.Name
	sess.clientVer = p.ClientInfo.Version
	if caps := p.Capabilities; caps != nil {
		sess.experimental = caps.ExperimentalAPI
		sess.eventSeq = caps.ExperimentalAPI && caps.EventSeq
		if len(caps.OptOutNotificationMethods) > 0 {
			sess.optOut = make(map[string]struct{}, len(caps.OptOutNotificationMethods))
			for _, m := range caps.OptOutNotificationMethods {
				sess.optOut[m] = struct{}{}
			}
		}
	}
	sess.initialized.Store(true)
	s.byID.put(sess)
	sess.OnClose(func() { s.byID.del(sess.id) })
	if s.onInitialized != nil {
		s.onInitialized(sess)
	}
	c.After(func() {
		for _, w := range s.cfg.Info.Warnings {
			if n, err := s.NewNotification("configWarning", w); err == nil {
				sess.Notify(n)
			}
		}
	})
	platform := "unix"
	if runtime.GOOS == "windows" {
		platform = "windows"
	}
	osName := runtime.GOOS
	if osName == "darwin" {
		osName = "macos"
	}
	return api.InitializeResult{
		UserAgent: fmt.Sprintf("appserver/%s (%s; %s) (%s; %s)",
			s.cfg.Info.Version, osName, runtime.GOARCH, p.ClientInfo.Name, p.ClientInfo.Version),
		CodexHome:      s.cfg.Info.Home,
		PlatformFamily: platform,
		PlatformOs:     osName,
	}, nil
}

func (s *Server) configRead(_ context.Context, c *Call) (any, error) {
	var p api.ConfigReadParams
	if err := DecodeParams(c, &p); err != nil {
		return nil, err
	}
	res := api.ConfigReadResult{Config: map[string]any{}, Origins: map[string]api.ConfigLayerMetadata{}}
	if s.cfg.Info.Config != nil {
		res = s.cfg.Info.Config(c.Session.who.Name())
	}
	if !p.IncludeLayers {
		res.Layers = nil
	}
	if !c.Session.who.IsOperator() {
		// The other principals (their names and roots) are not its
		// business.
		delete(res.Config, "http_api")
		for k := range res.Origins {
			if strings.HasPrefix(k, "http_api.") {
				delete(res.Origins, k)
			}
		}
	}
	return res, nil
}

func (s *Server) modelList(_ context.Context, c *Call) (any, error) {
	var p api.ModelListParams
	if err := DecodeParams(c, &p); err != nil {
		return nil, err
	}
	models := make([]api.Model, 0, len(s.cfg.Info.Models))
	for _, m := range s.cfg.Info.Models {
		if m.Hidden && (p.IncludeHidden == nil || !*p.IncludeHidden) {
			continue
		}
		models = append(models, m)
	}
	page, next, err := pageByOffset(models, p.Cursor, p.Limit)
	if err != nil {
		return nil, err
	}
	return api.ModelListResult{Data: page, NextCursor: next}, nil
}

func (s *Server) loadedList(ctx context.Context, c *Call) (any, error) {
	var p api.ThreadLoadedListParams
	if err := DecodeParams(c, &p); err != nil {
		return nil, err
	}
	ids := []string{}
	if s.cfg.LoadedThreads != nil {
		ids = s.visibleIDs(ctx, c.Session.who, s.cfg.LoadedThreads())
	}
	page, next, err := pageByOffset(ids, p.Cursor, p.Limit)
	if err != nil {
		return nil, err
	}
	return api.ThreadLoadedListResult{Data: page, NextCursor: next}, nil
}

// skillsList answers skills/list from Config.Skills, for the daemon's
// working directory when the request names none (a principal's: its own
// root, and only directories inside its roots), with the extra roots the
// principal set.
func (s *Server) skillsList(ctx context.Context, c *Call) (any, error) {
	var p api.SkillsListParams
	if err := DecodeParams(c, &p); err != nil {
		return nil, err
	}
	cwd := s.cfg.Cwd
	if who := c.Session.who; !who.IsOperator() {
		// A principal lists the skills of its own directories only.
		for i, dir := range p.Cwds {
			res, err := who.CheckPath(fmt.Sprintf("cwds[%d]", i), dir)
			if err != nil {
				return nil, err
			}
			p.Cwds[i] = res
		}
		root, err := who.DefaultRoot()
		if err != nil {
			return nil, err
		}
		cwd = root
	}
	res, err := s.cfg.Skills.SkillsList(ctx, p, cwd, s.skillExtraRoots(c.Session.who))
	if err != nil {
		return nil, err
	}
	s.markDisabled(c.Session.who, res)
	return res, nil
}

// hooksList answers hooks/list. appserver runs no lifecycle hooks, so
// each directory's entry lists none: the directories are a loaded
// thread's cwd (threadId), the request's cwds, or else the caller's own
// working directory (the daemon's, or a principal's default root).
func (s *Server) hooksList(ctx context.Context, c *Call) (any, error) {
	var p api.HooksListParams
	if err := DecodeParams(c, &p); err != nil {
		return nil, err
	}
	cwds := p.Cwds
	switch {
	case p.ThreadID != nil && len(p.Cwds) > 0:
		return nil, InvalidRequest("specify either threadId or cwds")
	case p.ThreadID != nil:
		if s.cfg.Threads == nil {
			return nil, InvalidRequest("thread not found: %s", *p.ThreadID)
		}
		res, err := s.cfg.Threads.ReadThread(ctx, api.ThreadReadParams{ThreadID: *p.ThreadID})
		if err != nil {
			return nil, err
		}
		cwds = []string{res.Thread.Cwd}
	case len(cwds) == 0:
		cwd := s.cfg.Cwd
		if who := c.Session.who; !who.IsOperator() {
			root, err := who.DefaultRoot()
			if err != nil {
				return nil, err
			}
			cwd = root
		}
		cwds = []string{cwd}
	}
	data := make(api.List[api.HooksListEntry], 0, len(cwds))
	for _, cwd := range cwds {
		data = append(data, api.HooksListEntry{Cwd: cwd})
	}
	return api.HooksListResult{Data: data}, nil
}

// pageByOffset pages a small in-memory list with the reference's cursor
// form for model/list: the next offset as a decimal string.
func pageByOffset[T any](all []T, cursor *string, limit *uint32) ([]T, *string, error) {
	start := 0
	if cursor != nil && *cursor != "" {
		n, err := parseOffset(*cursor)
		if err != nil || n > len(all) {
			return nil, nil, InvalidRequest("invalid cursor: %s", *cursor)
		}
		start = n
	}
	end := len(all)
	if limit != nil && *limit > 0 && start+int(*limit) < end {
		end = start + int(*limit)
	}
	var next *string
	if end < len(all) {
		v := fmt.Sprint(end)
		next = &v
	}
	return all[start:end], next, nil
}

func parseOffset(s string) (int, error) {
	n := 0
	if s == "" {
		return 0, fmt.Errorf("empty")
	}
	for _, r := range s {
		if r < '0' || r > '9' || n > 1<<20 {
			return 0, fmt.Errorf("not an offset")
		}
		n = n*10 + int(r-'0')
	}
	return n, nil
}

// Methods lists the methods of the table, sorted: what the server
// answers other than -32601.
func (s *Server) Methods() []string {
	out := make([]string, 0, len(s.methods))
	for m := range s.methods {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
