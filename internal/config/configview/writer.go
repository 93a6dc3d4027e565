package configview

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
)

// Writer serves config/value/write and config/batchWrite with the
// per-user overlay in data_dir (config.WriteOverlay): every edit is
// checked by loading the whole configuration with the new overlay, and the
// configuration loaded again goes to the daemon's services that take
// values while running (the defaults of new threads); the rest apply from
// the next start. A write whose value a later layer
// (environment, flags, -c overrides) hides answers okOverridden.
type Writer struct {
	dir     string
	sources config.Sources
	apply   func(*config.Config)

	mu  sync.Mutex // one write at a time, so expectedVersion means something
	cur *config.Config
}

// NewWriter returns the writer of the user config in cfg's data_dir; every
// edit is checked against the configuration loaded from sources (cfg is
// the one loaded at start). After a write, apply (when not nil) gets the
// configuration loaded again, to put its live values to use; Current
// returns it.
func NewWriter(cfg *config.Config, sources config.Sources, apply func(*config.Config)) *Writer {
	return &Writer{dir: cfg.DataDir, sources: sources, apply: apply, cur: cfg}
}

// Current returns the configuration in effect: the one loaded at start, or
// after the last write.
func (w *Writer) Current() *config.Config {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

// WriteConfig implements server.ConfigWriter.
func (w *Writer) WriteConfig(_ context.Context, p api.ConfigBatchWriteParams) (api.ConfigWriteResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	path := config.OverlayFile(w.dir)
	if p.FilePath != nil && filepath.Clean(*p.FilePath) != path {
		return api.ConfigWriteResult{}, apperr.New(apperr.Invalid, "Invalid request: clients may write only the user config %s", path)
	}
	if p.ExpectedVersion != nil {
		cur, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			return api.ConfigWriteResult{}, apperr.Wrap(apperr.Internal, err, "user config %s: cannot read", path)
		}
		if config.Version(cur) != *p.ExpectedVersion {
			return api.ConfigWriteResult{}, apperr.New(apperr.Conflict, "config version mismatch: the user config changed since version %s", *p.ExpectedVersion)
		}
	}
	edits := make([]config.Edit, len(p.Edits))
	for i, e := range p.Edits {
		edits[i] = config.Edit{KeyPath: e.KeyPath, Value: e.Value, Upsert: e.MergeStrategy == "upsert"}
	}
	file, version, err := config.WriteOverlay(w.dir, edits, func(overlay string) error {
		return config.CheckOverlay(w.sources, overlay)
	})
	if err != nil {
		return api.ConfigWriteResult{}, err
	}
	res := api.ConfigWriteResult{Status: "ok", Version: version, FilePath: file}
	// The overlay now in place is what Load applies.
	cfg, _, err := config.Load(w.sources)
	if err != nil {
		return api.ConfigWriteResult{}, apperr.Wrap(apperr.Internal, err, "user config %s: written but cannot be loaded", path)
	}
	for _, e := range p.Edits {
		if meta := overridden(cfg, e.KeyPath); meta != nil {
			res.Status, res.OverriddenMetadata = "okOverridden", meta
			break
		}
	}
	w.cur = cfg
	if w.apply != nil {
		w.apply(cfg)
	}
	return res, nil
}

// overriddenMetadata is the wire shape of a written value a later layer
// hides.
type overriddenMetadata struct {
	Message         string                  `json:"message"`
	OverridingLayer api.ConfigLayerMetadata `json:"overridingLayer"`
	EffectiveValue  any                     `json:"effectiveValue"`
}

// overridden describes the layer above the user overlay that sets key (or
// a key under it) in cfg, as the reference reports the first edit a
// higher-precedence layer overrides; nil when the written value is the
// effective one.
func overridden(cfg *config.Config, key string) json.RawMessage {
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
	raw, _ := json.Marshal(overriddenMetadata{
		Message:         "Overridden by session flags",
		OverridingLayer: api.ConfigLayerMetadata{Name: api.ConfigLayerSource{Type: api.LayerSessionFlags}, Version: string(layer)},
		EffectiveValue:  value,
	})
	return raw
}

// layerAbove reports whether values of layer win over the user overlay:
// the daemon's environment and command line, the reference's session
// flags.
func layerAbove(l config.Layer) bool {
	return l == config.LayerEnv || l == config.LayerFlag || l == config.LayerOverride
}
