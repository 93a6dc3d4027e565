package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/appserver/appserver/api"
)

// ProviderSettings answers the model provider methods for the
// configuration of the caller's principal ("" for the operator's
// clients); *configview.Writer is one.
type ProviderSettings interface {
	// Providers lists the configured providers and the principal's
	// default one (modelProvider/list).
	Providers(principal string) api.ModelProviderListResult
	// Capabilities says what the principal's default provider supports
	// (modelProvider/capabilities/read).
	Capabilities(principal string) api.ModelProviderCapabilitiesReadResult
}

// noProviders is the ProviderSettings of a server configured without
// any: no provider, no capability.
type noProviders struct{}

func (noProviders) Providers(string) api.ModelProviderListResult {
	return api.ModelProviderListResult{}
}
func (noProviders) Capabilities(string) api.ModelProviderCapabilitiesReadResult {
	return api.ModelProviderCapabilitiesReadResult{}
}

// registerAccountMethods installs the account, provider and server
// information methods (docs/protocol.md §4.39 to §4.41).
func (s *Server) registerAccountMethods() {
	s.Handle(api.MethodAccountLogout, s.accountLogout)
	s.Handle(api.MethodAccountRateLimitsRead, s.rateLimitsRead)
	s.Handle(api.MethodAccountUsageRead, func(_ context.Context, c *Call) (any, error) {
		var p struct{}
		if err := DecodeParams(c, &p); err != nil {
			return nil, err
		}
		// The token usage of an OpenAI account: appserver's clients have
		// none, and the reference refuses an API-key user so.
		return nil, InvalidRequest("chatgpt authentication required to read token usage")
	})
	s.Handle("modelProvider/list", func(_ context.Context, c *Call) (any, error) {
		return s.cfg.Providers.Providers(c.Session.who.Name()), nil
	})
	s.Handle(api.MethodModelProviderCapabilitiesRead, func(_ context.Context, c *Call) (any, error) {
		var p struct{}
		if err := DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return s.cfg.Providers.Capabilities(c.Session.who.Name()), nil
	})
	s.Handle(api.MethodModelProviderDefaultSet, s.defaultProviderSet)
	s.Handle(api.MethodModelProviderConfigWrite, s.providerConfigWrite)
	s.Handle(api.MethodServerDiagnostics, s.diagnostics)
	s.Handle(api.MethodMemoryStatus, func(_ context.Context, c *Call) (any, error) {
		var p api.MemoryStatusParams
		if err := DecodeParams(c, &p); err != nil {
			return nil, err
		}
		if n := p.MinConsolidatedThreads; n != nil && (*n < 1 || *n > 4096) {
			return nil, InvalidParams("minConsolidatedThreads must be between 1 and 4096")
		}
		// appserver consolidates no memories: none, and nothing to wait
		// for, as the reference answers while it has none.
		return api.MemoryStatusResult{V2Ready: true}, nil
	})
	s.Handle(api.MethodMemoryReset, func(_ context.Context, c *Call) (any, error) {
		if err := decodeUnit(c); err != nil {
			return nil, err
		}
		// Nothing is kept, so nothing is left after a reset.
		return api.MemoryResetResult{}, nil
	})
}

// decodeUnit checks the params of a method that takes none: absent,
// null or an empty object, as the reference accepts.
func decodeUnit(c *Call) error {
	var m map[string]json.RawMessage
	if c.Params == nil || json.Unmarshal(c.Params, &m) == nil && len(m) == 0 {
		return nil
	}
	return InvalidRequest("Invalid request: invalid type: map, expected unit")
}

// accountLogout answers account/logout. appserver keeps no login of its
// clients (the providers' keys are the operator's): there is nothing to
// forget, and the client is told its account is none, as the reference
// tells an API-key user whose stored key it removed.
func (s *Server) accountLogout(_ context.Context, c *Call) (any, error) {
	if err := decodeUnit(c); err != nil {
		return nil, err
	}
	sess := c.Session
	c.After(func() {
		if n, err := s.NewNotification(api.NotifyAccountUpdated, api.AccountUpdatedNotification{}); err == nil {
			sess.Notify(n)
		}
	})
	return api.AccountLogoutResult{}, nil
}

