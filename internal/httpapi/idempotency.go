package httpapi

import (
	"container/list"
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// maxIdempotencyKeyLen bounds an Idempotency-Key header.
const maxIdempotencyKeyLen = 255

// idemKey scopes an Idempotency-Key to the caller and the thread.
type idemKey struct {
	who    string // the principal's name, "" for the operator
	thread string
	key    string
}

// idemEntry is one remembered POST .../turns: in flight until done closes,
// then either the turn it started (ok) or forgotten.
type idemEntry struct {
	key     idemKey
	hash    [sha256.Size]byte // of the request, canonically encoded
	done    chan struct{}
	expires time.Time
	elem    *list.Element

	// Written before done closes, read after.
	ok          bool
	turnID      string
	eventsAfter int64
}

// idempotency remembers which turn each Idempotency-Key started, in memory:
// for TTL after first use, and at most max keys (the oldest go first). A
// key is therefore not remembered across daemon restarts.
type idempotency struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu    sync.Mutex
	m     map[idemKey]*idemEntry
	order *list.List // of *idemEntry, oldest first
}

func newIdempotency(ttl time.Duration, maxKeys int, now func() time.Time) *idempotency {
	return &idempotency{ttl: ttl, max: maxKeys, now: now, m: map[idemKey]*idemEntry{}, order: list.New()}
}

// validIdempotencyKey checks a header value: 1-255 visible ASCII characters.
func validIdempotencyKey(k string) bool {
	if k == "" || len(k) > maxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// begin claims a key. The first request with it becomes its owner (owner
// true) and must call succeed or fail. A later request with the same
// request waits for the owner and gets the entry of the turn it started; if
// the owner failed, the later request becomes the owner and tries itself.
// A later request with a different body is refused.
func (x *idempotency) begin(ctx context.Context, k idemKey, hash [sha256.Size]byte) (e *idemEntry, owner bool, p *problem) {
	for {
		x.mu.Lock()
		e = x.m[k]
		if e != nil && x.now().After(e.expires) {
			x.removeLocked(e)
			e = nil
		}
		if e == nil {
			e = &idemEntry{key: k, hash: hash, done: make(chan struct{}), expires: x.now().Add(x.ttl)}
			x.m[k] = e
			e.elem = x.order.PushBack(e)
			for x.order.Len() > x.max {
				x.removeLocked(x.order.Front().Value.(*idemEntry))
			}
			x.mu.Unlock()
			return e, true, nil
		}
		x.mu.Unlock()
		if e.hash != hash {
			return nil, false, newProblem(http.StatusUnprocessableEntity, api.ProblemIdempotencyKeyReused,
				"Idempotency-Key %q was already used with a different request body for this thread", k.key)
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, false, unavailable("the request was cancelled while an earlier request with the same Idempotency-Key was running")
		}
		if e.ok {
			return e, false, nil
		}
	}
}

// succeed records the turn the owner started.
func (x *idempotency) succeed(e *idemEntry, turnID string, eventsAfter int64) {
	e.ok, e.turnID, e.eventsAfter = true, turnID, eventsAfter
	close(e.done)
}

// fail forgets a key whose request did not start a turn, so a retry can.
func (x *idempotency) fail(e *idemEntry) {
	x.mu.Lock()
	if x.m[e.key] == e {
		x.removeLocked(e)
	}
	x.mu.Unlock()
	close(e.done)
}

func (x *idempotency) removeLocked(e *idemEntry) {
	if x.m[e.key] == e {
		delete(x.m, e.key)
	}
	if e.elem != nil {
		x.order.Remove(e.elem)
		e.elem = nil
	}
}

// expire forgets the keys whose TTL has passed.
func (x *idempotency) expire() {
	now := x.now()
	x.mu.Lock()
	defer x.mu.Unlock()
	for el := x.order.Front(); el != nil; {
		e := el.Value.(*idemEntry)
		next := el.Next()
		// Entries are in insertion order with one TTL, so expiry times
		// grow: stop at the first live one.
		if !now.After(e.expires) {
			break
		}
		x.removeLocked(e)
		el = next
	}
}

// len returns the number of keys remembered.
func (x *idempotency) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.m)
}

// keyPoll is how often a request waits for another daemon to record the
// turn of a key it claimed.
const keyPoll = 50 * time.Millisecond

// idemScope is a key's scope in the store: the thread (a UUID, without
// '/') and the principal.
func idemScope(k idemKey) string { return k.thread + "/" + k.who }

// claimKey claims a key in the store, shared by the daemons of one
// database. claimed: this request starts the turn. Otherwise turnID is the
// turn another request started; while that request is still starting it
// (on another daemon), claimKey waits.
func (a *API) claimKey(r *http.Request, k idemKey, hash [sha256.Size]byte) (turnID string, claimed bool, p *problem) {
	ctx := r.Context()
	for {
		now := a.now()
		claimed, turnID, err := a.cfg.Keys.ClaimIdempotencyKey(ctx, idemScope(k), k.key, hash[:], now, now.Add(a.cfg.IdempotencyTTL))
		switch {
		case apperr.Is(err, apperr.Conflict):
			return "", false, newProblem(http.StatusUnprocessableEntity, api.ProblemIdempotencyKeyReused,
				"Idempotency-Key %q was already used with a different request body for this thread", k.key)
		case err != nil:
			return "", false, a.fromError(r, err)
		case claimed || turnID != "":
			return turnID, claimed, nil
		}
		select {
		case <-time.After(keyPoll):
		case <-ctx.Done():
			return "", false, unavailable("the request was cancelled while an earlier request with the same Idempotency-Key was running")
		}
	}
}

// releaseKey gives up a claimed key whose request (of ctx, which may
// have ended) started no turn.
func (a *API) releaseKey(ctx context.Context, k idemKey) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := a.cfg.Keys.ReleaseIdempotencyKey(ctx, idemScope(k), k.key); err != nil {
		a.log.ErrorContext(ctx, "releasing an idempotency key", "key", k.key, "err", err)
	}
}
