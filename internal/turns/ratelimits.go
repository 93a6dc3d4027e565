package turns

import (
	"math"
	"reflect"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
)

// RateLimitKeeper is a ModelRouter that keeps the latest rate limits its
// providers' responses reported; *model.Router is one.
type RateLimitKeeper interface {
	// RateLimits returns them by provider id.
	RateLimits() map[string]model.RateLimits
}

// RateLimits returns the latest rate limits each provider's responses
// reported, as the protocol's snapshots by provider id (the snapshot's
// limitId): empty when none did, or when the ModelRouter keeps none.
func (m *Manager) RateLimits() map[string]api.RateLimitSnapshot {
	k, ok := m.cfg.Models.(RateLimitKeeper)
	if !ok {
		return map[string]api.RateLimitSnapshot{}
	}
	all := k.RateLimits()
	out := make(map[string]api.RateLimitSnapshot, len(all))
	for id, rl := range all {
		out[id] = RateLimitSnapshot(id, rl)
	}
	return out
}

// RateLimitSnapshot is provider's rate limits in the protocol's shape: the
// limit id is the provider id, the share used is rounded to a whole
// percent, and what the headers did not say (a window's length or reset,
// a plan) is null.
func RateLimitSnapshot(provider string, rl model.RateLimits) api.RateLimitSnapshot {
	id := provider
	s := api.RateLimitSnapshot{LimitID: &id, Primary: rateWindow(rl.Primary), Secondary: rateWindow(rl.Secondary)}
	if c := rl.Credits; c != nil {
		s.Credits = &api.CreditsSnapshot{HasCredits: c.HasCredits, Unlimited: c.Unlimited}
		if c.Balance != "" {
			b := c.Balance
			s.Credits.Balance = &b
		}
	}
	return s
}

func rateWindow(w *model.RateWindow) *api.RateLimitWindow {
	if w == nil {
		return nil
	}
	out := &api.RateLimitWindow{UsedPercent: int32(math.Round(w.UsedPercent))}
	if w.WindowMinutes > 0 {
		m := w.WindowMinutes
		out.WindowDurationMins = &m
	}
	if !w.ResetsAt.IsZero() {
		s := w.ResetsAt.Unix()
		out.ResetsAt = &s
	}
	return out
}

// rateLimitsChanged returns the account/rateLimits/updated a response's
// rate limits make (sent to the thread's subscribers after the response's
// token usage, as the reference does) and whether they differ from the
// last the thread sent: only then is it sent. The thread counts it as sent
// from now on.
func (t *thread) rateLimitsChanged(provider string, rl *model.RateLimits) (api.AccountRateLimitsUpdatedNotification, bool) {
	if rl == nil {
		return api.AccountRateLimitsUpdatedNotification{}, false
	}
	s := RateLimitSnapshot(provider, *rl)
	t.mu.Lock()
	same := t.rateLimitsSent != nil && reflect.DeepEqual(*t.rateLimitsSent, s)
	t.rateLimitsSent = &s
	t.mu.Unlock()
	return api.AccountRateLimitsUpdatedNotification{RateLimits: s}, !same
}
