package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// duplicateKeys returns the keys that occur more than once in one object
// of a JSON log line (encoding/json would keep the last silently).
func duplicateKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	var dups []string
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key := k.(string)
				if seen[key] {
					dups = append(dups, key)
				}
				seen[key] = true
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	require.NoError(t, walk(), line)
	return dups
}

// TestRequestLogLines: the debug line of a request and a retry's warning,
// for a client the router built, name the provider once, with the
// caller's attributes, and nothing twice.
func TestRequestLogLines(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Error: &fakemodel.HTTPError{Status: 503, Message: "busy"}},
				{Text: "hi"},
			}})
			var logs bytes.Buffer
			r := model.NewRouter(model.RouterConfig{
				Providers: map[string]model.ProviderSource{"fake": {Config: model.ProviderConfig{BaseURL: srv.URL(), WireAPI: wire, MaxRetries: 1}}},
				Logger:    slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			})
			c, err := r.Client("fake")
			require.NoError(t, err)
			req := userRequest("hi")
			req.LogAttrs = []slog.Attr{slog.String("thread", "th1"), slog.String("turn", "tu1")}
			_, err = c.Stream(context.Background(), req, nil)
			require.NoError(t, err)

			msgs := map[string]map[string]any{}
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				require.Empty(t, duplicateKeys(t, line), "duplicate keys in %s", line)
				var rec map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &rec))
				msgs[rec["msg"].(string)] = rec
			}
			reqMsg := map[string]string{model.WireAPIResponses: "responses request", model.WireAPIChat: "chat request"}[wire]
			for _, msg := range []string{reqMsg, "model request failed; retrying"} {
				rec, ok := msgs[msg]
				require.True(t, ok, "no %q line in %s", msg, logs.String())
				require.Equal(t, "fake", rec["provider"], msg)
				require.Equal(t, "th1", rec["thread"], msg)
				require.Equal(t, "tu1", rec["turn"], msg)
			}
			require.Equal(t, "fake-model", msgs[reqMsg]["model"])
			require.Equal(t, 1.0, msgs[reqMsg]["items"])
		})
	}
}

// The checker finds what it is for.
func TestDuplicateKeys(t *testing.T) {
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).With("provider", "a").Info("m", "provider", "a", "g", map[string]any{"x": 1})
	require.Equal(t, []string{"provider"}, duplicateKeys(t, strings.TrimSpace(b.String())))
	require.Empty(t, duplicateKeys(t, `{"a":{"b":1},"b":[{"a":1},{"a":2}]}`))
}
