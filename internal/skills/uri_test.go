package skills

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testPackage = "skill://plugin_demo/deploy"

func TestValidateResourceInPackageAccepts(t *testing.T) {
	for _, res := range []string{
		"skill://plugin_demo/deploy/SKILL.md",
		"skill://plugin_demo/deploy/references/deploy.md",
		"skill://plugin_demo/deploy/a%20b.md",
		"skill://plugin_demo/deploy/%C3%A9t%C3%A9.md",
		"skill://plugin_demo/deploy/v1.2/file~name_(x)+y=z;@:.md",
		"skill://plugin_demo/deploy/.../x", // three dots is a name, not a dot segment
		"skill://plugin_demo/deploy/100%25.md",
	} {
		t.Run(res, func(t *testing.T) {
			p, r, err := ValidateResourceInPackage(testPackage, res)
			require.NoError(t, err)
			assert.Equal(t, testPackage, p.String())
			assert.Equal(t, res, r.String(), "a valid URI round-trips byte for byte")
		})
	}
}

// TestValidateResourceInPackageRejects pins every rejection class with the
// reason the model reads.
func TestValidateResourceInPackageRejects(t *testing.T) {
	cases := []struct {
		name, pkg, res, reason string
	}{
		{"cross-package sibling", testPackage, "skill://plugin_demo/other/SKILL.md", "not inside the requested package"},
		{"cross-package prefix", testPackage, "skill://plugin_demo/deployX/SKILL.md", "not inside the requested package"},
		{"cross-host", testPackage, "skill://evil/deploy/SKILL.md", "not inside the requested package"},
		{"package itself", testPackage, testPackage, "names the package itself"},
		{"parent", testPackage, "skill://plugin_demo/SKILL.md", "not inside the requested package"},
		{"dot-dot", testPackage, "skill://plugin_demo/deploy/../other/SKILL.md", "dot segments"},
		{"dot", testPackage, "skill://plugin_demo/deploy/./SKILL.md", "dot segments"},
		{"trailing dot-dot", testPackage, "skill://plugin_demo/deploy/..", "dot segments"},
		{"encoded dot-dot", testPackage, "skill://plugin_demo/deploy/%2e%2e/other/SKILL.md", "encoded dots or path separators"},
		{"encoded dot-dot upper", testPackage, "skill://plugin_demo/deploy/%2E%2E/x", "encoded dots or path separators"},
		{"encoded half dot", testPackage, "skill://plugin_demo/deploy/.%2e/x", "encoded dots or path separators"},
		{"encoded slash", testPackage, "skill://plugin_demo/deploy/..%2fother%2fSKILL.md", "encoded dots or path separators"},
		{"encoded slash upper", testPackage, "skill://plugin_demo/deploy/a%2Fb", "encoded dots or path separators"},
		{"encoded backslash", testPackage, "skill://plugin_demo/deploy/a%5cb", "encoded dots or path separators"},
		{"backslash", testPackage, `skill://plugin_demo/deploy/..\other`, "backslashes"},
		{"query", testPackage, "skill://plugin_demo/deploy/SKILL.md?raw=1", "query strings are not allowed"},
		{"empty query", testPackage, "skill://plugin_demo/deploy/SKILL.md?", "query strings are not allowed"},
		{"fragment", testPackage, "skill://plugin_demo/deploy/SKILL.md#top", "fragments are not allowed"},
		{"absolute path", testPackage, "/etc/passwd", "absolute filesystem paths"},
		{"absolute home", testPackage, "~/.ssh/id_rsa", "absolute filesystem paths"},
		{"windows path", testPackage, `C:\Windows\win.ini`, "absolute filesystem paths"},
		{"unc path", testPackage, `\\server\share`, "absolute filesystem paths"},
		{"relative path", testPackage, "deploy/SKILL.md", "must start with skill://"},
		{"file scheme", testPackage, "file:///etc/passwd", "unsupported scheme"},
		{"scheme case", testPackage, "SKILL://plugin_demo/deploy/SKILL.md", "lowercase"},
		{"lowercase escape", testPackage, "skill://plugin_demo/deploy/a%c3%a9", "uppercase hex"},
		{"escaped unreserved", testPackage, "skill://plugin_demo/deploy/%41.md", "must be written unescaped"},
		{"bad escape", testPackage, "skill://plugin_demo/deploy/a%zz", "two-digit"},
		{"short escape", testPackage, "skill://plugin_demo/deploy/a%2", "two-digit"},
		{"encoded control", testPackage, "skill://plugin_demo/deploy/a%00b", "encoded control"},
		{"raw unicode", testPackage, "skill://plugin_demo/deploy/été.md", "non-ASCII"},
		{"double slash", testPackage, "skill://plugin_demo/deploy//SKILL.md", "empty path segments"},
		{"trailing slash", testPackage, "skill://plugin_demo/deploy/refs/", "empty path segments"},
		{"userinfo", testPackage, "skill://user@plugin_demo/deploy/SKILL.md", "user information"},
		{"port", testPackage, "skill://plugin_demo:80/deploy/SKILL.md", "port"},
		{"no host", testPackage, "skill:///deploy/SKILL.md", "host is empty"},
		{"space", testPackage, "skill://plugin_demo/deploy/a b", "whitespace"},
		{"control", testPackage, "skill://plugin_demo/deploy/a\x01b", "control characters"},
		{"angle", testPackage, "skill://plugin_demo/deploy/<x>", "'<' or '>'"},
		{"quote", testPackage, `skill://plugin_demo/deploy/a"b`, "must be percent-encoded"},
		{"empty", testPackage, "", "empty"},
		{"too long", testPackage, testPackage + "/" + strings.Repeat("a", MaxResourceURIBytes), "longer than 2048 bytes"},
		{"package with query", "skill://plugin_demo/deploy?x", "skill://plugin_demo/deploy/SKILL.md", "query strings"},
		{"package without path", "skill://plugin_demo", "skill://plugin_demo/SKILL.md", "at least one path segment"},
		{"package too long", "skill://h/" + strings.Repeat("a", MaxPackageURIBytes), "skill://h/x/y", "longer than 1024 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ValidateResourceInPackage(tc.pkg, tc.res)
			require.Error(t, err)
			var ue *URIError
			require.ErrorAs(t, err, &ue)
			assert.Contains(t, err.Error(), tc.reason)
		})
	}
}

