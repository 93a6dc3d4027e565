package clientfs

import (
	"cmp"
	"context"
	"errors"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/fuzzy"
)

// The tiers a file name adds to a match's score (above its 16 bits), as
// the reference ranks them: a file named exactly as the query, the
// directory so named that ranks first, a file whose name holds the
// query's characters in order.
const (
	tierFileName  = 3 << 16
	tierDirName   = 2 << 16
	tierNameMatch = 1 << 16
)

// searchHub owns the search sessions and the cancellation tokens of the
// searches running, per connection.
type searchHub struct {
	s *Service

	mu       sync.Mutex
	stopped  bool
	sessions map[uint64]map[string]*session
	tokens   map[uint64]map[string]*tokenRun
}

// tokenRun is a running search with a cancellation token.
type tokenRun struct{ cancel context.CancelFunc }

func newSearchHub(s *Service) *searchHub {
	return &searchHub{s: s, sessions: map[uint64]map[string]*session{}, tokens: map[uint64]map[string]*tokenRun{}}
}

// Search walks the roots and returns the best matches of the query
// (fuzzyFileSearch). A search with a cancellation token cancels the
// connection's earlier one with the same token, which then answers no
// files. Roots that are not absolute or not directories are skipped, as
// the reference does; a root the path rule refuses is an error.
func (s *Service) Search(ctx context.Context, c Conn, p api.FuzzyFileSearchParams) (api.FuzzyFileSearchResponse, error) {
	res := api.FuzzyFileSearchResponse{Files: api.List[api.FuzzyFileSearchResult]{}}
	roots, err := s.checkRoots(ctx, c.Access, p.Roots)
	if err != nil || p.Query == "" || len(roots) == 0 {
		return res, err
	}
	if p.CancellationToken != nil {
		var release func()
		ctx, release = s.searches.token(ctx, c.ID, *p.CancellationToken)
		defer release()
	}
	if err := s.acquireWalk(ctx); err != nil {
		return res, cancelled(err)
	}
	defer s.releaseWalk()
	var idx []entry
	w := &walker{s: s, a: c.Access, roots: roots, max: s.cfg.MaxSearchEntries, emit: func(e entry) error {
		idx = append(idx, e)
		return nil
	}}
	if err := w.walk(ctx); err != nil {
		return res, cancelled(err)
	}
	res.Files = rank(idx, p.Roots, roots, p.Query)
	return res, nil
}

// cancelled is a search stopped by its token: no files, no error. Any
// other error of a walk is one.
func cancelled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// token registers a search under a token, cancelling the one it
// replaces.
func (h *searchHub) token(ctx context.Context, conn uint64, token string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	run := &tokenRun{cancel: cancel}
	h.mu.Lock()
	if h.tokens[conn] == nil {
		h.tokens[conn] = map[string]*tokenRun{}
	}
	if old := h.tokens[conn][token]; old != nil {
		old.cancel()
	}
	h.tokens[conn][token] = run
	h.mu.Unlock()
	return ctx, func() {
		cancel()
		h.mu.Lock()
		if h.tokens[conn][token] == run {
			delete(h.tokens[conn], token)
			if len(h.tokens[conn]) == 0 {
				delete(h.tokens, conn)
			}
		}
		h.mu.Unlock()
	}
}

// checkRoots returns the roots a search walks, at the indices of the
// client's: absolute ones cleaned, "" for those it skips (relative ones,
// which the reference finds nothing in here, and repeats). A root the
// path rule refuses is an error; one that is missing or not a directory
// is skipped by the walk. nil means nothing to walk.
func (s *Service) checkRoots(ctx context.Context, a fsguard.Access, roots []string) ([]string, error) {
	out := make([]string, len(roots))
	some := false
	for i, r := range roots {
		if !filepath.IsAbs(r) {
			continue
		}
		clean := filepath.Clean(r)
		var denied *fsguard.Error
		if _, err := s.guard.Stat(ctx, a, clean); errors.As(err, &denied) {
			return nil, fail(err)
		}
		if !slices.Contains(out, clean) {
			out[i], some = clean, true
		}
	}
	if !some {
		return nil, nil
	}
	return out, nil
}

