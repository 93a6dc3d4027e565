package model

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimits is what one response's headers said of the provider's rate
// limits. Two header families are read: Codex's aggregate windows
// (x-codex-primary-used-percent and its siblings, as sent by the OpenAI
// backend the Codex CLI talks to and by gateways in front of it), and, when
// those are absent, OpenAI's per-key limits (x-ratelimit-limit-requests,
// x-ratelimit-remaining-requests, x-ratelimit-reset-requests and the same
// for tokens), the requests limit as the primary window and the tokens
// limit as the secondary one.
type RateLimits struct {
	// Primary and Secondary are the windows the headers described, nil
	// when they described none.
	Primary, Secondary *RateWindow
	// Credits is the account's credit balance (Codex's headers only).
	Credits *Credits
}

// RateWindow is one window of a rate limit.
type RateWindow struct {
	// UsedPercent is the share of the window used, 0 to 100.
	UsedPercent float64
	// WindowMinutes is the window's length; 0 when the headers do not say.
	WindowMinutes int64
	// ResetsAt is when the window resets; zero when the headers do not say.
	ResetsAt time.Time
}

// Credits is an account's credit balance as Codex's headers report it.
type Credits struct {
	// HasCredits and Unlimited are the balance's flags.
	HasCredits, Unlimited bool
	// Balance is the balance as written, "" when absent.
	Balance string
}

// parseRateLimits reads the rate-limit headers of h, received at now; ok
// is false when h holds none of either family.
func parseRateLimits(h http.Header, now time.Time) (RateLimits, bool) {
	var rl RateLimits
	rl.Primary = codexWindow(h, "x-codex-primary")
	rl.Secondary = codexWindow(h, "x-codex-secondary")
	if hc, ok := headerBool(h, "x-codex-credits-has-credits"); ok {
		if un, ok := headerBool(h, "x-codex-credits-unlimited"); ok {
			rl.Credits = &Credits{HasCredits: hc, Unlimited: un, Balance: strings.TrimSpace(h.Get("x-codex-credits-balance"))}
		}
	}
	if rl.Primary != nil || rl.Secondary != nil || rl.Credits != nil {
		return rl, true
	}
	rl.Primary = openAIWindow(h, "requests", now)
	rl.Secondary = openAIWindow(h, "tokens", now)
	return rl, rl.Primary != nil || rl.Secondary != nil
}

// codexWindow reads one window of Codex's family: <prefix>-used-percent,
// -window-minutes and -reset-at (Unix seconds).
func codexWindow(h http.Header, prefix string) *RateWindow {
	used, ok := headerFloat(h, prefix+"-used-percent")
	if !ok {
		return nil
	}
	w := &RateWindow{UsedPercent: clampPercent(used)}
	if m, err := strconv.ParseInt(strings.TrimSpace(h.Get(prefix+"-window-minutes")), 10, 64); err == nil && m > 0 {
		w.WindowMinutes = m
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(h.Get(prefix+"-reset-at")), 10, 64); err == nil && s > 0 {
		w.ResetsAt = time.Unix(s, 0)
	}
	return w
}

// openAIWindow reads OpenAI's limit of kind ("requests" or "tokens"): the
// share used is (limit-remaining)/limit, the reset a duration from now
// ("6m0s", "20ms").
func openAIWindow(h http.Header, kind string, now time.Time) *RateWindow {
	limit, ok := headerFloat(h, "x-ratelimit-limit-"+kind)
	if !ok || limit <= 0 {
		return nil
	}
	remaining, ok := headerFloat(h, "x-ratelimit-remaining-"+kind)
	if !ok {
		return nil
	}
	w := &RateWindow{UsedPercent: clampPercent((limit - remaining) / limit * 100)}
	if d, err := time.ParseDuration(strings.TrimSpace(h.Get("x-ratelimit-reset-" + kind))); err == nil && d >= 0 {
		w.ResetsAt = now.Add(d)
	}
	return w
}

func clampPercent(p float64) float64 { return min(max(p, 0), 100) }

func headerFloat(h http.Header, name string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.TrimSpace(h.Get(name)), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

func headerBool(h http.Header, name string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(h.Get(name))) {
	case "true", "1":
		return true, true
	case "false", "0":
		return false, true
	}
	return false, false
}
