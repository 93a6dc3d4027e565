package configview

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
)

// Writer serves config/value/write and config/batchWrite with the
// per-user overlay in data_dir (config.WriteOverlay): every edit is
// checked by loading the whole configuration with the new overlay, and the
// values apply from the next start.
type Writer struct {
	dir     string
	sources config.Sources

	mu sync.Mutex // one write at a time, so expectedVersion means something
}

// NewWriter returns the writer of the user config in dir (data_dir); every
// edit is checked against the configuration loaded from sources.
func NewWriter(dir string, sources config.Sources) *Writer {
	return &Writer{dir: dir, sources: sources}
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
	return api.ConfigWriteResult{Status: "ok", Version: version, FilePath: file}, nil
}
