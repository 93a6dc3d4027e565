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

// OverlayFileName is the daemon-wide user config's name inside data_dir.
const OverlayFileName = "user-config.toml"

// OverlayFile is where the daemon-wide user config of data dir dir lives.
func OverlayFile(dir string) string { return filepath.Join(dir, OverlayFileName) }

// PrincipalOverlayDir is the directory of data_dir holding the principals'
// user configs, one file per principal.
const PrincipalOverlayDir = "principal-config"

// PrincipalOverlayFile is where principal's user config of data dir dir
// lives. Principal names are TOML bare keys (validated with
// [http_api.principals]), so the name is a plain file name.
func PrincipalOverlayFile(dir, principal string) string {
	return filepath.Join(dir, PrincipalOverlayDir, principal+".toml")
}

// UserConfigFile is the user config the clients of this configuration
// write: its principal's (see Sources.Principal), or the daemon-wide one.
func (c *Config) UserConfigFile() string {
	if c.principal != "" {
		return PrincipalOverlayFile(c.DataDir, c.principal)
	}
	return OverlayFile(c.DataDir)
}

// Principal is the principal whose user config Load applied, "" for the
// daemon-wide configuration.
func (c *Config) Principal() string { return c.principal }

// Edit is one change a client makes to its user config.
type Edit struct {
	// KeyPath is the dotted key ("model", `profiles.work.model`).
	KeyPath string
	// Value is the new value as JSON; null removes the key.
	Value json.RawMessage
	// Upsert merges a table value into the existing table instead of
	// replacing it (mergeStrategy "upsert").
	Upsert bool
}

// MaxUserConfigBytes bounds the size of a user config clients write.
const MaxUserConfigBytes = 64 << 10

// WriteOverlay applies who's edits, in order and all or none, to the user
// config file: every edit must name a key clients may write with a value
// its check accepts under base, the configuration without any user config
// (see clientKeys); a refused one is an *EditError naming the key, and
// nothing is written. Keys of the file clients may not write (left by an
// older build or a hand edit) are dropped. The new file is then handed to
// check (typically: the whole configuration loaded with it) and replaces
// the old one atomically. It returns the new file's version
// ("sha256:<hex>" of its bytes). A data dir that cannot be written (a
// read-only deployment) is an apperr.Unavailable error saying so.
func WriteOverlay(file string, base *Config, who Author, edits []Edit, check func(path string) error) (string, error) {
	tree, err := readTOML(file, source{name: "user config " + file})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		tree = map[string]any{}
	case err != nil:
		return "", err
	}
	tree, _ = FilterUserConfig(tree, base, who, "")
	x := editContext{base: base, who: who}
	for _, e := range edits {
		if err := applyEdit(tree, e, x); err != nil {
			return "", err
		}
	}
	// Merged tables too hold only what clients may write.
	if _, problems := checkClientTree(nil, tree, x); problems != nil {
		return "", problems[0]
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(tree); err != nil {
		return "", apperr.Wrap(apperr.Invalid, err, "Invalid request: config value cannot be written as TOML")
	}
	if buf.Len() > MaxUserConfigBytes {
		return "", apperr.New(apperr.Invalid, "Invalid request: the user config would exceed %d bytes", MaxUserConfigBytes)
	}
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", readOnly(file, err)
	}
	tmp, err := os.CreateTemp(dir, ".user-config-*.toml")
	if err != nil {
		return "", readOnly(file, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return "", readOnly(file, err)
	}
	if err := tmp.Close(); err != nil {
		return "", readOnly(file, err)
	}
	if err := check(tmp.Name()); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return "", readOnly(file, err)
	}
	return Version(buf.Bytes()), nil
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

// applyEdit checks one edit against the allow-list and sets (or removes)
// its key in tree.
func applyEdit(tree map[string]any, e Edit, x editContext) error {
	path, rest, err := parseKeyPath(e.KeyPath + "=")
	if err != nil || strings.TrimSpace(rest) != "" || len(path) == 0 {
		return &EditError{Key: e.KeyPath, Reason: EditInvalid, err: apperr.New(apperr.Invalid, "Invalid request: invalid keyPath %q", e.KeyPath)}
	}
	dec := json.NewDecoder(bytes.NewReader(e.Value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return editError(path, EditInvalid, "value is not JSON")
	}
	v = tomlValue(v)
	if err := checkEdit(path, v, x); err != nil {
		return err
	}
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