func TestEscapeSegmentRoundTrip(t *testing.T) {
	for _, name := range []string{"deploy", "a b", "été", "日本語", "100%", "x?y#z", "..."} {
		seg := EscapeSegment(name)
		u, err := ParseResourceURI("skill://local/r/" + seg)
		require.NoError(t, err, "escaped %q", name)
		got, ok := UnescapeSegment(u.Segments[1])
		require.True(t, ok)
		assert.Equal(t, name, got)
	}
	// Separators cannot be carried by a segment at all.
	for _, name := range []string{"a/b", `a\b`} {
		_, err := ParseResourceURI("skill://local/r/" + EscapeSegment(name))
		assert.Error(t, err, name)
	}
}

// FuzzParseURI checks that the validator never panics and that whatever
// it accepts is canonical and traversal-free.
func FuzzParseURI(f *testing.F) {
	for _, s := range []string{
		"skill://plugin_demo/deploy/SKILL.md", "skill://h/a%20b", "skill://h/%2e%2e", "skill://h/a/../b",
		"skill://h/a?b", "skill://h/a#b", "/etc/passwd", "SKILL://h/a", "skill://h/a%2F", "skill://u@h:1/a",
	} {
		f.Add(s, "skill://plugin_demo/deploy")
	}
	f.Fuzz(func(t *testing.T, res, pkg string) {
		u, err := ParseResourceURI(res)
		if err != nil {
			return
		}
		if u.String() != res {
			t.Fatalf("accepted %q but it serializes as %q", res, u.String())
		}
		if strings.ContainsAny(res, "?#\\ ") || strings.Contains(strings.ToLower(res), "%2e") || strings.Contains(strings.ToLower(res), "%2f") {
			t.Fatalf("accepted traversal-shaped %q", res)
		}
		for _, seg := range u.Segments {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted bad segment %q in %q", seg, res)
			}
			name, ok := UnescapeSegment(seg)
			if !ok || strings.ContainsAny(name, "/\\\x00") || name == "." || name == ".." {
				t.Fatalf("segment %q of %q decodes to %q", seg, res, name)
			}
		}
		if p, r, err := ValidateResourceInPackage(pkg, res); err == nil {
			if !strings.HasPrefix(r.String(), p.String()+"/") {
				t.Fatalf("resource %q accepted outside package %q", res, pkg)
			}
		}
	})
}
