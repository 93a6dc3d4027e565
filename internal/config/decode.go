package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/apperr"
)

var (
	configType   = reflect.TypeFor[Config]()
	durationType = reflect.TypeFor[time.Duration]()
	providerType = reflect.TypeFor[ModelProvider]()
	mcpType      = reflect.TypeFor[MCPServer]()
	exporterType = reflect.TypeFor[OTelExporter]()
	webhookType  = reflect.TypeFor[Webhook]()
)

// origin is who last set a key (or created a table entry).
type origin struct {
	layer Layer
	// name is the source's name, as in source.name.
	name string
	// key is the dotted key the source addressed; empty for the file.
	key string
}

// source is one unit of input: the config file, or one environment
// variable, flag or -c override.
type source struct {
	layer Layer
	// name introduces error messages: "config file PATH", "env NAME",
	// "flag --x", "-c key=value".
	name string
	// key is the key path an env variable, flag or override addresses (nil
	// for the file). The value found there replaces what is configured,
	// tables included, as Codex's -c does; the file merges instead.
	key []string
}

// replaces reports whether the value at path replaces the existing one
// wholesale rather than merging into it.
func (s source) replaces(path []string) bool {
	return s.key != nil && slices.Equal(path, s.key)
}

// errorf returns an Invalid error "<source>: <key>: <problem>", leaving out
// the key when it is the one the source names itself (-c listen=5: …).
func (s source) errorf(path []string, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if s.key != nil && slices.Equal(path, s.key) {
		return apperr.New(apperr.Invalid, "%s: %s", s.name, msg)
	}
	return apperr.New(apperr.Invalid, "%s: %s: %s", s.name, formatKey(path), msg)
}

// loader decodes sources onto one Config, recording origins and warnings.
type loader struct {
	cfg      *Config
	origins  map[string]origin
	warnings []Warning
}

// apply decodes tree, a TOML-shaped value tree, onto the configuration.
func (l *loader) apply(s source, tree map[string]any) error {
	return l.decode(reflect.ValueOf(l.cfg).Elem(), tree, nil, s)
}

func (l *loader) record(path []string, s source) {
	l.origins[formatKey(path)] = origin{layer: s.layer, name: s.name, key: formatKey(s.key)}
}

// forget drops the origins recorded at and under path, for a value that
// replaces a whole table.
func (l *loader) forget(path []string) {
	key := formatKey(path)
	for k := range l.origins {
		if k == key || strings.HasPrefix(k, key+".") {
			delete(l.origins, k)
		}
	}
}

func (l *loader) unknown(parent reflect.Type, path []string, s source) {
	key := formatKey(path)
	// Plain quotes rather than %q: key may hold quoted segments, and
	// escaping them would make the message harder to read.
	msg := `unknown config key "` + key + `" (ignored)`
	if isCodexKey(parent, path[len(path)-1], len(path) == 1) {
		msg = `codex config key "` + key + `" is not used by appserver (ignored)`
	}
	l.warnings = append(l.warnings, Warning{Path: key, Message: msg, Source: s.name})
}

// decode stores raw, a value as BurntSushi/toml decodes into any, into v
// (whose type follows the Config schema), checking types as it goes.
func (l *loader) decode(v reflect.Value, raw any, path []string, s source) error {
	if v.Type() == durationType {
		str, ok := raw.(string)
		if !ok {
			return s.errorf(path, `expected a duration string such as "10s"`)
		}
		d, err := parseDuration(str)
		if err != nil {
			return s.errorf(path, `invalid duration %q (expected a duration such as "10s", "1m30s" or "90d")`, str)
		}
		v.SetInt(int64(d))
		l.record(path, s)
		return nil
	}
	if _, isTable := raw.(map[string]any); isTable && v.Type() == exporterType {
		// Codex's otel.exporter is a table ({otlp-http = {...}}) naming
		// where its log events go, not traces: a Codex file keeps
		// loading, and exports nothing here.
		key := formatKey(path)
		l.warnings = append(l.warnings, Warning{Path: key, Message: `codex config key "` + key + `" (a table) is not used by appserver (ignored); set it to "otlp-http" or "otlp-grpc" to export traces`, Source: s.name})
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		return l.decodeStruct(v, raw, path, s)
	case reflect.Map:
		return l.decodeMap(v, raw, path, s)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			return l.decodeTables(v, raw, path, s)
		}
		arr, ok := raw.([]any)
		if !ok {
			return s.errorf(path, "expected an array of strings")
		}
		out := make([]string, len(arr))
		for i, e := range arr {
			str, ok := e.(string)
			if !ok {
				return s.errorf(path, "expected an array of strings")
			}
			out[i] = str
		}
		v.Set(reflect.ValueOf(out))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := l.decode(p.Elem(), raw, path, s); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.String:
		str, ok := raw.(string)
		if !ok {
			return s.errorf(path, "expected a string")
		}
		v.SetString(str)
	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			return s.errorf(path, "expected a boolean")
		}
		v.SetBool(b)
	case reflect.Int:
		n, ok := raw.(int64)
		if !ok || v.OverflowInt(n) {
			return s.errorf(path, "expected an integer")
		}
		v.SetInt(n)
	case reflect.Float64:
		switch n := raw.(type) {
		case int64:
			v.SetFloat(float64(n))
		case float64:
			if math.IsNaN(n) || math.IsInf(n, 0) {
				return s.errorf(path, "expected a finite number")
			}
			v.SetFloat(n)
		default:
			return s.errorf(path, "expected a number")
		}
	default:
		panic(fmt.Sprintf("config: no decoder for %s at %s", v.Type(), formatKey(path)))
	}
	l.record(path, s)
	return nil
}

