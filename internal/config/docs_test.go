package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// configKeys lists every key of the schema rooted at t, dotted, with "*"
// for the id of a table entry (model_providers.*.base_url): a key is a
// field whose value is not a table of tables.
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("toml")
		if !ok {
			continue
		}
		name := prefix + strings.Split(tag, ",")[0]
		ft := t.Field(i).Type
		switch {
		case ft.Kind() == reflect.Struct && ft.PkgPath() == configType.PkgPath():
			keys = append(keys, configKeys(ft, name+".")...)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, configKeys(ft.Elem(), name+".*.")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, configKeys(ft.Elem(), name+"[].")...)
		default:
			keys = append(keys, name)
		}
	}
	return keys
}

var (
	// docKeyRow is the first cell of a row of the key tables.
	docKeyRow = regexp.MustCompile("(?m)^\\| (`[^|]*)\\|")
	// codeSpan is one `key` in that cell.
	codeSpan = regexp.MustCompile("`([^`]+)`")
	// placeholder is the id of a table entry as the doc writes it.
	placeholder = regexp.MustCompile(`<[a-z]+>`)
)

// documentedKeys reads the keys of docs/configuration.md's tables: a row's
// first cell names a key, or a key and its siblings
// ("`mcp_servers.<id>.command` / `args`"), with <id>-style placeholders.
func documentedKeys(doc string) []string {
	var keys []string
	for _, row := range docKeyRow.FindAllStringSubmatch(doc, -1) {
		spans := codeSpan.FindAllStringSubmatch(row[1], -1)
		first := placeholder.ReplaceAllString(spans[0][1], "*")
		keys = append(keys, first)
		parent := first[:strings.LastIndex(first, ".")+1]
		for _, s := range spans[1:] {
			keys = append(keys, parent+s[1])
		}
	}
	return keys
}

// TestEveryKeyIsDocumented holds docs/configuration.md to the schema: every
// key the loader knows has a row, and every row names a key it knows.
func TestEveryKeyIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	documented := documentedKeys(string(doc))
	require.NotEmpty(t, documented)
	known := configKeys(configType, "")
	for _, k := range known {
		require.True(t, slices.Contains(documented, k), "config key %s has no row in docs/configuration.md", k)
	}
	for _, k := range documented {
		require.True(t, slices.Contains(known, k), "docs/configuration.md documents %s, which is not a config key", k)
	}
}

// TestDocumentedKeysReadsRows shows that the doc's rows are read as keys,
// siblings and placeholders included, so the test above compares keys.
func TestDocumentedKeysReadsRows(t *testing.T) {
	doc := "| Key | Type |\n|---|---|\n" +
		"| `listen` | string |\n" +
		"| `mcp_servers.<id>.command` / `args` | string / array |\n" +
		"| `mcp_servers.<id>.tools.<tool>.approval_mode` | same |\n"
	require.Equal(t, []string{"listen", "mcp_servers.*.command", "mcp_servers.*.args", "mcp_servers.*.tools.*.approval_mode"},
		documentedKeys(doc))
	require.Contains(t, configKeys(configType, ""), "mcp_servers.*.tools.*.approval_mode")
	require.Contains(t, configKeys(configType, ""), "model_providers.*.query_params")
}
