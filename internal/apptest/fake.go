package apptest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/model/fakemodel"
)

// StartFake starts the fake model with script (fakemodel's JSON script
// format) and closes it when the test ends.
func StartFake(t testing.TB, script string) *fakemodel.Server {
	t.Helper()
	s, err := fakemodel.ParseScript([]byte(script))
	require.NoError(t, err)
	srv, err := fakemodel.Start(s)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

// SetScript replaces the fake model's script and rewinds it.
func SetScript(t testing.TB, fake *fakemodel.Server, script string) {
	t.Helper()
	s, err := fakemodel.ParseScript([]byte(script))
	require.NoError(t, err)
	require.NoError(t, fake.SetScript(s))
}

// FakeArgs are the daemon's flags that make the fake model its model
// (model "fake-model" of provider "fake") over wire ("responses" or
// "chat"), without retries.
func FakeArgs(fake *fakemodel.Server, wire string) []string {
	return ModelArgs(fake.URL(), wire)
}

// ModelArgs is FakeArgs for any model server at baseURL (…/v1).
func ModelArgs(baseURL, wire string) []string {
	return []string{
		"-c", `model="fake-model"`,
		"-c", `model_provider="fake"`,
		"-c", `model_providers.fake={name="Fake", base_url="` + baseURL + `", wire_api="` + wire + `", request_max_retries=0}`,
	}
}

// StartFakeDaemon starts the fake model with script and a daemon using
// it (Responses wire, its own data directory, extra flags after).
func StartFakeDaemon(t testing.TB, script string, extra ...string) (*fakemodel.Server, *Daemon) {
	t.Helper()
	fake := StartFake(t, script)
	args := append([]string{"--data-dir", t.TempDir()}, FakeArgs(fake, "responses")...)
	return fake, Start(t, append(args, extra...)...)
}

// StartWithFake is StartFakeDaemon with an initialized client.
func StartWithFake(t testing.TB, script string, extra ...string) (*fakemodel.Server, *Daemon, *Client) {
	t.Helper()
	fake, d := StartFakeDaemon(t, script, extra...)
	return fake, d, d.RPC(t)
}

// WeatherTool is the client-registered (dynamic) tool lookup_weather, as
// the reference's captures register it; DynamicScript calls it.
var WeatherTool = map[string]any{
	"type": "function", "name": "lookup_weather", "description": "Look up the weather",
	"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
}

// DynamicScript is the fake model's script of one dynamic tool round:
// call lookup_weather as callID with args (JSON), then answer text once
// the call's output arrives.
func DynamicScript(callID, args, text string) string {
	return `{"steps":[
		{"tool_calls":[{"call_id":"` + callID + `","name":"lookup_weather","arguments":` + args + `}]},
		{"match":{"call_output":"` + callID + `"},"text":"` + text + `"}]}`
}

// CallScript is a script whose first response makes the tool calls calls
// (a JSON array of fakemodel tool calls) and whose second, once callID's
// output is back, answers text.
func CallScript(calls, callID, text string) string {
	return `{"steps":[{"tool_calls":` + calls + `},{"match":{"call_output":"` + callID + `"},"text":"` + text + `"}]}`
}

// ShellCall is a fakemodel tool call of shell_command with command.
func ShellCall(callID, command string) string {
	b, _ := json.Marshal(map[string]any{"call_id": callID, "name": "shell_command", "arguments": map[string]any{"command": command}})
	return string(b)
}

// ModelRequest is what tests read of a Responses request to the model.
type ModelRequest struct {
	Instructions string            `json:"instructions"`
	Tools        []json.RawMessage `json:"tools"`
	Input        []ModelInput      `json:"input"`
}

// ModelInput is one item of a Responses request's input.
type ModelInput struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	CallID string          `json:"call_id"`
	Name   string          `json:"name"`
	Output json.RawMessage `json:"output"`
}

// ModelRequests decodes the requests the fake model received, oldest
// first.
func ModelRequests(t testing.TB, fake *fakemodel.Server) []ModelRequest {
	t.Helper()
	var out []ModelRequest
	for _, r := range fake.Requests() {
		var m ModelRequest
		require.NoError(t, json.Unmarshal(r.Body, &m), "%s", r.Body)
		out = append(out, m)
	}
	return out
}

// ModelOutput is the output the model received for callID in its request
// i (0 the first): a function or custom tool call's output as text (the
// texts of content parts joined by newlines), other JSON as it is.
func ModelOutput(t testing.TB, fake *fakemodel.Server, i int, callID string) string {
	t.Helper()
	reqs := ModelRequests(t, fake)
	require.Greater(t, len(reqs), i, "model requests")
	for _, it := range reqs[i].Input {
		if (it.Type == "function_call_output" || it.Type == "custom_tool_call_output") && it.CallID == callID {
			var s string
			if json.Unmarshal(it.Output, &s) == nil {
				return s
			}
			var parts []struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			}
			if json.Unmarshal(it.Output, &parts) == nil && len(parts) > 0 {
				texts := make([]string, 0, len(parts))
				for _, p := range parts {
					if p.Text == nil {
						return string(it.Output)
					}
					texts = append(texts, *p.Text)
				}
				return strings.Join(texts, "\n")
			}
			return string(it.Output)
		}
	}
	t.Fatalf("request %d has no output for %s", i, callID)
	return ""
}
