package configview

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
)

// Writer serves config/value/write and config/batchWrite with the user
// configs in data_dir (config.WriteOverlay), and config/read with the
// configuration each writer sees. The operator's clients write the
// daemon-wide user config; with principals configured, a principal's
// clients write that principal's own, which applies to that principal
// only, after the daemon-wide one. Clients write only the keys of the
// allow-list (config.FilterUserConfig): a refused key or value answers an
// error naming it, with the reference's config_write_error_code.
//
// Every edit is checked by loading the whole configuration with the new
// user config, and the configuration loaded again goes to the daemon's
// services that take values while running (the defaults of new threads);
// the rest apply from the next start. A write whose value a later layer
// (environment, flags, -c overrides) hides answers okOverridden.
type Writer struct {
	sources config.Sources
	apply   func(principal string, cfg *config.Config)

	mu  sync.Mutex // one write at a time, so expectedVersion means something
	cur *config.Config
	// principals caches the configurations of principals (theirs, over
	// the daemon-wide one), loaded on first use and after their writes;
	// a daemon-wide write empties it.
	principals map[string]*config.Config
}

// NewWriter returns the writer of the user configs of cfg's data_dir;
// every edit is checked against the configuration loaded from sources (cfg
// is the daemon-wide one loaded at start). After a write, apply (when not
// nil) gets the configuration loaded again and the principal it is for
// ("" for the daemon-wide one), to put its live values to use; it gets
// the configuration of every principal with a user config at once, and
// the warnings of loading those are returned (the keys they hold that
// clients may not write, left out).
func NewWriter(cfg *config.Config, sources config.Sources, apply func(principal string, cfg *config.Config)) (*Writer, []config.Warning) {
	w := &Writer{sources: sources, apply: apply, cur: cfg, principals: map[string]*config.Config{}}
	var warnings []config.Warning
	for _, p := range slices.Sorted(maps.Keys(cfg.HTTPAPI.Principals)) {
		file := config.PrincipalOverlayFile(cfg.DataDir, p)
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		pc, ws, err := w.load(p)
		for _, x := range ws {
			if x.Source == "user config "+file {
				warnings = append(warnings, x)
			}
		}
		if err != nil {
			warnings = append(warnings, config.Warning{Source: "user config " + file, Message: apperr.MessageOf(err) + " (ignored)"})
			continue
		}
		w.principals[p] = pc
		if apply != nil {
			apply(p, pc)
		}
	}
	return w, warnings
}

// load loads principal's configuration ("" for the daemon-wide one).
func (w *Writer) load(principal string) (*config.Config, []config.Warning, error) {
	src := w.sources
	src.Principal = principal
	return config.Load(src)
}

