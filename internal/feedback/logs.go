package feedback

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// DefaultLogBytes is how many bytes of log lines Logs keeps when its
// bound is not given.
const DefaultLogBytes = 4 << 20

// threadKeys are the attribute names under which the daemon logs a
// thread's id.
var threadKeys = []string{"thread", "thread_id", "threadId"}

// Logs keeps the most recent lines of the daemon's log, oldest dropped
// first once they hold more than their bound. It is safe for concurrent
// use.
type Logs struct {
	max int

	mu    sync.Mutex
	lines []logLine // oldest first
	size  int
	// tags are the thread ids of the line being written (write's caller
	// holds mu).
	tags []string
}

type logLine struct {
	text    string
	threads []string
}

// NewLogs keeps up to maxBytes of lines (DefaultLogBytes when not
// positive).
func NewLogs(maxBytes int) *Logs {
	if maxBytes <= 0 {
		maxBytes = DefaultLogBytes
	}
	return &Logs{max: maxBytes}
}

// Handler returns a handler that passes every record to next and keeps it
// as a line of text when next handles its level.
func (l *Logs) Handler(next slog.Handler) slog.Handler {
	return &teeHandler{logs: l, next: next, text: slog.NewTextHandler(logsWriter{l}, &slog.HandlerOptions{
		Level: slog.LevelDebug, ReplaceAttr: redact,
	})}
}

// Text returns the lines kept, oldest first: every line when threads is
// nil, else those that name one of threads.
func (l *Logs) Text(threads []string) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, ln := range l.lines {
		if threads == nil || slices.ContainsFunc(ln.threads, func(id string) bool { return slices.Contains(threads, id) }) {
			b.WriteString(ln.text)
		}
	}
	return []byte(b.String())
}

// keep adds a line with its thread ids (l.mu held).
func (l *Logs) keepLocked(text string, threads []string) {
	if len(text) > l.max {
		text = text[:l.max]
	}
	l.lines = append(l.lines, logLine{text: text, threads: threads})
	l.size += len(text)
	drop := 0
	for l.size > l.max {
		l.size -= len(l.lines[drop].text)
		drop++
	}
	if drop > 0 {
		l.lines = slices.Delete(l.lines, 0, drop)
	}
}

// logsWriter receives the text handler's one write per record.
type logsWriter struct{ l *Logs }

func (w logsWriter) Write(p []byte) (int, error) {
	w.l.keepLocked(string(p), w.l.tags)
	return len(p), nil
}

// teeHandler is the handler of Logs.Handler: threads are the ids its
// WithAttrs named.
type teeHandler struct {
	logs    *Logs
	next    slog.Handler
	text    slog.Handler
	threads []string
	group   bool // a group is open: attributes below it name no thread
}

func (h *teeHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *teeHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.next.Handle(ctx, r)
	threads := slices.Clone(h.threads)
	if !h.group {
		r.Attrs(func(a slog.Attr) bool {
			threads = addThread(threads, a)
			return true
		})
	}
	h.logs.mu.Lock()
	h.logs.tags = threads
	_ = h.text.Handle(ctx, r)
	h.logs.tags = nil
	h.logs.mu.Unlock()
	return err
}

func (h *teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next, c.text = h.next.WithAttrs(as), h.text.WithAttrs(as)
	if !h.group {
		c.threads = slices.Clone(h.threads)
		for _, a := range as {
			c.threads = addThread(c.threads, a)
		}
	}
	return &c
}

func (h *teeHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.next, c.text = h.next.WithGroup(name), h.text.WithGroup(name)
	c.group = c.group || name != ""
	return &c
}

// addThread adds the thread id a names, if it names one.
func addThread(threads []string, a slog.Attr) []string {
	if a.Value.Kind() == slog.KindString && slices.Contains(threadKeys, a.Key) && a.Value.String() != "" {
		return append(threads, a.Value.String())
	}
	return threads
}

// secretWords mark attribute names whose values are never kept.
var secretWords = []string{"secret", "password", "authorization", "api_key", "apikey", "bearer", "credential", "cookie"}

// redact hides the values of attributes whose names look like
// credentials.
func redact(_ []string, a slog.Attr) slog.Attr {
	k := strings.ToLower(a.Key)
	if k == "token" || strings.HasSuffix(k, "_token") || strings.HasSuffix(k, "token_sha256") ||
		slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(k, w) }) {
		return slog.String(a.Key, "[redacted]")
	}
	return a
}
