// Package config loads appserver's configuration. It accepts a Codex user's
// config.toml as is: the keys appserver shares with Codex (model,
// model_provider, approval_policy, sandbox_mode, [model_providers.<id>],
// [mcp_servers.<id>]) keep Codex's meaning, and the Codex keys appserver does
// not use are reported as warnings rather than rejected.
//
// # Layers
//
// Load merges these layers, each later one winning over the earlier ones:
//
//  1. the built-in defaults (Default);
//  2. the TOML file named by --config (Sources.File) or, when that is not
//     given, by the APPSERVER_CONFIG environment variable; with neither, no
//     file is read;
//  3. the user configs clients write (config/value/write): the daemon-wide
//     one in data_dir, then, for Sources.Principal, that principal's. Only
//     the keys of the allow-list clients may write (clientkeys.go) count;
//     any other key found there is left out with a warning;
//  4. APPSERVER_* environment variables;
//  5. dedicated command-line flags (Sources.Flags);
//  6. repeatable -c key=value overrides, in order.
//
// The file merges into the defaults table by table, so a
// [model_providers.openai] table that sets only base_url keeps the rest of
// the built-in provider. Environment variables, flags and -c overrides
// replace the value at their key, tables included, as Codex's -c does.
//
// # -c key=value
//
// The key is a dotted path (model_providers.local.base_url); segments may be
// quoted TOML-style (mcp_servers."my.server".command). The value is parsed
// as a TOML value (-c model="o3", -c migrate=false,
// -c 'allowed_origins=["https://a"]', -c 'model_providers.x={base_url="…"}')
// and, when it does not parse, taken as a literal string, so -c model=o3
// works. As in Codex, an unquoted value that happens to be valid TOML keeps
// its TOML type: -c model=1.5 is a number and fails as "expected a string".
//
// # Environment variables
//
// APPSERVER_<KEY> sets <KEY> upper-cased with '.' written as "__" and
// underscores kept: APPSERVER_LISTEN, APPSERVER_DATABASE_URL,
// APPSERVER_MODEL_PROVIDERS__LOCAL__BASE_URL. Values are parsed like -c
// values; an empty value is the empty string. Because names are
// upper-cased, table ids set through the environment are lower-case.
// APPSERVER_CONFIG is the config file path, not a key. Any other APPSERVER_*
// variable that names no key produces a warning.
//
// # Warnings and errors
//
// An unknown key, at any depth and from any layer, is a Warning such as
// `unknown config key "tui.theme" (ignored)`; a key Codex knows but
// appserver does not use gets `codex config key "tui" is not used by
// appserver (ignored)`. Everything else that is wrong is an apperr.Invalid
// error naming its source: TOML syntax errors with the file's path, line and
// column; type errors with the key and the expected type
// (`-c listen=5: expected a string`); invalid values, such as a listen
// address that is not ws://IP:PORT (or wss://) or websocket auth settings that do not
// fit together, with the key and the source that set it.
//
// # Dependencies
//
// It must not import any package of the module but internal/apperr: the
// composition root translates the configuration into each service's own
// Config, so no service depends on the file's shape.
package config
