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

// notConfigEnv are the APPSERVER_ variables that are not the daemon's
// configuration: the client's (`appserver exec`: the server and its
// token) and the project's scripts' and tests'. Load passes over them
// without a warning, so a daemon started where a client is set up says
// nothing of them.
var notConfigEnv = map[string]bool{"APPSERVER_URL": true, "APPSERVER_TOKEN": true, "APPSERVER_BIN": true, "APPSERVER_TOOLS_CACHE": true}

// notConfigEnvPrefixes start variables of the project's tests and
// benchmarks, not configuration either.
var notConfigEnvPrefixes = []string{"APPSERVER_TEST_", "APPSERVER_BENCH_"}

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
	// Principal names the principal ([http_api.principals.<name>]) whose
	// user config (PrincipalOverlayFile) is applied after the daemon-wide
	// one; "" applies the daemon-wide user config only.
	Principal string
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
// The user configs clients write are applied right after the config file:
// the daemon-wide one (OverlayFile in the resulting data_dir), then, for
// src.Principal, that principal's (PrincipalOverlayFile). What clients
// wrote wins over the operator's file but not over the environment or the
// command line, and only the keys clients may write count: any other key
// in a user config, or a value its check refuses, is left out with a
// warning (see FilterUserConfig).
func Load(src Sources) (*Config, []Warning, error) {
	return loadCandidate(src, "")
}

// CheckOverlay loads the configuration of src with the file candidate in
// place of the user config a client of src writes (src.Principal's, or
// the daemon-wide one) and reports what is wrong, so that a user config is
// validated before it replaces the current one.
func CheckOverlay(src Sources, candidate string) error {
	_, _, err := loadCandidate(src, candidate)
	return err
}

// userConfig is one user config load applies, already filtered.
type userConfig struct {
	s    source
	tree map[string]any
}

// loadCandidate is Load, reading candidate (when not "") in place of the
// last user config.
func loadCandidate(src Sources, candidate string) (*Config, []Warning, error) {
	base, warnings, err := load(src, nil)
	if err != nil {
		return base, warnings, err
	}
	type file struct {
		path  string
		layer Layer
		who   Author
	}
	files := []file{{OverlayFile(base.DataDir), LayerUser, Author{}}}
	if src.Principal != "" {
		if _, ok := base.HTTPAPI.Principals[src.Principal]; !ok {
			return nil, warnings, apperr.New(apperr.Invalid, "unknown principal %q: not in [http_api.principals]", src.Principal)
		}
		files = append(files, file{PrincipalOverlayFile(base.DataDir, src.Principal), LayerPrincipal, base.AuthorFor(src.Principal)})
	}
	var users []userConfig
	var dropped []Warning
	for i, f := range files {
		read := f.path
		if candidate != "" && i == len(files)-1 {
			read = candidate
		}
		s := source{layer: f.layer, name: "user config " + f.path}
		tree, err := readTOML(read, s)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, warnings, err
		}
		kept, ws := FilterUserConfig(tree, base, f.who, s.name)
		dropped = append(dropped, ws...)
		users = append(users, userConfig{s: s, tree: kept})
	}
	if len(users) == 0 {
		base.principal = src.Principal
		return base, warnings, nil
	}
	// The first pass's warnings are the second's too.
	cfg, warnings, err := load(src, users)
	if cfg != nil {
		cfg.principal = src.Principal
	}
	return cfg, append(warnings, dropped...), err
}

// load builds the configuration with users, the user configs to apply
// after the config file.
func load(src Sources, users []userConfig) (*Config, []Warning, error) {
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
	for _, u := range users {
		if err := l.apply(u.s, u.tree); err != nil {
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
	tree, err := readTOML(path, s)
	if errors.Is(err, fs.ErrNotExist) {
		return apperr.Wrap(apperr.Invalid, err, "%s: not found", s.name)
	}
	if err != nil {
		return err
	}
	return l.apply(s, tree)
}

// readTOML reads and decodes the TOML file at path, the input of source s;
// a missing file is an fs.ErrNotExist error.
func readTOML(path string, s source) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "%s: cannot read", s.name)
	}
	var tree map[string]any
	if _, err := toml.Decode(string(data), &tree); err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return nil, apperr.New(apperr.Invalid, "%s: line %d, column %d: %s",
				s.name, perr.Position.Line, perr.Position.Col, perr.Message)
		}
		return nil, apperr.Wrap(apperr.Invalid, err, "%s: invalid TOML", s.name)
	}
	return tree, nil
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
		if !strings.HasPrefix(name, EnvPrefix) || name == EnvConfigFile || notConfigEnv[name] ||
			slices.ContainsFunc(notConfigEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
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
