package server

import (
	"context"
	"strconv"

	"github.com/appserver/appserver/api"
)

// FeatureSwitches serves experimentalFeature/list and
// experimentalFeature/enablement/set: the feature switches appserver
// implements, in the configuration of the connection's principal ("" for
// the operator's). *configview.Writer is one.
type FeatureSwitches interface {
	// ExperimentalFeatures lists the switches in principal's
	// configuration, under a thread's own switches (thread, by key).
	ExperimentalFeatures(principal string, thread map[string]bool) []api.ExperimentalFeature
	// SetFeatures writes the switches of enablement it implements to
	// principal's user config and returns those now set as asked.
	SetFeatures(ctx context.Context, principal string, enablement map[string]bool) (map[string]bool, error)
}

// registerFeatures installs experimentalFeature/list and
// experimentalFeature/enablement/set over f (docs/protocol.md §4.37).
func (s *Server) registerFeatures(f FeatureSwitches) {
	s.Handle("experimentalFeature/list", func(ctx context.Context, c *Call) (any, error) {
		var p api.ExperimentalFeatureListParams
		if err := DecodeParams(c, &p); err != nil {
			return nil, err
		}
		var thread map[string]bool
		if p.ThreadID != nil && s.cfg.Threads != nil {
			sw, err := s.cfg.Threads.ThreadFeatures(ctx, *p.ThreadID)
			if err != nil {
				return nil, err
			}
			thread = sw
		}
		all := f.ExperimentalFeatures(c.Session.who.Name(), thread)
		return pageFeatures(all, p.Cursor, p.Limit)
	})
	s.Handle("experimentalFeature/enablement/set", func(ctx context.Context, c *Call) (any, error) {
		var p api.ExperimentalFeatureEnablementSetParams
		if err := DecodeParams(c, &p, "enablement"); err != nil {
			return nil, err
		}
		applied, err := f.SetFeatures(ctx, c.Session.who.Name(), p.Enablement)
		if err != nil {
			return nil, err
		}
		return api.ExperimentalFeatureEnablementSetResult{Enablement: applied}, nil
	})
}

// pageFeatures pages the switches by an index cursor, as the reference
// does: no limit lists the rest, a limit of 0 counts as 1, a cursor past
// the end is refused.
func pageFeatures(all []api.ExperimentalFeature, cursor *string, limit *uint32) (api.ExperimentalFeatureListResult, error) {
	start := 0
	if cursor != nil {
		n, err := strconv.ParseUint(*cursor, 10, 32)
		if err != nil {
			return api.ExperimentalFeatureListResult{}, InvalidRequest("invalid cursor: %s", *cursor)
		}
		if n > uint64(len(all)) {
			return api.ExperimentalFeatureListResult{}, InvalidRequest("cursor %d exceeds total feature flags %d", n, len(all))
		}
		start = int(n)
	}
	end := len(all)
	if limit != nil {
		end = start + max(int(*limit), 1)
	}
	res := api.ExperimentalFeatureListResult{Data: api.List[api.ExperimentalFeature](all[start:min(end, len(all))])}
	if end < len(all) {
		next := strconv.Itoa(end)
		res.NextCursor = &next
	}
	return res, nil
}