// rank scores the walked entries against the query and returns the best
// MaxResults, best first, then by path. given are the roots as the
// client wrote them, roots the ones walked (same indices).
func rank(idx []entry, given, roots []string, query string) api.List[api.FuzzyFileSearchResult] {
	out := api.List[api.FuzzyFileSearchResult]{}
	if query == "" {
		return out
	}
	p := fuzzy.Parse(query)
	var m fuzzy.Matcher
	type match struct {
		e     *entry
		base  uint32
		score uint32
	}
	var ms []match
	q := strings.ToLower(strings.TrimSpace(query))
	bestDir := -1
	for i := range idx {
		e := &idx[i]
		base, ok := m.Score(&p, e.rel)
		if !ok {
			continue
		}
		score := base
		name := strings.ToLower(fileName(e.rel))
		switch {
		case q == "":
		case e.dir && name == q:
			if bestDir < 0 || nucleoBefore(base, e.rel, ms[bestDir].base, ms[bestDir].e.rel) {
				bestDir = len(ms)
			}
		case e.dir:
		case name == q:
			score += tierFileName
		case subsequence(q, name):
			score += tierNameMatch
		}
		ms = append(ms, match{e: e, base: base, score: score})
	}
	if bestDir >= 0 {
		ms[bestDir].score += tierDirName
	}
	slices.SortFunc(ms, func(a, b match) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(a.e.rel, b.e.rel)
	})
	if len(ms) > MaxResults {
		ms = ms[:MaxResults]
	}
	for _, mt := range ms {
		_, indices, _ := m.Indices(&p, mt.e.rel)
		kind := api.FuzzyMatchFile
		if mt.e.dir {
			kind = api.FuzzyMatchDirectory
		}
		out = append(out, api.FuzzyFileSearchResult{
			Root: given[mt.e.root], Path: mt.e.rel, MatchType: kind,
			FileName: fileName(mt.e.rel), Score: mt.score, Indices: indices,
		})
	}
	return out
}

// fileName is the last name of a relative path; the root's (empty) path
// has an empty one.
func fileName(rel string) string {
	if rel == "" {
		return ""
	}
	return path.Base(rel)
}

// nucleoBefore is the order of the reference's matcher among equal
// tiers: higher score, then shorter path, then (where it takes the order
// the walk found them in) the path.
func nucleoBefore(s1 uint32, p1 string, s2 uint32, p2 string) bool {
	if s1 != s2 {
		return s1 > s2
	}
	if l1, l2 := utf8.RuneCountInString(p1), utf8.RuneCountInString(p2); l1 != l2 {
		return l1 < l2
	}
	return p1 < p2
}

