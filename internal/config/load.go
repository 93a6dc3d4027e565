package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/appserver/appserver/internal/apperr"
)

// EnvPrefix starts every environment variable Load reads.
const EnvPrefix = "APPSERVER_"

// EnvConfigFile names the environment variable holding the config file path
// used when Sources.File is empty.
const EnvConfigFile = "APPSERVER_CONFIG"

// Sources are the inputs Load merges, lowest precedence first after the
// built-in defaults.
type Sources struct {
	// File is the TOML config file (--config); empty means APPSERVER_CONFIG
	// from Env, and no file at all when that is empty too.
	File string
	// Env is the environment in os.Environ form; APPSERVER_* variables
	// override file keys, and XDG_DATA_HOME and HOME pick the default
	// data_dir.
	Env []string
	// Flags holds only the flags the user actually set, keyed by config key
	// ("listen", "ws_token_file", …). String keys take the value literally;
	// bool, integer, number and duration keys parse it; string lists split
	// it on commas unless it is a TOML array. Errors name the flag as
	// "--" + the key with '_' turned into '-'.
	Flags map[string]string
	// Overrides are the raw values of repeatable -c key=value flags, applied
	// in order.
	Overrides []string
}

// Warning is a non-fatal configuration problem, such as an unknown key.
type Warning struct {
	// Path is the dotted key concerned, e.g. "tui" or "model_providers.x.foo".
	Path string
	// Message says what is wrong, e.g. `unknown config key "foo" (ignored)`.
	Message string
	// Source names where the key came from: "config file PATH", "env
	// APPSERVER_X", "flag --x" or "-c key=value".
	Source string
}

// String returns the warning as one line for logs: "source: message".
func (w Warning) String() string {
	if w.Source == "" {
		return w.Message
	}
	return w.Source + ": " + w.Message
}

// Load builds the configuration from defaults, the config file, APPSERVER_*
// environment variables, flags and -c overrides, later layers winning, and
// validates it. Unknown keys become warnings; malformed input, type errors
// and invalid values are apperr.Invalid errors naming the source and key.
// Warnings gathered before an error are returned with it.
//
// The per-user overlay (OverlayFile in the resulting data_dir), when it
// exists, is applied right after the config file: what clients wrote wins
// over the operator's file but not over the environment or the command
// line.
func Load(src Sources) (*Config, []Warning, error) {
	cfg, warnings, err := load(src, "")
	if err != nil {
		return cfg, warnings, err
	}
	overlay := OverlayFile(cfg.DataDir)
	if _, statErr := os.Stat(overlay); statErr != nil {
		return cfg, warnings, nil
	}
	return load(src, overlay)
}

// load is Load with the overlay file to apply after the config file ("" for
// none).
func load(src Sources, overlay string) (*Config, []Warning, error) {
	env := envMap(src.Env)
	cfg := defaults(func(k string) string { return env[k] }, runtime.GOOS)
	l := &loader{cfg: &cfg, origins: map[string]origin{}}

	file := src.File
	if file == "" {
		file = env[EnvConfigFile]
	}
	if file != "" {
		if err := l.loadFile(file); err != nil {
			return nil, l.warnings, err
		}
	}
	if overlay != "" {
		if err := l.loadTOML(overlay, source{layer: LayerUser, name: "user config " + overlay}); err != nil {
			return nil, l.warnings, err
		}
	}
	if err := l.loadEnv(env); err != nil {
		return nil, l.warnings, err
	}
	if err := l.loadFlags(src.Flags); err != nil {
		return nil, l.warnings, err
	}
	for _, raw := range src.Overrides {
		if err := l.loadOverride(raw); err != nil {
			return nil, l.warnings, err
		}
	}
	// The built-in provider survives a layer that replaced the whole
	// model_providers table, as it does in Codex.
	if _, ok := cfg.ModelProviders[DefaultModelProvider]; !ok {
		cfg.ModelProviders[DefaultModelProvider] = builtinOpenAI()
	}
	cfg.origins = l.origins
	if err := cfg.validate(); err != nil {
		return nil, l.warnings, err
	}
	return &cfg, l.warnings, nil
}

// envMap turns an os.Environ-style list into a map, later entries winning.
func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func (l *loader) loadFile(path string) error {
	return l.loadTOML(path, source{layer: LayerFile, name: "config file " + path})
}

