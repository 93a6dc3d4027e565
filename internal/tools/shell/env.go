package shell

import (
	"path"
	"slices"
	"strings"
)

// EnvInherit is where a command's environment starts (Codex
// shell_environment_policy.inherit).
type EnvInherit int

// The inheritance modes.
const (
	// InheritAll starts from the daemon's whole environment (the default).
	InheritAll EnvInherit = iota
	// InheritCore keeps only HOME, LOGNAME, PATH, SHELL, USER, USERNAME,
	// TMPDIR, TEMP and TMP.
	InheritCore
	// InheritNone starts empty.
	InheritNone
)

// DaemonEnvPrefix names the daemon's own configuration variables
// (config.EnvPrefix); they never reach a command.
const DaemonEnvPrefix = "APPSERVER_"

// DefaultSecretVars are model-provider credentials the daemon itself may
// hold; they never reach a command. Configured providers' env_key names are
// added through EnvPolicy.SecretVars.
var DefaultSecretVars = []string{
	"OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
	"AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
	"MISTRAL_API_KEY", "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY", "GROQ_API_KEY",
	"CODEX_API_KEY",
}

var coreVars = []string{"HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP"}

// defaultExcludes are Codex's optional secret patterns.
var defaultExcludes = []string{"*KEY*", "*SECRET*", "*TOKEN*"}

// EnvPolicy derives a command's environment from the daemon's, following
// Codex's shell_environment_policy plus one rule of ours. In order:
//
//  1. Inherit: all, core or none of the daemon's variables.
//  2. With ApplyDefaultExcludes, drop names matching *KEY*, *SECRET* or
//     *TOKEN* (case-insensitive). Off by default, as in current Codex.
//  3. Drop names matching Exclude (case-insensitive globs).
//  4. Always drop the daemon's own secrets: every APPSERVER_* variable, the
//     names in DefaultSecretVars and the names in SecretVars (each
//     configured provider's env_key). This step is not optional.
//  5. Apply Set (explicit configuration wins, even over step 4).
//  6. With IncludeOnly, keep only names matching one of its globs.
//
// The zero value inherits everything but the daemon's secrets.
type EnvPolicy struct {
	// Inherit is the starting set.
	Inherit EnvInherit
	// ApplyDefaultExcludes drops *KEY*, *SECRET* and *TOKEN* variables.
	ApplyDefaultExcludes bool
	// Exclude lists glob patterns of names to drop.
	Exclude []string
	// SecretVars lists more names to drop (provider env_key values).
	SecretVars []string
	// Set adds or overrides variables.
	Set map[string]string
	// IncludeOnly, when non-empty, keeps only matching names.
	IncludeOnly []string
}

// Build returns the environment ("K=V", set variables sorted by name after
// the inherited ones in their original order) for a command, from the
// daemon's environment base (os.Environ()).
func (p EnvPolicy) Build(base []string) []string {
	type kv struct{ k, v string }
	var vars []kv
	index := map[string]int{}
	put := func(k, v string) {
		if i, ok := index[k]; ok {
			vars[i].v = v
			return
		}
		index[k] = len(vars)
		vars = append(vars, kv{k, v})
	}
	for _, e := range base {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			continue
		}
		switch p.Inherit {
		case InheritNone:
			continue
		case InheritCore:
			if !slices.Contains(coreVars, k) {
				continue
			}
		}
		put(k, v)
	}
	drop := func(f func(string) bool) {
		out := vars[:0]
		for _, e := range vars {
			if !f(e.k) {
				out = append(out, e)
			}
		}
		vars = out
		clear(index)
		for i, e := range vars {
			index[e.k] = i
		}
	}
	if p.ApplyDefaultExcludes {
		drop(func(k string) bool { return matchesAny(k, defaultExcludes) })
	}
	if len(p.Exclude) > 0 {
		drop(func(k string) bool { return matchesAny(k, p.Exclude) })
	}
	drop(p.isDaemonSecret)
	keys := make([]string, 0, len(p.Set))
	for k := range p.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		put(k, p.Set[k])
	}
	if len(p.IncludeOnly) > 0 {
		drop(func(k string) bool { return !matchesAny(k, p.IncludeOnly) })
	}
	out := make([]string, len(vars))
	for i, e := range vars {
		out[i] = e.k + "=" + e.v
	}
	return out
}

func (p EnvPolicy) isDaemonSecret(k string) bool {
	return strings.HasPrefix(k, DaemonEnvPrefix) || slices.Contains(DefaultSecretVars, k) || slices.Contains(p.SecretVars, k)
}

// matchesAny reports whether name matches one of the glob patterns,
// ignoring case.
func matchesAny(name string, patterns []string) bool {
	u := strings.ToUpper(name)
	for _, pat := range patterns {
		if ok, _ := path.Match(strings.ToUpper(pat), u); ok {
			return true
		}
	}
	return false
}

// withOverlay returns env with vars set on top (replacing same names).
func withOverlay(env []string, vars map[string]string) []string {
	if len(vars) == 0 {
		return env
	}
	out := make([]string, 0, len(env)+len(vars))
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if _, ok := vars[k]; !ok {
			out = append(out, e)
		}
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+vars[k])
	}
	return out
}