// subsequence says whether q's characters appear in s in order.
func subsequence(q, s string) bool {
	for _, c := range q {
		i := strings.IndexFunc(s, func(r rune) bool { return unicode.ToLower(r) == c })
		if i < 0 {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		s = s[i+n:]
	}
	return true
}

// session is one fuzzyFileSearch session: its roots walked once, by its
// goroutine, then each query answered from that index.
type session struct {
	id    string
	conn  Conn
	roots []string // as walked (checkRoots)
	given []string

	cancel  context.CancelFunc
	release chan struct{} // closed when the session may start sending
	done    chan struct{} // closed when run has returned
	wake    chan struct{} // a new query (capacity 1)

	mu    sync.Mutex
	query string
}

// StartSession opens a search session (fuzzyFileSearch/sessionStart),
// replacing the connection's session of the same id. Its walk starts at
// once; it sends nothing until start is called (once the answer is on
// its way): a fuzzyFileSearch/sessionUpdated for the empty query and a
// fuzzyFileSearch/sessionCompleted once its roots are walked, then both
// for each query.
func (s *Service) StartSession(ctx context.Context, c Conn, p api.FuzzyFileSearchSessionStartParams) (start func(), err error) {
	if len(p.Roots) == 0 {
		return nil, apperr.New(apperr.Unavailable, "failed to start fuzzy file search session: at least one search directory is required")
	}
	roots, err := s.checkRoots(ctx, c.Access, p.Roots)
	if err != nil {
		return nil, err
	}
	h := s.searches
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return nil, apperr.New(apperr.Unavailable, "the daemon is shutting down")
	}
	old := h.sessions[c.ID][p.SessionID]
	if old == nil && len(h.sessions[c.ID]) >= s.cfg.MaxSessionsPerConn {
		h.mu.Unlock()
		return nil, invalid("this connection has %d fuzzy file search sessions, the most it may have; stop some first", len(h.sessions[c.ID]))
	}
	sctx, cancel := context.WithCancel(context.Background())
	ss := &session{
		id: p.SessionID, conn: c, roots: roots, given: p.Roots, cancel: cancel,
		release: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	if h.sessions[c.ID] == nil {
		h.sessions[c.ID] = map[string]*session{}
	}
	h.sessions[c.ID][p.SessionID] = ss
	go ss.run(sctx, s)
	h.mu.Unlock()
	if old != nil {
		old.stop()
	}
	var once sync.Once
	return func() { once.Do(func() { close(ss.release) }) }, nil
}

// UpdateSession sets a session's query (fuzzyFileSearch/sessionUpdate);
// apply hands it to the session, once the answer is on its way.
func (s *Service) UpdateSession(c Conn, p api.FuzzyFileSearchSessionUpdateParams) (apply func(), err error) {
	h := s.searches
	h.mu.Lock()
	ss := h.sessions[c.ID][p.SessionID]
	h.mu.Unlock()
	if ss == nil {
		return nil, invalid("fuzzy file search session not found: %s", p.SessionID)
	}
	return func() {
		ss.mu.Lock()
		ss.query = p.Query
		ss.mu.Unlock()
		select {
		case ss.wake <- struct{}{}:
		default:
		}
	}, nil
}

// StopSession ends a session (fuzzyFileSearch/sessionStop); nothing of
// it is sent once it returns. An unknown id is not an error.
func (s *Service) StopSession(c Conn, p api.FuzzyFileSearchSessionStopParams) api.FuzzyFileSearchSessionStopResult {
	h := s.searches
	h.mu.Lock()
	ss := h.sessions[c.ID][p.SessionID]
	if ss != nil {
		h.removeLocked(ss)
	}
	h.mu.Unlock()
	if ss != nil {
		ss.stop()
	}
	return api.FuzzyFileSearchSessionStopResult{}
}

func (h *searchHub) removeLocked(ss *session) {
	if h.sessions[ss.conn.ID][ss.id] == ss {
		delete(h.sessions[ss.conn.ID], ss.id)
	}
	if len(h.sessions[ss.conn.ID]) == 0 {
		delete(h.sessions, ss.conn.ID)
	}
}

func (h *searchHub) closeConn(id uint64) {
	h.mu.Lock()
	var stopped []*session
	for _, ss := range h.sessions[id] {
		stopped = append(stopped, ss)
	}
	delete(h.sessions, id)
	for _, run := range h.tokens[id] {
		run.cancel()
	}
	h.mu.Unlock()
	for _, ss := range stopped {
		ss.stop()
	}
}

func (h *searchHub) stop() {
	h.mu.Lock()
	h.stopped = true
	var stopped []*session
	for _, m := range h.sessions {
		for _, ss := range m {
			stopped = append(stopped, ss)
		}
	}
	h.sessions = map[uint64]map[string]*session{}
	for _, m := range h.tokens {
		for _, run := range m {
			run.cancel()
		}
	}
	h.mu.Unlock()
	for _, ss := range stopped {
		ss.stop()
	}
}

// stop cancels the session and waits for its goroutine.
func (ss *session) stop() {
	ss.cancel()
	<-ss.done
}

// partialEvery is how often a session reports a query's matches while
// its walk goes on.
const partialEvery = 100 * time.Millisecond

// run walks the roots, reporting the current query's matches now and
// then, then answers each query until the session ends.
func (ss *session) run(ctx context.Context, s *Service) {
	defer close(ss.done)
	var idx []entry
	walked := func() bool {
		if err := s.acquireWalk(ctx); err != nil {
			return false
		}
		defer s.releaseWalk()
		last := time.Now()
		reported := ""
		w := &walker{s: s, a: ss.conn.Access, roots: ss.roots, max: s.cfg.MaxSearchEntries, emit: func(e entry) error {
			idx = append(idx, e)
			if len(idx)%1024 != 0 || time.Since(last) < partialEvery || !ss.released() {
				return nil
			}
			if q := ss.current(); q != "" || reported != "" {
				ss.updated(q, rank(idx, ss.given, ss.roots, q))
				last, reported = time.Now(), q
			}
			return nil
		}}
		err := w.walk(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("fuzzy file search walk failed", "err", err)
		}
		return ctx.Err() == nil
	}()
	if !walked {
		return
	}
	select {
	case <-ss.release:
	case <-ctx.Done():
		return
	}
	for {
		q := ss.current()
		ss.updated(q, rank(idx, ss.given, ss.roots, q))
		ss.conn.Notify(api.NotificationFuzzyFileSearchSessionCompleted, api.FuzzyFileSearchSessionCompletedNotification{SessionID: ss.id})
		select {
		case <-ss.wake:
		case <-ctx.Done():
			return
		}
	}
}

func (ss *session) released() bool {
	select {
	case <-ss.release:
		return true
	default:
		return false
	}
}

func (ss *session) current() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.query
}

func (ss *session) updated(q string, files api.List[api.FuzzyFileSearchResult]) {
	ss.conn.Notify(api.NotificationFuzzyFileSearchSessionUpdated, api.FuzzyFileSearchSessionUpdatedNotification{SessionID: ss.id, Query: q, Files: files})
}
