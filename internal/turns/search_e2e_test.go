package turns_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// thread/search finds threads by name, by their first message and by the
// text of any later user or agent message, case blind, page by page, with
// the matching text as the snippet.
func TestThreadSearch(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[{"match":{"user_text":"zoo"},"text":"A sleepy Kangaroo lives here"},{"text":"ok"}]}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			long := strings.Repeat("padding ", 20) + "Fix the FLAKY login test" + strings.Repeat(" and more", 20)
			withText := func(text string) string {
				id := apptest.StartThread(t, r, nil)
				r.Call("turn/start", apptest.Input(id, text))
				r.Until("turn/completed")
				return id
			}
			flakyMsg := withText(long)
			other := withText("Write the changelog")
			named := apptest.StartThread(t, r, nil)
			r.Call("thread/name/set", map[string]any{"threadId": named, "name": "Flaky builds"})

			search := func(params map[string]any) (map[string]string, *string) {
				t.Helper()
				res := r.Call("thread/search", params)
				apptest.ValidateSchema(t, "ThreadSearchResponse", res)
				var out struct {
					Data []struct {
						Thread struct {
							ID string `json:"id"`
						} `json:"thread"`
						Snippet string `json:"snippet"`
					} `json:"data"`
					NextCursor *string `json:"nextCursor"`
				}
				require.NoError(t, json.Unmarshal(res, &out))
				hits := map[string]string{}
				for _, h := range out.Data {
					hits[h.Thread.ID] = h.Snippet
				}
				return hits, out.NextCursor
			}
			hits, next := search(map[string]any{"searchTerm": "flaky"})
			require.Nil(t, next)
			require.Len(t, hits, 2)
			require.NotContains(t, hits, other)
			require.Equal(t, "Flaky builds", hits[named])
			snip := hits[flakyMsg]
			require.Contains(t, snip, "FLAKY login")
			require.True(t, strings.HasPrefix(snip, "…") && strings.HasSuffix(snip, "…"), snip)
			require.Less(t, len(snip), len(long))

			first, next := search(map[string]any{"searchTerm": "FLAKY", "limit": 1})
			require.Len(t, first, 1)
			require.NotNil(t, next)
			second, last := search(map[string]any{"searchTerm": "FLAKY", "limit": 1, "cursor": *next})
			require.Len(t, second, 1)
			require.Nil(t, last)
			for id := range first {
				require.NotContains(t, second, id)
			}

			// Later messages: the model's answer, and a user message after
			// the first (the preview).
			zoo := withText("Tell me about the zoo")
			r.Call("turn/start", apptest.Input(zoo, "and the Wombat keeper"))
			r.Until("turn/completed")
			hits, _ = search(map[string]any{"searchTerm": "kangaroo"})
			require.Equal(t, map[string]string{zoo: "A sleepy Kangaroo lives here"}, hits)
			hits, _ = search(map[string]any{"searchTerm": "WOMBAT"})
			require.Equal(t, map[string]string{zoo: "and the Wombat keeper"}, hits)
			hits, _ = search(map[string]any{"searchTerm": "agentMessage"})
			require.Empty(t, hits, "item types and JSON keys are not text")
			page1, next := search(map[string]any{"searchTerm": "o", "limit": 2})
			require.Len(t, page1, 2)
			page2, _ := search(map[string]any{"searchTerm": "o", "limit": 2, "cursor": *next})
			for id := range page1 {
				require.NotContains(t, page2, id)
			}

			none, _ := search(map[string]any{"searchTerm": "nothing like this"})
			require.Empty(t, none)
			f := r.CallRaw("thread/search", map[string]any{})
			require.NotNil(t, f.Error, "searchTerm is required")
		})
	}
}

// thread/search/stream sends each batch of ten verified hits as
// thread/search/partial, tagged with its request id, before its result,
// which holds every hit of the page.
func TestThreadSearchStreamPartials(t *testing.T) {
	d := apptest.Start(t, "--data-dir", t.TempDir())
	r := d.RPC(t)
	for i := range 12 {
		id := apptest.StartThread(t, r, nil)
		r.Call("thread/name/set", map[string]any{"threadId": id, "name": fmt.Sprintf("partial hit %d", i)})
	}
	r.Seen = nil
	f := r.CallRaw("thread/search/stream", map[string]any{"searchTerm": "PARTIAL hit"})
	require.Nil(t, f.Error)
	var res struct {
		Data []json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(f.Result, &res))
	require.Len(t, res.Data, 12)
	var partials []struct {
		RequestID json.RawMessage   `json:"requestId"`
		Data      []json.RawMessage `json:"data"`
	}
	for _, n := range r.Seen {
		if n.Method == "thread/search/partial" {
			partials = append(partials, struct {
				RequestID json.RawMessage   `json:"requestId"`
				Data      []json.RawMessage `json:"data"`
			}{})
			require.NoError(t, json.Unmarshal(n.Params, &partials[len(partials)-1]))
		}
	}
	require.Len(t, partials, 1)
	require.Equal(t, string(f.ID), string(partials[0].RequestID))
	require.Len(t, partials[0].Data, 10)
	for i, hit := range partials[0].Data {
		require.JSONEq(t, string(res.Data[i]), string(hit))
	}
}
