package turns_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// lastModelTexts are the texts of the user and assistant messages of the
// last request the fake model received.
func lastModelTexts(t *testing.T, fake *fakemodel.Server) string {
	t.Helper()
	reqs := apptest.ModelRequests(t, fake)
	require.NotEmpty(t, reqs)
	var texts []string
	for _, in := range reqs[len(reqs)-1].Input {
		for _, c := range in.Content {
			texts = append(texts, c.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// thread/revert drops the named turn and every later one from the thread
// and from the model's context: the next turn's request lacks them,
// another subscriber hears thread/reverted, and a daemon restarted on the
// same store neither shows nor sends them.
func TestRevertDropsTurnsFromHistoryAndContext(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[{"text":"noted","times":20}]}`)
			args := append(storeArgs, apptest.FakeArgs(fake, "responses")...)
			d := apptest.Start(t, args...)
			r := d.RPC(t)
			id := apptest.StartThread(t, r, nil)
			apptest.RunTurn(t, r, id, "one apples")
			second := apptest.RunTurn(t, r, id, "two pears")
			apptest.RunTurn(t, r, id, "three plums")
			other := d.RPC(t)
			other.Call("thread/resume", map[string]any{"threadId": id})

			var res struct {
				Thread struct {
					ID    string            `json:"id"`
					Turns []json.RawMessage `json:"turns"`
				} `json:"thread"`
				TurnsBackwardsCursor *string `json:"turnsBackwardsCursor"`
				ItemsBackwardsCursor *string `json:"itemsBackwardsCursor"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/revert", map[string]any{"threadId": id, "beforeTurnId": second.Turn.ID}), &res))
			require.Equal(t, id, res.Thread.ID)
			require.Empty(t, res.Thread.Turns)
			require.NotNil(t, res.TurnsBackwardsCursor)
			require.NotNil(t, res.ItemsBackwardsCursor)
			other.Until("thread/reverted")

			// The cursors start at what is kept, newest first.
			var turns struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/turns/list", map[string]any{"threadId": id, "cursor": *res.TurnsBackwardsCursor, "sortDirection": "desc"}), &turns))
			require.Len(t, turns.Data, 1)
			var items struct {
				Data []struct {
					Item struct {
						Text string `json:"text"`
					} `json:"item"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/items/list", map[string]any{"threadId": id, "cursor": *res.ItemsBackwardsCursor, "sortDirection": "desc"}), &items))
			require.NotEmpty(t, items.Data)
			require.Equal(t, "noted", items.Data[0].Item.Text)

			apptest.RunTurn(t, r, id, "four figs")
			sent := lastModelTexts(t, fake)
			require.Contains(t, sent, "one apples")
			require.Contains(t, sent, "four figs")
			require.NotContains(t, sent, "two pears")
			require.NotContains(t, sent, "three plums")

			d.Stop(t)
			d2 := apptest.Start(t, args...)
			r2 := d2.RPC(t)
			var got []string
			for _, tu := range apptest.ReadTurns(t, r2, id) {
				for _, raw := range tu.Items {
					var it struct {
						Type    string `json:"type"`
						Content []struct {
							Text string `json:"text"`
						} `json:"content"`
					}
					require.NoError(t, json.Unmarshal(raw, &it))
					if it.Type == "userMessage" {
						got = append(got, it.Content[0].Text)
					}
				}
			}
			require.Equal(t, []string{"one apples", "four figs"}, got)
			r2.Call("thread/resume", map[string]any{"threadId": id})
			apptest.RunTurn(t, r2, id, "five kiwis")
			sent = lastModelTexts(t, fake)
			require.Contains(t, sent, "four figs")
			require.NotContains(t, sent, "two pears")
			require.NotContains(t, sent, "three plums")
		})
	}
}
