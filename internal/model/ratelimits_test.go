package model

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseRateLimits(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    *RateLimits
	}{
		{"none", map[string]string{"Content-Type": "text/event-stream"}, nil},
		{"openai", map[string]string{
			"x-ratelimit-limit-requests": "200", "x-ratelimit-remaining-requests": "150", "x-ratelimit-reset-requests": "120ms",
			"x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "7500", "x-ratelimit-reset-tokens": "6m0s",
		}, &RateLimits{
			Primary:   &RateWindow{UsedPercent: 25, ResetsAt: now.Add(120 * time.Millisecond)},
			Secondary: &RateWindow{UsedPercent: 75, ResetsAt: now.Add(6 * time.Minute)},
		}},
		{"openai tokens only, reset unreadable", map[string]string{
			"x-ratelimit-limit-tokens": "100", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "soon",
		}, &RateLimits{Secondary: &RateWindow{UsedPercent: 100}}},
		{"openai without remaining, or a zero limit", map[string]string{
			"x-ratelimit-limit-requests": "100", "x-ratelimit-limit-tokens": "0", "x-ratelimit-remaining-tokens": "0",
		}, nil},
		{"remaining above the limit is 0% used", map[string]string{
			"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "12",
		}, &RateLimits{Primary: &RateWindow{UsedPercent: 0}}},
		{"codex", map[string]string{
			"x-codex-primary-used-percent": "12.5", "x-codex-primary-window-minutes": "300", "x-codex-primary-reset-at": "1700003600",
			"x-codex-secondary-used-percent": "NaN",
			"x-codex-credits-has-credits":    "true", "x-codex-credits-unlimited": "0", "x-codex-credits-balance": " 12.00 ",
			// Codex's family wins over OpenAI's.
			"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "1",
		}, &RateLimits{
			Primary: &RateWindow{UsedPercent: 12.5, WindowMinutes: 300, ResetsAt: time.Unix(1_700_003_600, 0)},
			Credits: &Credits{HasCredits: true, Balance: "12.00"},
		}},
		{"codex credits need both flags", map[string]string{"x-codex-credits-has-credits": "true"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			got, ok := parseRateLimits(h, now)
			if tc.want == nil {
				require.False(t, ok, "%+v", got)
				return
			}
			require.True(t, ok)
			require.Equal(t, *tc.want, got)
		})
	}
}
