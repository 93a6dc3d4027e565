package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// testWebhookSecret is "whsec_" and the base64 of 24 bytes.
const testWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// [[webhooks]] entries load in order with their defaults; secret_file is
// read into Secret; config/read masks the secret and the URL's password.
func TestWebhooks(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secretFile, []byte(testWebhookSecret+"\n"), 0o600))
	cfg, warnings := mustLoad(t, Sources{File: writeConfig(t, `
[[webhooks]]
url = "https://ci.example/hook"
secret = "`+testWebhookSecret+`"
events = ["turn.completed", "turn.failed"]

[[webhooks]]
url = "http://user:pw@127.0.0.1:9000/in"
secret_file = "`+secretFile+`"
thread = "th-1"
allow_private = true
retry_for = "10m"
`)})
	require.Empty(t, warnings)
	require.Len(t, cfg.Webhooks, 2)
	require.Equal(t, Webhook{URL: "https://ci.example/hook", Secret: testWebhookSecret,
		Events: []string{"turn.completed", "turn.failed"}, RetryFor: DefaultWebhookRetryFor}, cfg.Webhooks[0])
	w := cfg.Webhooks[1]
	require.Equal(t, testWebhookSecret, w.Secret, "read from secret_file")
	require.Equal(t, "th-1", w.Thread)
	require.True(t, w.AllowPrivate)
	require.Equal(t, "10m0s", w.RetryFor.String())

	hooks := cfg.Redacted()["webhooks"].([]any)
	require.Equal(t, RedactedValue, hooks[0].(map[string]any)["secret"])
	require.Equal(t, RedactedValue, hooks[1].(map[string]any)["secret"])
	require.Equal(t, "http://user:"+RedactedValue+"@127.0.0.1:9000/in", hooks[1].(map[string]any)["url"])
}

func TestWebhookErrors(t *testing.T) {
	for _, tc := range []struct{ name, entry, want string }{
		{"no url", `secret = "` + testWebhookSecret + `"`, `webhooks.0.url: url is required`},
		{"ftp url", `url = "ftp://x/"` + "\n" + `secret = "` + testWebhookSecret + `"`, `url must be http:// or https://, got "ftp://x/"`},
		// The same rule as POST /v1/webhooks (which also refuses
		// credentials in the URL).
		{"url with a NUL", `url = "https://x/a\u0000"` + "\n" + `secret = "` + testWebhookSecret + `"`, `webhooks.0.url: url contains a NUL character`},
		{"url with a space", `url = "https://x/a b"` + "\n" + `secret = "` + testWebhookSecret + `"`, `is not a valid URL`},
		{"no secret", `url = "https://x/"`, `webhooks.0.secret: set secret or secret_file`},
		{"both secrets", `url = "https://x/"` + "\n" + `secret = "` + testWebhookSecret + `"` + "\n" + `secret_file = "/x"`, `mutually exclusive`},
		{"secret without prefix", `url = "https://x/"` + "\n" + `secret = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`, `"whsec_" and base64`},
		{"secret not base64", `url = "https://x/"` + "\n" + `secret = "whsec_!!!"`, `not standard base64`},
		{"secret too short", `url = "https://x/"` + "\n" + `secret = "whsec_c2hvcnQ="`, `holds 5 bytes`},
		{"missing secret file", `url = "https://x/"` + "\n" + `secret_file = "/nonexistent/secret"`, `webhooks.0.secret_file: cannot read the webhook secret`},
		{"unknown event", `url = "https://x/"` + "\n" + `secret = "` + testWebhookSecret + `"` + "\n" + `events = ["turn.started"]`, `unknown event type "turn.started"`},
		{"negative retry", `url = "https://x/"` + "\n" + `secret = "` + testWebhookSecret + `"` + "\n" + `retry_for = "-1s"`, `webhooks.0.retry_for: must not be negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, loadError(t, Sources{File: writeConfig(t, "[[webhooks]]\n"+tc.entry+"\n")}), tc.want)
		})
	}
	require.Contains(t, loadError(t, Sources{File: writeConfig(t, "webhooks = [\"https://x/\"]\n")}), "expected an array of tables")
	require.Contains(t, loadError(t, Sources{File: writeConfig(t, "webhooks = 1\n")}), "expected an array of tables")
}

// -c sets the array as a TOML value; the environment cannot express it
// and says so rather than half-reading it.
func TestWebhooksFromOverridesAndEnv(t *testing.T) {
	cfg, _ := mustLoad(t, Sources{Overrides: []string{`webhooks=[{url="https://ci.example/hook", secret="` + testWebhookSecret + `", events=["turn.failed"]}]`}})
	require.Equal(t, []Webhook{{URL: "https://ci.example/hook", Secret: testWebhookSecret, Events: []string{"turn.failed"}, RetryFor: DefaultWebhookRetryFor}}, cfg.Webhooks)
	require.Contains(t, loadError(t, Sources{Env: []string{"APPSERVER_WEBHOOKS=https://ci.example/hook"}}), "expected an array of tables")
}
