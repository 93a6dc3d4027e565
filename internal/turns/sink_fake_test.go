package turns_test

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// notifier is what this package's test fakes record: every notification,
// whether a thread's (Publish), a broadcast or one client's.
type notifier interface {
	Broadcast(method string, params any)
	Send(to []turns.ConnID, method string, params any)
}

// requester answers the server requests of a test.
type requester interface {
	Request(ctx context.Context, req turns.ServerRequest) (json.RawMessage, api.RequestID, bool, error)
}

// testSink is the turns.Sink of the tests: it keeps subscriptions as the
// hub does, hands every notification to a notifier and every request to a
// requester (none: no client answers).
type testSink struct {
	n   notifier
	req requester

	mu   sync.Mutex
	subs map[string]map[turns.ConnID]bool
}

func sinkFor(n notifier) *testSink { return &testSink{n: n, subs: map[string]map[turns.ConnID]bool{}} }

// asking makes r answer the sink's requests.
func (s *testSink) asking(r requester) *testSink { s.req = r; return s }

func (s *testSink) Publish(ev turns.Event) {
	s.mu.Lock()
	var to []turns.ConnID
	for c := range s.subs[ev.ThreadID] {
		to = append(to, c)
	}
	s.mu.Unlock()
	s.n.Send(to, ev.Method, ev.Params)
}

// PublishWith is Publish after write, which gets no events: the fake
// keeps no log.
func (s *testSink) PublishWith(evs []turns.Event, write func([]*store.Event) error, before func(i int)) error {
	if err := write(nil); err != nil {
		return err
	}
	for i, ev := range evs {
		if before != nil {
			before(i)
		}
		s.Publish(ev)
	}
	return nil
}

func (s *testSink) Broadcast(method string, params any) { s.n.Broadcast(method, params) }

func (s *testSink) BroadcastThread(_ string, _ *string, method string, params any) {
	s.n.Broadcast(method, params)
}

func (s *testSink) Send(to turns.ConnID, method string, params any) {
	s.n.Send([]turns.ConnID{to}, method, params)
}

func (s *testSink) Subscribe(threadID string, conn turns.ConnID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs[threadID] == nil {
		s.subs[threadID] = map[turns.ConnID]bool{}
	}
	had := s.subs[threadID][conn]
	s.subs[threadID][conn] = true
	return !had
}

func (s *testSink) Welcome(string) {}

func (s *testSink) Unsubscribe(threadID string, conn turns.ConnID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	had := s.subs[threadID][conn]
	delete(s.subs[threadID], conn)
	return had
}

func (s *testSink) Forget(threadID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, threadID)
}

func (s *testSink) Watched(threadID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs[threadID]) > 0
}

func (s *testSink) Request(ctx context.Context, req turns.ServerRequest) (json.RawMessage, api.RequestID, bool, error) {
	if s.req == nil {
		return nil, api.RequestID{}, false, turns.ErrNoClient
	}
	return s.req.Request(ctx, req)
}