// rateLimitsRead answers account/rateLimits/read from the rate limits the
// providers' responses reported (turns.Manager.RateLimits): the caller's
// default provider's as rateLimits (with nothing but its id when none
// are known yet), every provider's by id.
func (s *Server) rateLimitsRead(_ context.Context, c *Call) (any, error) {
	var p struct {
		ExcludeResetCreditDetails *bool `json:"excludeResetCreditDetails"`
		SupportsLunaReserve       *bool `json:"supportsLunaReserve"`
	}
	if err := DecodeParams(c, &p); err != nil {
		return nil, err
	}
	all := map[string]api.RateLimitSnapshot{}
	if s.cfg.Threads != nil {
		all = s.cfg.Threads.RateLimits()
	}
	def := s.cfg.Providers.Providers(c.Session.who.Name()).DefaultProviderID
	res := api.AccountRateLimitsReadResult{RateLimits: api.RateLimitSnapshot{LimitID: &def}}
	if snap, ok := all[def]; ok {
		res.RateLimits = snap
	}
	if len(all) > 0 {
		res.RateLimitsByLimitID = all
	}
	return res, nil
}

// configWriteError is a refusal of a provider method with the
// reference's config_write_error_code.
func configWriteError(code api.ConfigWriteErrorCode, format string, args ...any) *RPCError {
	return &RPCError{Code: CodeInvalidRequest, Message: fmt.Sprintf(format, args...), Data: api.ConfigWriteErrorData{ConfigWriteErrorCode: code}}
}

// defaultProviderSet answers modelProvider/default/set: model_provider
// written to the caller's user config through the config writer, so a
// principal changes the default of its own threads only, and the
// operator's clients the daemon's.
func (s *Server) defaultProviderSet(ctx context.Context, c *Call) (any, error) {
	var p api.ModelProviderDefaultSetParams
	if err := DecodeParams(c, &p, "providerId"); err != nil {
		return nil, err
	}
	who := c.Session.who.Name()
	if !slices.ContainsFunc(s.cfg.Providers.Providers(who).Data, func(m api.ModelProviderSummary) bool { return m.ID == p.ProviderID }) {
		return nil, configWriteError(api.ConfigValidationError, "Model provider `%s` is not configured.", p.ProviderID)
	}
	value, _ := json.Marshal(p.ProviderID)
	return s.writeConfig(ctx, c, api.ConfigBatchWriteParams{Edits: []api.ConfigEdit{{KeyPath: "model_provider", Value: value, MergeStrategy: "replace"}}})
}

// patchFields are the fields each variant of ProviderSettingsPatch
// takes, in the reference's order (its errors name them so).
var patchFields = map[string][]string{
	"customGateway": {"providerId", "name", "baseUrl", "envKey"},
	"bedrock":       {"providerId", "profile", "region"},
	"gcp":           {"providerId", "credentialFile", "location", "projectId"},
}

// patchProviderIDs are the provider ids the bedrock and gcp variants may
// name.
var patchProviderIDs = map[string][]string{
	"bedrock": {"amazon-bedrock", "amazon-bedrock-runtime"},
	"gcp":     {"gcp"},
}