// loadTOML applies the TOML file at path as source s.
func (l *loader) loadTOML(path string, s source) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return apperr.Wrap(apperr.Invalid, err, "%s: not found", s.name)
		}
		return apperr.Wrap(apperr.Invalid, err, "%s: cannot read", s.name)
	}
	var tree map[string]any
	if _, err := toml.Decode(string(data), &tree); err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return apperr.New(apperr.Invalid, "%s: line %d, column %d: %s",
				s.name, perr.Position.Line, perr.Position.Col, perr.Message)
		}
		return apperr.Wrap(apperr.Invalid, err, "%s: invalid TOML", s.name)
	}
	return l.apply(s, tree)
}

// loadEnv applies every APPSERVER_* variable but APPSERVER_CONFIG. The name
// after the prefix is the key, lower-cased, with "__" separating segments;
// less nested keys go first so that a variable naming a table entry's field
// wins over one setting the whole entry.
func (l *loader) loadEnv(env map[string]string) error {
	type envVar struct {
		name string
		path []string
	}
	var vars []envVar
	for name := range env {
		if !strings.HasPrefix(name, EnvPrefix) || name == EnvConfigFile {
			continue
		}
		segs := strings.Split(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "__")
		if slices.Contains(segs, "") {
			l.warnings = append(l.warnings, Warning{
				Path:    strings.ToLower(strings.TrimPrefix(name, EnvPrefix)),
				Message: fmt.Sprintf("environment variable %s does not name a config key (ignored)", name),
				Source:  "env " + name,
			})
			continue
		}
		vars = append(vars, envVar{name, segs})
	}
	slices.SortFunc(vars, func(a, b envVar) int {
		if len(a.path) != len(b.path) {
			return len(a.path) - len(b.path)
		}
		return strings.Compare(a.name, b.name)
	})
	for _, v := range vars {
		s := source{layer: LayerEnv, name: "env " + v.name, key: v.path}
		if err := l.apply(s, nest(v.path, parseValue(env[v.name]))); err != nil {
			return err
		}
	}
	return nil
}

// loadFlags applies the flags, parsing each value by the type of its key.
func (l *loader) loadFlags(flags map[string]string) error {
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		name := "flag --" + strings.ReplaceAll(key, "_", "-")
		path, rest, err := parseKeyPath(key + "=")
		if err != nil || strings.TrimSpace(rest) != "" {
			return apperr.New(apperr.Invalid, "%s: invalid config key %q", name, key)
		}
		s := source{layer: LayerFlag, name: name, key: path}
		t, ok := typeAt(configType, path)
		if !ok {
			return apperr.New(apperr.Invalid, "%s: unknown config key %q", name, key)
		}
		v, err := flagValue(t, flags[key])
		if err != nil {
			return s.errorf(path, "%s", err.Error())
		}
		if err := l.apply(s, nest(path, v)); err != nil {
			return err
		}
	}
	return nil
}

// loadOverride applies one -c key=value with Codex's semantics: the value is
// a TOML value or else a literal string, and it replaces whatever is at the
// key (a table given as the value replaces the table rather than merging).
func (l *loader) loadOverride(raw string) error {
	name := "-c " + raw
	path, value, err := parseOverride(raw)
	if err != nil {
		return apperr.New(apperr.Invalid, "%s: %s", name, err.Error())
	}
	return l.apply(source{layer: LayerOverride, name: name, key: path}, nest(path, value))
}

// parseOverride splits a -c argument into its key path and parsed value.
func parseOverride(raw string) ([]string, any, error) {
	path, rest, err := parseKeyPath(raw)
	if err != nil {
		return nil, nil, err
	}
	return path, parseValue(strings.TrimSpace(rest)), nil
}

// nest wraps value in one table per key segment, giving the tree a file
// with that single key would produce.
func nest(path []string, value any) map[string]any {
	for i := len(path) - 1; i > 0; i-- {
		value = map[string]any{path[i]: value}
	}
	return map[string]any{path[0]: value}
}

// CheckOverlay loads the configuration of src with overlay as its per-user
// overlay and reports what is wrong, so that an overlay is validated before
// it replaces the current one.
func CheckOverlay(src Sources, overlay string) error {
	_, _, err := load(src, overlay)
	return err
}
