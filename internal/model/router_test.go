package model_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// The router builds one client per provider, with the secrets read from
// the environment variables the config names (and only those), and
// refuses a provider that is not configured.
func TestRouter(t *testing.T) {
	srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{{Text: "one"}, {Text: "two"}}})
	env := map[string]string{"MY_KEY": "sk-from-env", "MY_ORG": "org-7", "EMPTY": ""}
	reads := 0
	r := model.NewRouter(model.RouterConfig{
		Providers: map[string]model.ProviderSource{
			"fake": {
				Config:    model.ProviderConfig{BaseURL: srv.URL(), APIKey: "sk-in-config", Headers: map[string]string{"X-Static": "s", "X-Org": "fallback"}, MaxRetries: -1},
				APIKeyEnv: "MY_KEY",
				HeaderEnv: map[string]string{"X-Org": "MY_ORG", "X-Empty": "EMPTY"},
			},
		},
		Getenv: func(k string) string { reads++; return env[k] },
	})
	c, err := r.Client("fake")
	require.NoError(t, err)
	_, res, err := run(t, c, userRequest("hi"))
	require.NoError(t, err)
	require.NotEmpty(t, res.Items)
	h := srv.Requests()[0].Header
	require.Equal(t, "Bearer sk-from-env", h.Get("Authorization"))
	require.Equal(t, "s", h.Get("X-Static"))
	require.Equal(t, "org-7", h.Get("X-Org"), "the environment's value wins")
	require.Empty(t, h.Values("X-Empty"), "an empty variable leaves the header out")

	again, err := r.Client("fake")
	require.NoError(t, err)
	require.Same(t, c, again, "one client per provider")
	require.Equal(t, 3, reads, "secrets are read once, when the client is built")

	_, err = r.Client("nope")
	require.Error(t, err)
	require.True(t, apperr.Is(err, apperr.Invalid), "%v", err)
	require.Contains(t, err.Error(), "[model_providers.nope]")
}

// The router keeps each provider's latest rate limits, from every
// response whose headers carry some (a refused one included), and a
// response's Result holds those of its last attempt that had any.
func TestRouterKeepsRateLimits(t *testing.T) {
	limits := func(remaining string) map[string]string {
		return map[string]string{"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": remaining, "x-ratelimit-reset-requests": "1s"}
	}
	srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
		{Headers: limits("0"), Error: &fakemodel.HTTPError{Status: 429, Message: "slow down", RetryAfter: "0"}},
		{Headers: limits("9"), Text: "one"},
		{Text: "two"},
		{Headers: limits("0"), Error: &fakemodel.HTTPError{Status: 400, Message: "bad"}},
	}})
	r := model.NewRouter(model.RouterConfig{Providers: map[string]model.ProviderSource{
		"a":     {Config: model.ProviderConfig{BaseURL: srv.URL()}},
		"other": {Config: model.ProviderConfig{BaseURL: srv.URL(), WireAPI: model.WireAPIChat}},
	}})
	require.Empty(t, r.RateLimits())
	c, err := r.Client("a")
	require.NoError(t, err)

	_, res, err := run(t, c, userRequest("hi"))
	require.NoError(t, err)
	require.Equal(t, 2, res.Attempts)
	require.NotNil(t, res.RateLimits)
	require.InDelta(t, 10, res.RateLimits.Primary.UsedPercent, 1e-9, "the last attempt's limits")
	require.Nil(t, res.RateLimits.Secondary)
	got := r.RateLimits()
	require.Len(t, got, 1, "only the provider used")
	require.Equal(t, *res.RateLimits, got["a"])

	_, res, err = run(t, c, userRequest("again"))
	require.NoError(t, err)
	require.Nil(t, res.RateLimits, "no rate-limit headers this time")
	require.Equal(t, got["a"], r.RateLimits()["a"], "the latest known are kept")

	_, _, err = run(t, c, userRequest("refused"))
	require.Error(t, err)
	require.InDelta(t, 100, r.RateLimits()["a"].Primary.UsedPercent, 1e-9, "a refusal's headers count")
}

type traceKey struct{}

// Propagate writes what the request's context carries into the headers
// of each attempt of each client the router builds.
func TestRouterPropagation(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			srv := startFake(t, fakemodel.Script{Steps: []fakemodel.Step{
				{Error: &fakemodel.HTTPError{Status: 503, Message: "busy"}},
				{Text: "hi"},
			}})
			r := model.NewRouter(model.RouterConfig{
				Providers: map[string]model.ProviderSource{"fake": {Config: model.ProviderConfig{BaseURL: srv.URL(), WireAPI: wire, MaxRetries: 1}}},
				Propagate: func(ctx context.Context, h http.Header) {
					if v, ok := ctx.Value(traceKey{}).(string); ok {
						h.Set("Traceparent", v)
					}
				},
			})
			c, err := r.Client("fake")
			require.NoError(t, err)
			ctx := context.WithValue(context.Background(), traceKey{}, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
			_, err = c.Stream(ctx, userRequest("hi"), nil)
			require.NoError(t, err)
			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			for _, rq := range reqs {
				require.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", rq.Header.Get("Traceparent"))
			}
			_, err = c.Stream(context.Background(), userRequest("hi"), nil)
			require.NoError(t, err)
			require.Empty(t, srv.Requests()[2].Header.Values("Traceparent"))
		})
	}
}