// Current returns the daemon-wide configuration in effect: the one loaded
// at start, or after the last daemon-wide write.
func (w *Writer) Current() *config.Config {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

// configForLocked returns principal's configuration, the daemon-wide one
// for "" or for a principal whose configuration cannot be loaded; w.mu
// must be held.
func (w *Writer) configForLocked(principal string) *config.Config {
	if principal == "" {
		return w.cur
	}
	if c, ok := w.principals[principal]; ok {
		return c
	}
	c, _, err := w.load(principal)
	if err != nil {
		return w.cur
	}
	w.principals[principal] = c
	return c
}

// Read answers config/read for principal ("" for the operator's clients):
// the configuration that principal's threads start with.
func (w *Writer) Read(principal string, configFile string) api.ConfigReadResult {
	w.mu.Lock()
	cfg := w.configForLocked(principal)
	w.mu.Unlock()
	return Read(cfg, configFile)
}

// ExperimentalFeatures answers experimentalFeature/list for principal
// ("" for the operator's clients): the feature switches appserver
// implements as its configuration sets them, under the thread's own
// switches when one is named (thread).
func (w *Writer) ExperimentalFeatures(principal string, thread map[string]bool) []api.ExperimentalFeature {
	w.mu.Lock()
	cfg := w.configForLocked(principal)
	w.mu.Unlock()
	return ExperimentalFeatures(cfg, thread)
}

// SetFeatures answers experimentalFeature/enablement/set for principal
// ("" for the operator's clients): the switches of enablement appserver
// implements (config.FeatureFlags) are written to principal's user config
// at once, as a config/batchWrite of `features.<key>` would, and apply to
// the turns started afterwards. It returns those the configuration now
// holds as asked: a name appserver has no switch for is left out, as is a
// switch an operator's layer above the user config (its file, a flag, a
// -c override) still holds otherwise.
func (w *Writer) SetFeatures(ctx context.Context, principal string, enablement map[string]bool) (map[string]bool, error) {
	var edits []api.ConfigEdit
	for _, f := range config.FeatureFlags {
		if on, ok := enablement[f.Name]; ok {
			value, _ := json.Marshal(on)
			edits = append(edits, api.ConfigEdit{KeyPath: "features." + f.Name, Value: value, MergeStrategy: "replace"})
		}
	}
	applied := map[string]bool{}
	if len(edits) == 0 {
		return applied, nil
	}
	if _, err := w.WriteConfig(ctx, principal, api.ConfigBatchWriteParams{Edits: edits}); err != nil {
		return nil, err
	}
	w.mu.Lock()
	now := w.configForLocked(principal).Features.Map()
	w.mu.Unlock()
	for name, on := range enablement {
		if cur, ok := now[name]; ok && cur == on {
			applied[name] = on
		}
	}
	return applied, nil
}

// Providers answers modelProvider/list for principal ("" for the
// operator's clients): the providers, and the default of that principal's
// new threads.
func (w *Writer) Providers(principal string) api.ModelProviderListResult {
	w.mu.Lock()
	cfg := w.configForLocked(principal)
	w.mu.Unlock()
	return Providers(cfg)
}

// Capabilities answers modelProvider/capabilities/read for principal's
// default provider.
func (w *Writer) Capabilities(principal string) api.ModelProviderCapabilitiesReadResult {
	w.mu.Lock()
	cfg := w.configForLocked(principal)
	w.mu.Unlock()
	return Capabilities(cfg)
}

// WriteError is a refused config write with the reference's
// config_write_error_code; it wraps the apperr error sent as the message.
type WriteError struct {
	code api.ConfigWriteErrorCode
	err  error
}

// Error returns the wrapped error's text.
func (e *WriteError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped apperr error.
func (e *WriteError) Unwrap() error { return e.err }

// ConfigWriteErrorCode is the code sent in the error's data.
func (e *WriteError) ConfigWriteErrorCode() api.ConfigWriteErrorCode { return e.code }

// writeError classifies err, a refused write: keys clients may not write
// are a read-only layer's, unknown keys are unknown to the schema, other
// invalid input fails validation; errors that are not the client's
// (an unwritable data dir) stay as they are.
func writeError(err error) error {
	var ee *config.EditError
	switch {
	case errors.As(err, &ee) && ee.Reason == config.EditOperatorKey:
		return &WriteError{api.ConfigLayerReadonly, err}
	case errors.As(err, &ee) && ee.Reason == config.EditUnknownKey:
		return &WriteError{api.ConfigSchemaUnknownKey, err}
	case apperr.Is(err, apperr.Invalid):
		return &WriteError{api.ConfigValidationError, err}
	}
	return err
}

// WriteConfig implements server.ConfigWriter: principal's clients ("" for
// the operator's) write their user config.
func (w *Writer) WriteConfig(_ context.Context, principal string, p api.ConfigBatchWriteParams) (api.ConfigWriteResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writeConfigLocked(principal, p)
}

// writeConfigLocked is WriteConfig with w.mu held.
func (w *Writer) writeConfigLocked(principal string, p api.ConfigBatchWriteParams) (api.ConfigWriteResult, error) {
	if _, ok := w.cur.HTTPAPI.Principals[principal]; principal != "" && !ok {
		return api.ConfigWriteResult{}, apperr.New(apperr.Invalid, "unknown principal %q", principal)
	}
	file := config.OverlayFile(w.cur.DataDir)
	if principal != "" {
		file = config.PrincipalOverlayFile(w.cur.DataDir, principal)
	}
	if p.FilePath != nil && filepath.Clean(*p.FilePath) != file {
		return api.ConfigWriteResult{}, &WriteError{api.ConfigLayerReadonly,
			apperr.New(apperr.Invalid, "Invalid request: clients may write only the user config %s", file)}
	}
	if p.ExpectedVersion != nil {
		cur, err := os.ReadFile(file)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return api.ConfigWriteResult{}, apperr.Wrap(apperr.Internal, err, "user config %s: cannot read", file)
		}
		if config.Version(cur) != *p.ExpectedVersion {
			return api.ConfigWriteResult{}, &WriteError{api.ConfigVersionConflict,
				apperr.New(apperr.Conflict, "config version mismatch: the user config changed since version %s", *p.ExpectedVersion)}
		}
	}
	edits := make([]config.Edit, len(p.Edits))
	for i, e := range p.Edits {
		edits[i] = config.Edit{KeyPath: e.KeyPath, Value: e.Value, Upsert: e.MergeStrategy == "upsert"}
	}
	src := w.sources
	src.Principal = principal
	version, err := config.WriteOverlay(file, w.cur, w.cur.AuthorFor(principal), edits, func(candidate string) error {
		return config.CheckOverlay(src, candidate)
	})
	if err != nil {
		return api.ConfigWriteResult{}, writeError(err)
	}
	res := api.ConfigWriteResult{Status: "ok", Version: version, FilePath: file}
	// The user config now in place is what Load applies.
	cfg, _, err := config.Load(src)
	if err != nil {
		return api.ConfigWriteResult{}, apperr.Wrap(apperr.Internal, err, "user config %s: written but cannot be loaded", file)
	}
	for _, e := range p.Edits {
		if meta := overridden(cfg, e.KeyPath, e.Value); meta != nil {
			res.Status, res.OverriddenMetadata = "okOverridden", meta
			break
		}
	}
	if principal == "" {
		w.cur = cfg
		// The principals' configurations hold the daemon-wide one.
		clear(w.principals)
	} else {
		w.principals[principal] = cfg
	}
	if w.apply != nil {
		w.apply(principal, cfg)
	}
	return res, nil
}

// SetSkillEnabled answers skills/config/write for principal ("" for the
// operator's clients), as the reference keeps the switch: turning off
// the skills of name, or the one whose SKILL.md is at path (exactly one
// of the two is set), adds or updates their [[skills.config]] entry of
// principal's user config; turning them on removes it (the default is
// on). The write is a config write like any other (the allow-list,
// the whole configuration checked, applied at once and after a
// restart); it returns the state asked for, as the reference does.
func (w *Writer) SetSkillEnabled(_ context.Context, principal, name, path string, enabled bool) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	name = strings.TrimSpace(name)
	if path != "" {
		path = filepath.Clean(path)
	}
	cur := w.configForLocked(principal).Skills.Config
	var entries []map[string]any
	found := false
	for _, sw := range cur {
		same := path != "" && sw.Path != "" && filepath.Clean(sw.Path) == path || name != "" && sw.Path == "" && strings.TrimSpace(sw.Name) == name
		if same {
			found = true
			if enabled {
				continue
			}
			sw.Enabled = false
		}
		entries = append(entries, skillEntry(sw))
	}
	if !found {
		if enabled {
			return enabled, nil // nothing to remove
		}
		entries = append(entries, skillEntry(config.SkillSwitch{Path: path, Name: name}))
	}
	// The last entry gone, so is [skills], as the reference leaves it:
	// clients write nothing else of it.
	edit := api.ConfigEdit{KeyPath: "skills", Value: json.RawMessage("null"), MergeStrategy: "replace"}
	if len(entries) > 0 {
		edit.KeyPath = "skills.config"
		edit.Value, _ = json.Marshal(entries) // plain data: cannot fail
	}
	_, err := w.writeConfigLocked(principal, api.ConfigBatchWriteParams{Edits: []api.ConfigEdit{edit}})
	if err != nil {
		return false, err
	}
	return enabled, nil
}

