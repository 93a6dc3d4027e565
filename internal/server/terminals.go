package server

import (
	"context"
	"strconv"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// registerTerminals serves thread/backgroundTerminals/*: the TUI's
// /ps-style view of the commands the model left running, with t.
func (s *Server) registerTerminals(t BackgroundTerminals) {
	id := []string{"threadId"}
	s.Handle("thread/backgroundTerminals/list", threadMethod(id, func(_ context.Context, _ *Call, p api.ThreadBackgroundTerminalsListParams) (api.ThreadBackgroundTerminalsListResult, turns.After, error) {
		res, err := terminalsPage(t.BackgroundTerminals(p.ThreadID), p.Cursor, p.Limit)
		return res, nil, err
	}))
	s.Handle("thread/backgroundTerminals/terminate", threadMethod([]string{"threadId", "processId"}, func(_ context.Context, _ *Call, p api.ThreadBackgroundTerminalsTerminateParams) (api.ThreadBackgroundTerminalsTerminateResult, turns.After, error) {
		return api.ThreadBackgroundTerminalsTerminateResult{Terminated: t.TerminateBackgroundTerminal(p.ThreadID, p.ProcessID)}, nil, nil
	}))
	s.Handle("thread/backgroundTerminals/clean", threadMethod(id, func(_ context.Context, _ *Call, p api.ThreadBackgroundTerminalsCleanParams) (api.ThreadBackgroundTerminalsCleanResult, turns.After, error) {
		t.CleanBackgroundTerminals(p.ThreadID)
		return api.ThreadBackgroundTerminalsCleanResult{}, nil, nil
	}))
}

// terminalsPage pages a list sorted by process id: the cursor is the last
// process id of the previous page, so that terminals ending between calls
// neither repeat nor hide others.
func terminalsPage(all []api.ThreadBackgroundTerminal, cursor *string, limit *uint32) (api.ThreadBackgroundTerminalsListResult, error) {
	start := 0
	if cursor != nil {
		after, err := strconv.Atoi(*cursor)
		if err != nil {
			return api.ThreadBackgroundTerminalsListResult{}, InvalidRequest("invalid cursor: %s", *cursor)
		}
		for start < len(all) {
			if id, _ := strconv.Atoi(all[start].ProcessID); id > after {
				break
			}
			start++
		}
	}
	page := all[start:]
	res := api.ThreadBackgroundTerminalsListResult{}
	if limit != nil && *limit > 0 && int(*limit) < len(page) {
		page = page[:*limit]
		next := page[len(page)-1].ProcessID
		res.NextCursor = &next
	}
	res.Data = page
	return res, nil
}
