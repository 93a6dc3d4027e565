package config

import (
	"net/url"
	"reflect"
	"strings"
)

// RedactedValue replaces secrets in Redacted's output; it needs no
// escaping inside a URL.
const RedactedValue = "REDACTED"

// Redacted returns the effective configuration as a tree of snake_case keys
// mirroring config.toml, for the config/read method: durations are strings
// such as "10s", migrate is its effective value, unset optional lists are
// left out, and secrets are replaced by RedactedValue (ws_token_sha256 and
// the principals' token_sha256, the
// password in database_url, the webhooks' secrets and URL credentials, and header, query parameter and env values
// whose names look like credentials, e.g. Authorization or X-Api-Key).
func (c *Config) Redacted() map[string]any {
	m := c.tree()
	if c.WSTokenSHA256 != "" {
		m["ws_token_sha256"] = RedactedValue
	}
	if c.DatabaseURL != "" {
		m["database_url"] = redactURL(c.DatabaseURL)
	}
	maskTables := func(table string, fields ...string) {
		entries, _ := m[table].(map[string]any)
		for _, e := range entries {
			e := e.(map[string]any)
			for _, f := range fields {
				kv, _ := e[f].(map[string]any)
				for k := range kv {
					if isSecretName(k) {
						kv[k] = RedactedValue
					}
				}
			}
		}
	}
	if h, ok := m["http_api"].(map[string]any); ok {
		ps, _ := h["principals"].(map[string]any)
		for _, e := range ps {
			if e, ok := e.(map[string]any); ok {
				e["token_sha256"] = RedactedValue
			}
		}
	}
	if hooks, ok := m["webhooks"].([]any); ok {
		for _, e := range hooks {
			if e, ok := e.(map[string]any); ok {
				e["secret"] = RedactedValue
				e["url"] = redactURL(e["url"].(string))
			}
		}
	}
	maskTables("model_providers", "http_headers", "query_params")
	maskTables("mcp_servers", "http_headers", "env")
	return m
}

// Origins maps every leaf key of the effective configuration (dotted, as in
// config.toml, e.g. "model_providers.local.base_url") to the layer that set
// it, for config/read. A value inside a table entry created by a layer
// counts as set by that layer even where the entry's defaults supplied it.
func (c *Config) Origins() map[string]Layer {
	out := map[string]Layer{}
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, child := range m {
				walk(append(path[:len(path):len(path)], k), child)
			}
			return
		}
		layer := LayerDefault
		if o, ok := c.lookupOrigin(path); ok {
			layer = o.layer
		}
		out[formatKey(path)] = layer
	}
	for k, v := range c.tree() {
		walk([]string{k}, v)
	}
	return out
}

// tree converts the configuration to nested maps keyed by toml tags.
func (c *Config) tree() map[string]any {
	m := toTree(reflect.ValueOf(*c)).(map[string]any)
	m["migrate"] = c.MigrateOnStart()
	// Unset, these are absent, as in Codex: its clients read them as
	// enums, which "" is not.
	for _, k := range []string{"model_reasoning_effort", "model_reasoning_summary", "model_verbosity", "service_tier"} {
		if m[k] == "" {
			delete(m, k)
		}
	}
	return m
}

// toTree converts a value of the Config schema to maps, slices and scalars;
// nil pointers and nil slices become nil and are left out of their table.
func toTree(v reflect.Value) any {
	if v.Type() == durationType {
		return v.Interface().(interface{ String() string }).String()
	}
	switch v.Kind() {
	case reflect.Struct:
		m := map[string]any{}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			tag, ok := f.Tag.Lookup("toml")
			if !ok || !f.IsExported() {
				continue
			}
			if x := toTree(v.Field(i)); x != nil {
				m[strings.Split(tag, ",")[0]] = x
			}
		}
		return m
	case reflect.Map:
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[it.Key().String()] = toTree(it.Value())
		}
		return m
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		s := make([]any, v.Len())
		for i := range s {
			s[i] = toTree(v.Index(i))
		}
		return s
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return toTree(v.Elem())
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	case reflect.Int:
		return int(v.Int())
	case reflect.Float64:
		return v.Float()
	}
	return v.Interface()
}

// redactURL masks the password of a URL; an unparsable URL is masked whole.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return RedactedValue
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), RedactedValue)
	}
	q := u.Query()
	masked := false
	for k := range q {
		if isSecretName(k) {
			q.Set(k, RedactedValue)
			masked = true
		}
	}
	if masked {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// isSecretName reports whether a header, query parameter or environment
// variable name suggests that its value is a credential.
func isSecretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "token", "secret", "passw", "key", "cookie", "credential", "signature"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