// providerConfigWrite answers modelProvider/config/write. A patch is
// checked as the reference checks it, then written as config edits of
// model_providers.<id> through the config writer, whose allow-list keeps
// every provider's table (URL, key variable, headers) the operator's:
// no client, the operator's included, redirects a provider or names the
// variable whose value is sent as its key. appserver runs no Bedrock or
// Vertex AI provider, so their variants are refused.
func (s *Server) providerConfigWrite(ctx context.Context, c *Call) (any, error) {
	var raw struct {
		Settings json.RawMessage `json:"settings"`
	}
	if err := strictObject(c.Params, nil, []string{"settings"}); err != nil {
		return nil, err
	}
	if err := DecodeParams(c, &raw, "settings"); err != nil {
		return nil, err
	}
	var p api.ProviderSettingsPatch
	if err := json.Unmarshal(raw.Settings, &p); err != nil {
		return nil, InvalidRequest("Invalid request: %s", describeDecodeError(err))
	}
	fields, ok := patchFields[p.Type]
	switch {
	case !ok && p.Type == "":
		return nil, InvalidRequest("Invalid request: missing field `type`")
	case !ok:
		return nil, InvalidRequest("Invalid request: unknown variant `%s`, %s", p.Type, expected([]string{"customGateway", "bedrock", "gcp"}))
	}
	if err := strictObject(raw.Settings, []string{"type"}, fields); err != nil {
		return nil, err
	}
	if ids := patchProviderIDs[p.Type]; ids != nil {
		if p.ProviderID.Value == nil || !slices.Contains(ids, *p.ProviderID.Value) {
			got := "null"
			if p.ProviderID.Value != nil {
				got = *p.ProviderID.Value
			}
			return nil, InvalidRequest("Invalid request: unknown variant `%s`, %s", got, expected(ids))
		}
		return nil, configWriteError(api.ConfigValidationError, "appserver runs no %s provider: its model providers are OpenAI-compatible endpoints", p.Type)
	}
	who := c.Session.who.Name()
	list := s.cfg.Providers.Providers(who)
	known := func(id string) (api.ModelProviderSummary, bool) {
		i := slices.IndexFunc(list.Data, func(m api.ModelProviderSummary) bool { return m.ID == id })
		if i < 0 {
			return api.ModelProviderSummary{}, false
		}
		return list.Data[i], true
	}
	var id string
	var edits []api.ConfigEdit
	edit := func(key string, v api.Nullable[string]) {
		if v.Set {
			value, _ := json.Marshal(v.Value)
			edits = append(edits, api.ConfigEdit{KeyPath: "model_providers." + id + "." + key, Value: value, MergeStrategy: "replace"})
		}
	}
	if p.ProviderID.Value != nil {
		id = *p.ProviderID.Value
		cur, ok := known(id)
		switch {
		case ok && cur.Settings.Type != "customGateway":
			return nil, configWriteError(api.ConfigValidationError, "A custom provider or gateway cannot use a built-in provider ID.")
		case !ok:
			return nil, configWriteError(api.ConfigPathNotFound, "Unknown provider ID.")
		}
	} else {
		if p.Name.Value == nil || strings.TrimSpace(*p.Name.Value) == "" {
			return nil, configWriteError(api.ConfigValidationError, "Enter a provider name.")
		}
		id = newProviderID(*p.Name.Value, func(id string) bool { _, ok := known(id); return ok })
	}
	edit("name", p.Name)
	edit("base_url", p.BaseURL)
	edit("env_key", p.EnvKey)
	if p.ProviderID.Value == nil {
		edits = append(edits, api.ConfigEdit{KeyPath: "model_providers." + id + ".wire_api", Value: json.RawMessage(`"responses"`), MergeStrategy: "replace"})
	}
	if _, err := s.writeConfig(ctx, c, api.ConfigBatchWriteParams{Edits: edits}); err != nil {
		return nil, err
	}
	list = s.cfg.Providers.Providers(who)
	written, ok := known(id)
	if !ok {
		return nil, fmt.Errorf("provider %s written but not configured", id)
	}
	return api.ModelProviderConfigWriteResult{Provider: written}, nil
}

// newProviderID makes the id of a new provider from its name: lower-case
// letters and digits, other runs as "-", with a number added when taken.
func newProviderID(name string, taken func(string) bool) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	base := b.String()
	if base == "" {
		base = "custom"
	}
	id := base
	for n := 2; taken(id); n++ {
		id = base + "-" + strconv.Itoa(n)
	}
	return id
}

// strictObject refuses members of the JSON object raw that are neither a
// tag nor one of fields, as the reference's decoder of a type that denies
// unknown fields does (its error lists the fields).
func strictObject(raw json.RawMessage, tags, fields []string) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil // the typed decode reports it
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(fields, k) && !slices.Contains(tags, k) {
			return InvalidRequest("Invalid request: unknown field `%s`, %s", k, expected(fields))
		}
	}
	return nil
}

// expected lists the names a decoder accepts as the reference's words
// them: "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`,
// `c`".
func expected(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	switch len(q) {
	case 1:
		return "expected " + q[0]
	case 2:
		return "expected " + q[0] + " or " + q[1]
	}
	return "expected one of " + strings.Join(q, ", ")
}

// diagnostics answers server/diagnostics: the process and the server's
// gauges. Operator only (operatorOnly): the counts are everyone's.
func (s *Server) diagnostics(_ context.Context, c *Call) (any, error) {
	var p struct{}
	if err := DecodeParams(c, &p); err != nil {
		return nil, err
	}
	res := api.ServerDiagnosticsResult{Process: api.ServerDiagnosticsProcess{ID: uint32(os.Getpid()), ResidentMemoryBytes: residentBytes()}}
	gauge := func(name string, v int64) {
		res.Gauges = append(res.Gauges, api.ServerDiagnosticsGauge{Name: name, Value: uint64(max(v, 0))})
	}
	gauge("app.requests.in_flight", s.inFlight.Load())
	gauge("app.requests.queued", s.queued.Load())
	s.mu.Lock()
	conns := len(s.sessions)
	s.mu.Unlock()
	gauge("app.connections.open", int64(conns))
	if s.cfg.Threads != nil {
		loaded, running := s.cfg.Threads.Counts()
		gauge("core.threads.live", int64(loaded))
		gauge("core.turns.active", int64(running))
	}
	return res, nil
}

// residentBytes is the process's resident set size, from /proc; nil
// where that cannot be read.
func residentBytes() *uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return nil
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return nil
	}
	v := pages * uint64(os.Getpagesize())
	return &v
}
