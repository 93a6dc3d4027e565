package config

import (
	"bytes"
	"testing"

	"github.com/BurntSushi/toml"
)

// Whatever an edit a client sends, checking it never panics, and what the
// allow-list accepts at write time it keeps at load time: the tree written
// and read back as TOML passes FilterUserConfig without a warning.
func FuzzClientEdit(f *testing.F) {
	for _, seed := range [][2]string{
		{"model", `"m2"`}, {"tui", `{"a":[1,2.5,"x",true]}`}, {"profiles.p", `{"sandbox_mode":"read-only"}`},
		{"notice.model_migrations", `{"m1":"m2"}`}, {`projects."/a b".trust_level`, `"trusted"`},
		{"http_api.principal_max_sandbox", `"danger-full-access"`}, {"model", "\"a\\u0000b\""}, {"features.x", `true`},
		{"tui.x", `{"y":{"z":[]}}`}, {"model", `null`},
	} {
		f.Add(seed[0], seed[1])
	}
	base, _, err := Load(Sources{File: "testdata/clientkeys_base.toml", Env: testEnv()})
	if err != nil {
		f.Fatal(err)
	}
	x := editContext{base: base, who: base.AuthorFor("alice")}
	f.Fuzz(func(t *testing.T, key, value string) {
		tree := map[string]any{}
		if err := applyEdit(tree, Edit{KeyPath: key, Value: []byte(value)}, x); err != nil {
			return
		}
		var buf bytes.Buffer
		if err := toml.NewEncoder(&buf).Encode(tree); err != nil {
			return // refused by WriteOverlay as not writable as TOML
		}
		var back map[string]any
		if _, err := toml.Decode(buf.String(), &back); err != nil {
			t.Fatalf("%s = %s: written TOML does not decode: %v\n%s", key, value, err, buf.String())
		}
		if _, warnings := FilterUserConfig(back, base, x.who, "fuzz"); len(warnings) > 0 {
			t.Fatalf("%s = %s: accepted when written, refused when loaded: %v", key, value, warnings)
		}
	})
}
