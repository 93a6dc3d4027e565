package turns_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/turns"
)

// paramsRecorder is a Notifier that keeps every notification with its
// params.
type paramsRecorder struct {
	mu   sync.Mutex
	sent []sentNote
}

type sentNote struct {
	method string
	params any
}

func (r *paramsRecorder) Broadcast(method string, params any) { r.Send(nil, method, params) }
func (r *paramsRecorder) Send(_ []turns.ConnID, method string, params any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, sentNote{method, params})
}

func (r *paramsRecorder) notes() []sentNote {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sentNote(nil), r.sent...)
}

// A response whose headers report rate limits is followed, after its
// token usage, by account/rateLimits/updated to the thread's subscribers
// when they differ from the last the thread sent; Manager.RateLimits
// answers the latest of each provider.
func TestRateLimitsAnnouncedWhenTheyChange(t *testing.T) {
	codex := func(used string) map[string]string {
		return map[string]string{"x-codex-primary-used-percent": used, "x-codex-primary-window-minutes": "300", "x-codex-primary-reset-at": "1700003600"}
	}
	fake, err := fakemodel.Start(fakemodel.Script{Steps: []fakemodel.Step{
		{Text: "one", Headers: codex("10")},
		{Text: "two", Headers: codex("10")},
		{Text: "three"},
		{Text: "four", Headers: codex("49.6")},
	}})
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	router := model.NewRouter(model.RouterConfig{Providers: map[string]model.ProviderSource{
		"fake": {Config: model.ProviderConfig{BaseURL: fake.URL(), MaxRetries: -1}},
	}})
	st, _, _ := storeAndModel(t, `{"steps":[]}`)
	rec := &paramsRecorder{}
	m, err := turns.New(turns.Config{Store: st, Sink: sinkFor(rec), Models: router,
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()}})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	require.Empty(t, m.RateLimits())

	ctx := context.Background()
	th, after, err := m.StartThread(ctx, turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	for i := range 4 {
		_, after, err := m.StartTurn(ctx, turns.Caller{Conn: 1}, api.TurnStartParams{
			ThreadID: th.Thread.ID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hi"}},
		})
		require.NoError(t, err)
		after()
		require.Eventually(t, func() bool {
			n := 0
			for _, s := range rec.notes() {
				if s.method == "turn/completed" {
					n++
				}
			}
			return n == i+1
		}, 10*time.Second, 10*time.Millisecond)
	}

	var got []api.RateLimitSnapshot
	var order []string
	for _, s := range rec.notes() {
		switch s.method {
		case api.NotifyAccountRateLimitsUpdated:
			got = append(got, s.params.(api.AccountRateLimitsUpdatedNotification).RateLimits)
			order = append(order, s.method)
		case "thread/tokenUsage/updated":
			order = append(order, s.method)
		}
	}
	id, mins, reset := "fake", int64(300), int64(1700003600)
	want := func(used int32) api.RateLimitSnapshot {
		return api.RateLimitSnapshot{LimitID: &id, Primary: &api.RateLimitWindow{UsedPercent: used, WindowDurationMins: &mins, ResetsAt: &reset}}
	}
	require.Equal(t, []api.RateLimitSnapshot{want(10), want(50)}, got, "once per change, the share rounded")
	require.Equal(t, []string{"thread/tokenUsage/updated", api.NotifyAccountRateLimitsUpdated, "thread/tokenUsage/updated",
		"thread/tokenUsage/updated", "thread/tokenUsage/updated", api.NotifyAccountRateLimitsUpdated}, order, "after the response's token usage")
	require.Equal(t, map[string]api.RateLimitSnapshot{"fake": want(50)}, m.RateLimits())
}
