package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/appserver/appserver/internal/apperr"
)

// OverlayFileName is the per-user overlay's name inside data_dir.
const OverlayFileName = "user-config.toml"

// OverlayFile is where the per-user overlay of data dir dir lives.
func OverlayFile(dir string) string { return filepath.Join(dir, OverlayFileName) }

// Edit is one change a client makes to the per-user overlay.
type Edit struct {
	// KeyPath is the dotted key ("model", `model_providers.x.base_url`).
	KeyPath string
	// Value is the new value as JSON; null removes the key.
	Value json.RawMessage
	// Upsert merges a table value into the existing table instead of
	// replacing it (mergeStrategy "upsert").
	Upsert bool
}

// keysNotWritable are keys a client may not set through the overlay: where
// the overlay itself lives, and what only the operator decides (listening,
// storage, authentication).
var keysNotWritable = map[string]bool{
	"data_dir": true, "database_url": true, "listen": true, "migrate": true, "allowed_origins": true,
	"ws_auth": true, "ws_token_file": true, "ws_token_sha256": true, "ws_shared_secret_file": true,
	"ws_issuer": true, "ws_audience": true,
}

// WriteOverlay applies edits to the overlay file of data dir dir, in order,
// after check accepts the new overlay's path (check typically loads the
// whole configuration with it). The file is replaced atomically. It
// returns the file's path and its version ("sha256:<hex>" of its bytes).
// A data dir that cannot be written (a read-only deployment) is an
// apperr.Unavailable error saying so.
func WriteOverlay(dir string, edits []Edit, check func(path string) error) (string, string, error) {
	path := OverlayFile(dir)
	tree := map[string]any{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", "", apperr.Wrap(apperr.Internal, err, "user config %s: cannot read", path)
	default:
		if _, err := toml.Decode(string(data), &tree); err != nil {
			return "", "", apperr.Wrap(apperr.Invalid, err, "user config %s: invalid TOML", path)
		}
	}
	for _, e := range edits {
		if err := applyEdit(tree, e); err != nil {
			return "", "", err
		}
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(tree); err != nil {
		return "", "", apperr.Wrap(apperr.Invalid, err, "config value cannot be written as TOML")
	}
	tmp, err := os.CreateTemp(dir, ".user-config-*.toml")
	if err != nil {
		return "", "", readOnly(path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return "", "", readOnly(path, err)
	}
	if err := tmp.Close(); err != nil {
		return "", "", readOnly(path, err)
	}
	if err := check(tmp.Name()); err != nil {
		return "", "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", "", readOnly(path, err)
	}
	return path, Version(buf.Bytes()), nil
}

// Version is the version string of a config file's bytes, as config/read
// and the config writes report it.
func Version(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func readOnly(path string, err error) error {
	return apperr.Wrap(apperr.Unavailable, err,
		"config writes are unavailable: the user config %s cannot be written (data_dir is read-only in this deployment)", path)
}

// applyEdit sets (or removes) one key of tree.
func applyEdit(tree map[string]any, e Edit) error {
	path, rest, err := parseKeyPath(e.KeyPath + "=")
	if err != nil || strings.TrimSpace(rest) != "" || len(path) == 0 {
		return apperr.New(apperr.Invalid, "Invalid request: invalid keyPath %q", e.KeyPath)
	}
	if keysNotWritable[path[0]] {
		return apperr.New(apperr.Invalid, "Invalid request: %s is set by the server's operator and cannot be written by clients", path[0])
	}
	dec := json.NewDecoder(bytes.NewReader(e.Value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return apperr.New(apperr.Invalid, "Invalid request: value of %s is not JSON", e.KeyPath)
	}
	v = tomlValue(v)
	parent := tree
	for _, seg := range path[:len(path)-1] {
		next, ok := parent[seg].(map[string]any)
		if !ok {
			if v == nil {
				return nil // removing under a table that is not there
			}
			next = map[string]any{}
			parent[seg] = next
		}
		parent = next
	}
	last := path[len(path)-1]
	switch {
	case v == nil:
		delete(parent, last)
	case e.Upsert:
		old, okOld := parent[last].(map[string]any)
		nv, okNew := v.(map[string]any)
		if okOld && okNew {
			merged := maps.Clone(old)
			maps.Copy(merged, nv)
			parent[last] = merged
			return nil
		}
		parent[last] = v
	default:
		parent[last] = v
	}
	return nil
}

// tomlValue turns decoded JSON into TOML-encodable values: integral
// numbers are integers, others floats.
func tomlValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = tomlValue(e)
		}
	case []any:
		for i, e := range x {
			x[i] = tomlValue(e)
		}
	}
	return v
}
