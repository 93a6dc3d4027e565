package model_test

import (
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