// skillEntry is sw as a [[skills.config]] table: its selector and enabled.
func skillEntry(sw config.SkillSwitch) map[string]any {
	e := map[string]any{"enabled": sw.Enabled}
	if sw.Path != "" {
		e["path"] = sw.Path
	} else {
		e["name"] = sw.Name
	}
	return e
}

// DisabledSkills returns the skills principal's configuration turns off
// ("" for the operator's clients): by name, and by the path of their
// SKILL.md.
func (w *Writer) DisabledSkills(principal string) (names, paths []string) {
	w.mu.Lock()
	cfg := w.configForLocked(principal)
	w.mu.Unlock()
	for _, sw := range cfg.Skills.Config {
		switch {
		case sw.Enabled:
		case sw.Path != "":
			paths = append(paths, filepath.Clean(sw.Path))
		default:
			names = append(names, strings.TrimSpace(sw.Name))
		}
	}
	return names, paths
}

// overriddenMetadata is the wire shape of a written value a later layer
// hides.
type overriddenMetadata struct {
	Message         string                  `json:"message"`
	OverridingLayer api.ConfigLayerMetadata `json:"overridingLayer"`
	EffectiveValue  any                     `json:"effectiveValue"`
}

// overridden describes the layer above the user configs that sets key (or
// a key under it) in cfg, as the reference reports the first edit a
// higher-precedence layer overrides; nil when the written value is the
// effective one, also when a higher layer sets that same value.
func overridden(cfg *config.Config, key string, written json.RawMessage) json.RawMessage {
	var layer config.Layer
	for k, l := range cfg.Origins() {
		if (k == key || strings.HasPrefix(k, key+".")) && layerAbove(l) {
			layer = l
			break
		}
	}
	if layer == "" {
		return nil
	}
	var value any = cfg.Redacted()
	for _, seg := range strings.Split(key, ".") {
		m, _ := value.(map[string]any)
		value = m[seg]
	}
	if sameJSON(written, value) {
		return nil
	}
	raw, _ := json.Marshal(overriddenMetadata{
		Message:         "Overridden by session flags",
		OverridingLayer: api.ConfigLayerMetadata{Name: api.ConfigLayerSource{Type: api.LayerSessionFlags}, Version: string(layer)},
		EffectiveValue:  value,
	})
	return raw
}

// layerAbove reports whether values of layer win over the user configs:
// the daemon's environment and command line, the reference's session
// flags.
func layerAbove(l config.Layer) bool {
	return l == config.LayerEnv || l == config.LayerFlag || l == config.LayerOverride
}

// sameJSON reports whether the raw JSON a client wrote and a value of the
// effective configuration are the same JSON value.
func sameJSON(raw json.RawMessage, v any) bool {
	var a any
	if json.Unmarshal(raw, &a) != nil {
		return false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var bv any
	if json.Unmarshal(b, &bv) != nil {
		return false
	}
	return reflect.DeepEqual(a, bv)
}
