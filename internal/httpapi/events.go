package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/hub"
)

// untilTurnCompleted is the value of ?until= that ends a stream after the
// first turn/completed event it sends.
const untilTurnCompleted = "turnCompleted"

// parseAfter reads the resume position: Last-Event-ID (what EventSource
// sends when it reconnects) wins over ?after=. explicit is false when
// neither is given.
func parseAfter(r *http.Request) (after int64, explicit bool, p *problem) {
	raw, name := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if raw == "" {
		raw, name = r.URL.Query().Get("after"), "after"
	}
	if raw == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil || n < 0 {
		return 0, false, invalid("%s must be an event sequence number (a non-negative integer), got %q", name, raw)
	}
	return n, true, nil
}

// events serves GET /v1/threads/{id}/events: the thread's notifications as
// server-sent events, each with its sequence number as the SSE id and its
// method as the SSE event name. With ?after=SEQ or Last-Event-ID the
// stream resumes right after that event, without a gap, or answers 410 if
// the events after it are no longer buffered (after=0: from the first
// event recorded). Without either it starts with every buffered event.
// ?until=turnCompleted ends the stream after the first turn/completed.
func (a *API) events(w http.ResponseWriter, r *http.Request) *problem {
	th, p := a.visibleThread(r)
	if p != nil {
		return p
	}
	after, explicit, p := parseAfter(r)
	if p != nil {
		return p
	}
	until := r.URL.Query().Get("until")
	if until != "" && until != untilTurnCompleted {
		return invalid("query parameter until must be %q, got %q", untilTurnCompleted, until)
	}
	ctx := r.Context()
	l, err := a.logs.attach(ctx, th.ID)
	if err != nil {
		return a.fromError(r, err)
	}
	defer l.release()
	// backlog is the first page of the thread's durable event log when the
	// stream resumes from before what the log here holds (another daemon's
	// events, or this daemon's before a restart).
	var backlog []*hub.Notification
	if !explicit {
		after = l.start()
	} else if !l.resumable(after) {
		seq := after >> posShift
		evs, err := a.cfg.Hub.EventsAfter(ctx, th.ID, seq, 0)
		if err != nil {
			return a.fromError(r, err)
		}
		switch {
		case len(evs) > 0 && (after == 0 || evs[0].Seq == seq+1 || a.keptFrom(ctx, th.ID, seq)):
			backlog = evs
		case after == 0:
			after = l.floor - 1
		}
		if backlog == nil && !l.resumable(after) {
			return newProblem(http.StatusGone, api.ProblemEventsGone,
				"the events after %d are no longer available: re-read the items (GET /v1/threads/%s/items), then stream without a position or with after=%d",
				after, th.ID, l.start())
		}
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // ask proxies not to buffer the stream
	w.WriteHeader(http.StatusOK)
	a.metrics.streams.Inc()
	defer a.metrics.streams.Dec()

	write := func(f func() error) bool {
		_ = rc.SetWriteDeadline(a.now().Add(a.cfg.WriteTimeout))
		if err := f(); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// retry tells EventSource how soon to reconnect after a drop.
	if !write(func() error { _, err := fmt.Fprintf(w, "retry: 1000\n\n"); return err }) {
		return nil
	}
	hb := time.NewTicker(a.cfg.Heartbeat)
	defer hb.Stop()
	cursor := after
	// The durable log first, page by page, until the log here holds what
	// follows.
	for len(backlog) > 0 {
		done := false
		ok := write(func() error {
			for _, ev := range backlog {
				pos := ev.Seq << posShift
				if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", pos, ev.Method, ev.Frame()); err != nil {
					return err
				}
				cursor = pos
				if until == untilTurnCompleted && ev.Method == "turn/completed" {
					done = true
					return nil
				}
			}
			return nil
		})
		if !ok || done || l.resumable(cursor) {
			if !ok || done {
				return nil
			}
			break
		}
		var err error
		if backlog, err = a.cfg.Hub.EventsAfter(ctx, th.ID, cursor>>posShift, 0); err != nil {
			return nil
		}
	}
	for {
		evs, wake, gone := l.read(cursor)
		if gone {
			// This stream fell behind the buffer: say so and end; the
			// client reconnects with Last-Event-ID and gets 410.
			gp := newProblem(http.StatusGone, api.ProblemEventsGone, "this stream fell behind and events after %d were dropped", cursor)
			params, _ := json.Marshal(gp.body(r))
			data, _ := json.Marshal(api.HTTPEvent{Method: api.HTTPStreamErrorMethod, Params: params, EmittedAtMs: a.now().UnixMilli()})
			write(func() error {
				_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", api.HTTPStreamErrorMethod, data)
				return err
			})
			return nil
		}
		if len(evs) > 0 {
			done := false
			ok := write(func() error {
				for _, ev := range evs {
					if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.seq, ev.method, ev.data); err != nil {
						return err
					}
					cursor = ev.seq
					if until == untilTurnCompleted && ev.method == "turn/completed" {
						done = true
						return nil
					}
				}
				return nil
			})
			if !ok || done {
				return nil
			}
			continue
		}
		select {
		case <-wake:
		case <-hb.C:
			if !write(func() error { _, err := fmt.Fprint(w, ": keep-alive\n\n"); return err }) {
				return nil
			}
		case <-ctx.Done():
			return nil
		case <-a.stopping:
			// The turns have stopped: send what is left, then end.
			if evs, _, gone := l.read(cursor); !gone && len(evs) > 0 {
				write(func() error {
					for _, ev := range evs {
						if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.seq, ev.method, ev.data); err != nil {
							return err
						}
					}
					return nil
				})
			}
			return nil
		}
	}
}

// keptFrom reports whether a thread's durable log still holds everything
// after seq although the first event it returns after seq is not seq+1:
// the numbers between are deltas of completed items, never stored (the
// completion carries the item whole), or the hub's own entries. The log
// is cut oldest first, so it holds everything after seq when its oldest
// event is no later than seq+1.
func (a *API) keptFrom(ctx context.Context, threadID string, seq int64) bool {
	first, err := a.cfg.Hub.EventsAfter(ctx, threadID, 0, 1)
	return err == nil && len(first) > 0 && first[0].Seq <= seq+1
}