func (l *loader) decodeStruct(v reflect.Value, raw any, path []string, s source) error {
	tbl, ok := raw.(map[string]any)
	if !ok {
		return s.errorf(path, "expected a table")
	}
	fields := fieldsOf(v.Type())
	for _, k := range sortedKeys(tbl) {
		child := append(slices.Clip(path), k)
		i, ok := fields[k]
		if !ok {
			l.unknown(v.Type(), child, s)
			continue
		}
		if err := l.decode(v.Field(i), tbl[k], child, s); err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) decodeMap(v reflect.Value, raw any, path []string, s source) error {
	tbl, ok := raw.(map[string]any)
	if !ok {
		if v.Type().Elem().Kind() == reflect.Struct {
			return s.errorf(path, "expected a table of tables")
		}
		return s.errorf(path, "expected a table")
	}
	if v.IsNil() || s.replaces(path) {
		v.Set(reflect.MakeMap(v.Type()))
	}
	if s.replaces(path) {
		l.forget(path)
		l.record(path, s)
	}
	elemType := v.Type().Elem()
	for _, k := range sortedKeys(tbl) {
		child := append(slices.Clip(path), k)
		key := reflect.ValueOf(k)
		elem := reflect.New(elemType).Elem()
		if old := v.MapIndex(key); old.IsValid() && !s.replaces(child) {
			elem.Set(old)
		} else if elemType.Kind() == reflect.Struct {
			elem.Set(newEntry(elemType, k))
			l.forget(child)
			l.record(child, s)
		}
		if err := l.decode(elem, tbl[k], child, s); err != nil {
			return err
		}
		v.SetMapIndex(key, elem)
	}
	return nil
}

// decodeTables stores an array of tables ([[webhooks]]); a layer that
// sets it replaces the array of the layers below.
func (l *loader) decodeTables(v reflect.Value, raw any, path []string, s source) error {
	var tables []map[string]any
	switch arr := raw.(type) {
	case []map[string]any:
		tables = arr
	case []any:
		for _, e := range arr {
			tbl, ok := e.(map[string]any)
			if !ok {
				return s.errorf(path, "expected an array of tables")
			}
			tables = append(tables, tbl)
		}
	default:
		return s.errorf(path, "expected an array of tables")
	}
	l.forget(path)
	l.record(path, s)
	out := reflect.MakeSlice(v.Type(), len(tables), len(tables))
	for i, tbl := range tables {
		elem := out.Index(i)
		elem.Set(newEntry(v.Type().Elem(), ""))
		if err := l.decodeStruct(elem, tbl, append(slices.Clip(path), strconv.Itoa(i)), s); err != nil {
			return err
		}
	}
	v.Set(out)
	return nil
}

// newEntry is the starting value of a table entry the configuration creates
// or replaces: the defaults of its type, or the built-in provider for
// "openai".
func newEntry(t reflect.Type, id string) reflect.Value {
	switch t {
	case providerType:
		if id == DefaultModelProvider {
			return reflect.ValueOf(builtinOpenAI())
		}
		return reflect.ValueOf(newProvider())
	case mcpType:
		return reflect.ValueOf(newMCPServer())
	case webhookType:
		return reflect.ValueOf(Webhook{RetryFor: DefaultWebhookRetryFor})
	}
	return reflect.Zero(t)
}

// fieldsOf maps the toml tags of a struct's fields to their indexes.
func fieldsOf(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if tag, ok := t.Field(i).Tag.Lookup("toml"); ok {
			m[strings.Split(tag, ",")[0]] = i
		}
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// typeAt returns the Go type stored at a key path of the schema rooted at t.
func typeAt(t reflect.Type, path []string) (reflect.Type, bool) {
	for _, seg := range path {
		switch t.Kind() {
		case reflect.Struct:
			i, ok := fieldsOf(t)[seg]
			if !ok {
				return nil, false
			}
			t = t.Field(i).Type
		case reflect.Map:
			t = t.Elem()
		default:
			return nil, false
		}
	}
	return t, true
}

// flagValue converts a flag's text to the value tree decode expects for a
// key of type t.
func flagValue(t reflect.Type, text string) (any, error) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType, t.Kind() == reflect.String:
		return text, nil
	case t.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("expected a boolean, got %q", text)
		}
		return b, nil
	case t.Kind() == reflect.Int:
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("expected an integer, got %q", text)
		}
		return n, nil
	case t.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil {
			return nil, fmt.Errorf("expected a number, got %q", text)
		}
		return f, nil
	case t.Kind() == reflect.Slice && !strings.HasPrefix(strings.TrimSpace(text), "["):
		items := []any{}
		for item := range strings.SplitSeq(text, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		return items, nil
	}
	return parseValue(text), nil
}

// parseDuration reads a Go duration, or a whole number of days ("90d"),
// the unit retention periods are thought in.
func parseDuration(str string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(str, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("invalid number of days %q", days)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(str)
}
