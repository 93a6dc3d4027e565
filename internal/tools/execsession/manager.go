//go:build unix

package execsession

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/appserver/appserver/internal/lossy"
)

// Limits and defaults of docs/tools.md §2.4.
const (
	// DefaultExecYieldTime is how long exec_command collects output by default.
	DefaultExecYieldTime = 10 * time.Second
	// DefaultWriteYieldTime is the default wait of a write_stdin that writes.
	DefaultWriteYieldTime = 250 * time.Millisecond
	// MinYieldTime and MaxYieldTime bound exec_command and writing
	// write_stdin calls.
	MinYieldTime = 250 * time.Millisecond
	// MaxYieldTime is the upper bound of exec_command and writing calls.
	MaxYieldTime = 30 * time.Second
	// MinEmptyPollYieldTime and MaxEmptyPollYieldTime bound a write_stdin
	// call with empty chars (a poll).
	MinEmptyPollYieldTime = 5 * time.Second
	// MaxEmptyPollYieldTime is the upper bound of an empty poll.
	MaxEmptyPollYieldTime = 300 * time.Second
	// DefaultMaxOutputTokens is the output budget of a call by default.
	DefaultMaxOutputTokens = 10_000
	// MaxOutputTokensCeiling is the hard ceiling of max_output_tokens
	// (1 MiB / 4).
	MaxOutputTokensCeiling = 262_144
	// OutputTokensNone is a MaxOutputTokens value asking for no output at
	// all: only the truncation marker is returned (what the model gets for
	// max_output_tokens 0).
	OutputTokensNone = -1
	// DefaultMaxSessions is how many sessions a Manager keeps alive.
	DefaultMaxSessions = 64
	// DefaultProtectedSessions is how many most recently used sessions
	// pruning never picks.
	DefaultProtectedSessions = 8
	// OutputBufferBytes caps the output a session buffers between calls.
	OutputBufferBytes = 1 << 20
	// MinSessionID and MaxSessionID bound random session ids: [1000, 100000).
	MinSessionID = 1000
	// MaxSessionID is the exclusive upper bound of random session ids.
	MaxSessionID = 100_000

	// writeSettle lets a process react to input before the poll starts, as
	// the reference does.
	writeSettle = 100 * time.Millisecond
	// postExitWait bounds how long a call waits for the last output once the
	// process exited.
	postExitWait = 50 * time.Millisecond
	// holderGrace is how long a killed session's output may stay open
	// before the processes holding it are hunted down.
	holderGrace = 100 * time.Millisecond
)

// ErrClosed is returned by a Manager (or Supervisor) that was closed.
var ErrClosed = errors.New("exec sessions are shut down")

// UnknownSessionError is returned for a session id that is not (or no
// longer) live. Its text is the reference one, "Unknown process id <id>".
type UnknownSessionError struct {
	// ID is the session id the model asked for.
	ID int
}

// Error returns "Unknown process id <id>".
func (e *UnknownSessionError) Error() string { return fmt.Sprintf("Unknown process id %d", e.ID) }

// ErrStdinClosed is returned when input is written to a session started
// without tty; its text tells the model to rerun with tty=true.
var ErrStdinClosed = errors.New("this session's stdin is closed (it runs without a tty); to type into a command, start it again with exec_command and tty=true")

// ErrWriteStdin is returned when writing to a session's terminal failed.
var ErrWriteStdin = errors.New("failed to write to stdin")

// SessionInfo describes a session to an Observer and to Sessions.
type SessionInfo struct {
	// ID is the session (process) id the model uses.
	ID int
	// ThreadID is the Manager's thread.
	ThreadID string
	// TurnID and CallID identify the exec_command call that started it.
	TurnID string
	// CallID is the id of the starting call.
	CallID string
	// Argv is the command as spawned, before any CommandFunc wrapping.
	Argv []string
	// Cwd is the working directory.
	Cwd string
	// TTY tells whether the session runs on a PTY.
	TTY bool
	// Pid is the OS process id of the session leader.
	Pid int
	// StartedAt is when the process was spawned.
	StartedAt time.Time
}

// SessionEnd describes how a session's process ended.
type SessionEnd struct {
	// ExitCode is the exit code, 128+signal when a signal killed it.
	ExitCode int
	// Duration is the time from spawn to exit.
	Duration time.Duration
	// Transcript is the whole output (head and tail of at most 1 MiB, with
	// a "... <N> bytes omitted ..." marker when the middle was dropped).
	Transcript string
}

// Observer follows session life cycles, e.g. to emit commandExecution items
// (item/started, item/commandExecution/outputDelta, item/completed). Its
// methods are called from session goroutines (SessionStarted with the
// Manager's lock held); they must not block and must not call the Manager.
type Observer interface {
	// SessionStarted is called once the process is running.
	SessionStarted(info SessionInfo)
	// SessionOutput is called with every chunk of output, in order. The
	// chunk must not be retained.
	SessionOutput(info SessionInfo, chunk []byte)
	// SessionEnded is called once, after the process exited (or was killed)
	// and its output was read.
	SessionEnded(info SessionInfo, end SessionEnd)
}

// ManagerConfig configures a Manager. The zero value is usable.
type ManagerConfig struct {
	// ThreadID names the thread in SessionInfo.
	ThreadID string
	// Command builds processes when a request has no Command of its own;
	// nil runs argv directly.
	Command CommandFunc
	// Env returns the base environment of new processes (ForcedEnv is
	// applied on top); nil uses os.Environ.
	Env func() []string
	// MaxSessions caps live sessions; 0 means DefaultMaxSessions.
	MaxSessions int
	// ProtectedSessions is how many most recently used sessions pruning
	// spares; 0 means DefaultProtectedSessions.
	ProtectedSessions int
	// DeterministicIDs allocates ids 1000, 1001, … instead of random ones
	// (the reference's test mode).
	DeterministicIDs bool
	// Observer, when set, follows session life cycles.
	Observer Observer
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// ExecRequest starts a session.
type ExecRequest struct {
	// Argv is the command, e.g. ["/bin/bash", "-lc", "make test"].
	Argv []string
	// Cwd is the working directory.
	Cwd string
	// TTY runs the command on a PTY, keeping stdin open for Write.
	TTY bool
	// YieldTime is how long to collect output; 0 means DefaultExecYieldTime.
	// Callers clamp it (ExecYieldTime).
	YieldTime time.Duration
	// MaxOutputTokens is the token budget of the returned output; 0 means
	// DefaultMaxOutputTokens, OutputTokensNone a budget of zero.
	MaxOutputTokens int
	// Command, when set, builds this process instead of the Manager's
	// CommandFunc (e.g. the sandbox chosen for this call).
	Command CommandFunc
	// Env, when non-nil, replaces the Manager's base environment.
	Env []string
	// TurnID and CallID are reported to the Observer.
	TurnID string
	// CallID is the exec_command call id.
	CallID string
}

// WriteRequest writes to a session and collects its output.
type WriteRequest struct {
	// SessionID is the id exec_command returned.
	SessionID int
	// Chars is written to the terminal; "" only polls. On a pipe session
	// only "\u0003" (Ctrl-C, sent as SIGINT to the process group) is
	// accepted.
	Chars string
	// YieldTime is how long to collect output; callers clamp it
	// (WriteYieldTime). 0 means DefaultWriteYieldTime for writes and
	// MinEmptyPollYieldTime for polls.
	YieldTime time.Duration
	// MaxOutputTokens is the token budget; 0 means DefaultMaxOutputTokens,
	// OutputTokensNone a budget of zero.
	MaxOutputTokens int
}

// Result is the outcome of one exec_command or write_stdin call.
type Result struct {
	// ChunkID is a random 6-hex-digit id of this output chunk.
	ChunkID string
	// WallTime is how long the call collected output.
	WallTime time.Duration
	// ExitCode is set once the process exited; the session is then gone.
	ExitCode *int
	// SessionID is set while the process runs.
	SessionID *int
	// Output is the collected output (invalid UTF-8 replaced), not yet cut
	// to MaxOutputTokens; beyond 1 MiB its middle is dropped and marked.
	Output string
	// MaxOutputTokens is the budget Text truncates Output to (0 leaves only
	// the truncation marker).
	MaxOutputTokens int
	// StartCallID is the id of the exec_command call that started the
	// session (the commandExecution item id).
	StartCallID string

	// omitted counts bytes dropped from the middle of Output (beyond the
	// 1 MiB buffer); Output then holds a "... <N> bytes omitted ..." marker.
	omitted int
}

// OriginalTokenCount is the token estimate (ceil(bytes/4)) of everything the
// process wrote during the call, including bytes the buffer dropped.
func (r Result) OriginalTokenCount() int {
	return (len(r.Output) + r.omitted + bytesPerToken - 1) / bytesPerToken
}

// Text renders the result for the model in the reference format (see the
// package documentation).
func (r Result) Text() string {
	var b []byte
	if r.ChunkID != "" {
		b = fmt.Appendf(b, "Chunk ID: %s\n", r.ChunkID)
	}
	b = fmt.Appendf(b, "Wall time: %.4f seconds\n", r.WallTime.Seconds())
	if r.ExitCode != nil {
		b = fmt.Appendf(b, "Process exited with code %d\n", *r.ExitCode)
	}
	if r.SessionID != nil {
		b = fmt.Appendf(b, "Process running with session ID %d\n", *r.SessionID)
	}
	b = fmt.Appendf(b, "Original token count: %d\nOutput:\n", r.OriginalTokenCount())
	return string(b) + formattedTruncate(r.Output, r.MaxOutputTokens, r.OriginalTokenCount())
}

// ExecYieldTime turns exec_command's yield_time_ms (nil when absent) into
// the effective wait: default 10 s, clamped to [250 ms, 30 s].
func ExecYieldTime(ms *int64) time.Duration {
	d := DefaultExecYieldTime
	if ms != nil {
		d = msDuration(*ms)
	}
	return min(max(d, MinYieldTime), MaxYieldTime)
}

// WriteYieldTime turns write_stdin's yield_time_ms into the effective wait:
// a write defaults to 250 ms clamped to [250 ms, 30 s]; an empty poll is
// clamped to [5 s, 300 s].
func WriteYieldTime(ms *int64, empty bool) time.Duration {
	d := DefaultWriteYieldTime
	if ms != nil {
		d = msDuration(*ms)
	}
	if empty {
		// codex-cli 0.169 lets a poll wait past 30 s (observed: a 60 000 ms
		// poll returned after 32.7 s when the process exited).
		return min(max(d, MinEmptyPollYieldTime), MaxEmptyPollYieldTime)
	}
	return min(max(d, MinYieldTime), MaxYieldTime)
}

func msDuration(ms int64) time.Duration {
	if ms < 0 {
		return 0
	}
	if ms > int64(MaxEmptyPollYieldTime/time.Millisecond) {
		return MaxEmptyPollYieldTime
	}
	return time.Duration(ms) * time.Millisecond
}

// ResolveMaxOutputTokens turns max_output_tokens (nil when absent) into the
// budget: default 10 000, at most 262 144, and at most policyCap (the
// model's truncation budget in tokens) when policyCap > 0. A budget of zero
// is returned as OutputTokensNone.
func ResolveMaxOutputTokens(n *int64, policyCap int) int {
	v := int64(DefaultMaxOutputTokens)
	if n != nil {
		v = max(*n, 0)
	}
	v = min(v, MaxOutputTokensCeiling)
	if policyCap > 0 {
		v = min(v, int64(policyCap))
	}
	if v == 0 {
		return OutputTokensNone
	}
	return int(v)
}

// Manager owns the exec sessions of one thread. It is safe for concurrent
// use. Lock order: Manager.mu before session.mu; process.killMu is never
// held together with either.
type Manager struct {
	cfg ManagerConfig
	log *slog.Logger
	now func() time.Time

	mu       sync.Mutex
	closed   bool
	sessions map[int]*session // live sessions, by id
	reserved map[int]bool     // ids in use, including sessions being spawned
	rnd      *mrand.Rand

	wg sync.WaitGroup // session goroutines
}

// NewManager returns a Manager with cfg's defaults applied.
func NewManager(cfg ManagerConfig) *Manager {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.ProtectedSessions <= 0 {
		cfg.ProtectedSessions = DefaultProtectedSessions
	}
	if cfg.Command == nil {
		cfg.Command = DefaultCommand
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ
	}
	m := &Manager{
		cfg:      cfg,
		log:      cfg.Logger,
		now:      cfg.Now,
		sessions: map[int]*session{},
		reserved: map[int]bool{},
		rnd:      mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64())),
	}
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// session is one spawned process and its buffered output.
type session struct {
	info SessionInfo
	proc *process

	mu       sync.Mutex
	pending  headTail      // output not yet returned to the model
	script   headTail      // the whole transcript
	signal   chan struct{} // closed (and replaced) when output arrives
	lastUsed time.Time

	collectMu sync.Mutex // one call collects at a time

	readerDone chan struct{} // closed when the output reached EOF
	ended      chan struct{} // closed once the Observer heard of the end
}

func (s *session) appendOutput(chunk []byte) {
	s.mu.Lock()
	s.pending.write(chunk)
	s.script.write(chunk)
	close(s.signal)
	s.signal = make(chan struct{})
	s.mu.Unlock()
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// collect gathers output until deadline, until the process exited and its
// output closed (or postExitWait after the exit), or until ctx ends.
func (s *session) collect(ctx context.Context, deadline time.Time) (*headTail, error) {
	s.collectMu.Lock()
	defer s.collectMu.Unlock()
	// The call's output is capped like the session buffer, so a chatty
	// process cannot grow one call without bound.
	out := newHeadTail(OutputBufferBytes)
	var postExit time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		head, tail, omitted := s.pending.drainCounted()
		sig := s.signal
		s.mu.Unlock()
		now := time.Now()
		if len(head)+len(tail)+omitted > 0 {
			out.write(head)
			out.omitted += omitted
			out.write(tail)
			if !now.Before(deadline) {
				return &out, nil
			}
			continue
		}
		exited := s.proc.hasExited()
		if exited && closed(s.readerDone) {
			return &out, nil
		}
		remaining := deadline.Sub(now)
		if remaining <= 0 {
			return &out, nil
		}
		var exitedCh <-chan struct{} = s.proc.exited
		if exited {
			if postExit.IsZero() {
				postExit = now.Add(min(remaining, postExitWait))
			}
			remaining = postExit.Sub(now)
			if remaining <= 0 {
				return &out, nil
			}
			exitedCh = s.readerDone
		}
		// Since Go 1.23 Reset discards a stale expiry, so no drain is needed.
		timer.Reset(remaining)
		select {
		case <-sig:
		case <-exitedCh:
		case <-timer.C:
			if exited {
				return &out, nil
			}
		case <-ctx.Done():
			return &out, ctx.Err()
		}
	}
}

// drainInto moves what is pending into out without waiting.
func (s *session) drainInto(out *headTail) {
	s.mu.Lock()
	head, tail, omitted := s.pending.drainCounted()
	s.mu.Unlock()
	out.write(head)
	out.omitted += omitted
	out.write(tail)
}

// requeue puts the output of an interrupted call back in front of what
// arrived since, for the next call.
func (s *session) requeue(out *headTail) {
	s.mu.Lock()
	defer s.mu.Unlock()
	head, tail, omitted := s.pending.drainCounted()
	s.pending.write(out.head)
	s.pending.omitted += out.omitted
	s.pending.write(out.tail)
	s.pending.write(head)
	s.pending.omitted += omitted
	s.pending.write(tail)
}

// allocateIDLocked reserves a free session id.
func (m *Manager) allocateIDLocked() int {
	if m.cfg.DeterministicIDs {
		next := MinSessionID
		for id := range m.reserved {
			next = max(next, id+1)
		}
		m.reserved[next] = true
		return next
	}
	for {
		id := MinSessionID + m.rnd.IntN(MaxSessionID-MinSessionID)
		if !m.reserved[id] {
			m.reserved[id] = true
			return id
		}
	}
}

// Exec spawns req.Argv and collects its output for the yield time. When the
// process exited by then, the result carries its exit code and the session
// is gone; otherwise it carries the session id for Write. If ctx ends first
// the session keeps running (Close or a later Write reach it) and ctx's
// error is returned.
func (m *Manager) Exec(ctx context.Context, req ExecRequest) (Result, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Result{}, ErrClosed
	}
	id := m.allocateIDLocked()
	m.mu.Unlock()

	env := req.Env
	if env == nil {
		env = m.cfg.Env()
	}
	build := req.Command
	if build == nil {
		build = m.cfg.Command
	}
	started := m.now()
	proc, err := spawn(build, req.Argv, req.Cwd, env, req.TTY)
	if err != nil {
		m.mu.Lock()
		delete(m.reserved, id)
		m.mu.Unlock()
		return Result{}, fmt.Errorf("Failed to create unified exec process: %s", ioErrorText(err))
	}
	s := &session{
		info: SessionInfo{
			ID: id, ThreadID: m.cfg.ThreadID, TurnID: req.TurnID, CallID: req.CallID,
			Argv: slices.Clone(req.Argv), Cwd: req.Cwd, TTY: req.TTY, Pid: proc.pid, StartedAt: started,
		},
		proc:       proc,
		pending:    newHeadTail(OutputBufferBytes),
		script:     newHeadTail(OutputBufferBytes),
		signal:     make(chan struct{}),
		lastUsed:   started,
		readerDone: make(chan struct{}),
		ended:      make(chan struct{}),
	}

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		// Close ran while we spawned (its goroutine wait may be over): kill
		// and reap this process right here.
		proc.kill()
		proc.closeOutput()
		_ = reapLeader(proc)
		return Result{}, ErrClosed
	}
	victim := m.pruneLocked()
	m.sessions[id] = s
	m.startGoroutinesLocked(s)
	m.mu.Unlock()
	if victim != nil {
		m.log.Debug("pruning exec session", "session_id", victim.info.ID, "thread_id", m.cfg.ThreadID)
		m.terminate(victim)
	}

	yield := req.YieldTime
	if yield <= 0 {
		yield = DefaultExecYieldTime
	}
	start := time.Now()
	out, err := s.collect(ctx, start.Add(yield))
	wall := time.Since(start)
	if err != nil {
		// Keep what was collected for the next poll.
		s.requeue(out)
		return Result{}, err
	}
	return m.finish(s, out, wall, req.MaxOutputTokens), nil
}

// Write writes req.Chars to a session (when non-empty) and collects its
// output for the yield time. A session that exited is reported with its
// exit code and removed.
func (m *Manager) Write(ctx context.Context, req WriteRequest) (Result, error) {
	m.mu.Lock()
	s := m.sessions[req.SessionID]
	if s == nil {
		closedNow := m.closed
		m.mu.Unlock()
		if closedNow {
			return Result{}, ErrClosed
		}
		return Result{}, &UnknownSessionError{ID: req.SessionID}
	}
	s.mu.Lock()
	s.lastUsed = m.now()
	s.mu.Unlock()
	m.mu.Unlock()

	if req.Chars != "" {
		switch {
		case !s.info.TTY && req.Chars == "\u0003":
			// Ctrl-C on a pipe session interrupts it, as the reference does.
			_ = s.proc.signalGroup(syscall.SIGINT)
		case !s.info.TTY:
			return Result{}, ErrStdinClosed
		case s.proc.hasExited():
			// Nothing reads any more; report the exit below.
		default:
			if err := s.proc.write([]byte(req.Chars)); err != nil && !s.proc.hasExited() {
				return Result{}, ErrWriteStdin
			}
		}
		t := time.NewTimer(writeSettle)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Result{}, ctx.Err()
		}
	}
	yield := req.YieldTime
	if yield <= 0 {
		yield = DefaultWriteYieldTime
		if req.Chars == "" {
			yield = MinEmptyPollYieldTime
		}
	}
	start := time.Now()
	out, err := s.collect(ctx, start.Add(yield))
	wall := time.Since(start)
	if err != nil {
		s.requeue(out)
		return Result{}, err
	}
	m.mu.Lock()
	live := m.sessions[req.SessionID] == s
	m.mu.Unlock()
	if !live {
		// Pruned or closed while we collected.
		return Result{}, &UnknownSessionError{ID: req.SessionID}
	}
	return m.finish(s, out, wall, req.MaxOutputTokens), nil
}

// finish builds the result of a call and releases the session when its
// process exited.
func (m *Manager) finish(s *session, out *headTail, wall time.Duration, maxTokens int) Result {
	switch {
	case maxTokens == 0:
		maxTokens = DefaultMaxOutputTokens
	case maxTokens < 0:
		maxTokens = 0
	}
	res := Result{ChunkID: newChunkID(), WallTime: wall, MaxOutputTokens: maxTokens, StartCallID: s.info.CallID}
	if s.proc.hasExited() {
		// The process may have exited after collect returned: pick up the
		// output it wrote last.
		t := time.NewTimer(postExitWait)
		select {
		case <-s.readerDone:
		case <-t.C:
		}
		t.Stop()
		s.drainInto(out)
		code := s.proc.exitCode
		res.ExitCode = &code
		m.release(s)
		// The call reports the exit: let the Observer hear of it first, so
		// that the session's item completes before the call's output goes
		// back to the model (the reference's order).
		t = time.NewTimer(2 * postExitWait)
		select {
		case <-s.ended:
		case <-t.C:
		}
		t.Stop()
	} else {
		id := s.info.ID
		res.SessionID = &id
	}
	res.Output = lossy.String(out.bytes())
	res.omitted = out.omitted
	return res
}

// release removes an exited session and kills what is left of its tree
// (background children still holding the terminal or the pipe).
func (m *Manager) release(s *session) {
	m.mu.Lock()
	if m.sessions[s.info.ID] == s {
		delete(m.sessions, s.info.ID)
		delete(m.reserved, s.info.ID)
	}
	m.mu.Unlock()
	s.proc.kill()
	if !closed(s.readerDone) {
		// The leader is gone but something still holds its output open.
		s.proc.killHolders()
	}
	s.proc.closeOutput()
}

// terminate kills a session's process tree, then whatever else still holds
// its output open, and closes the output; the session goroutines then end on
// their own.
func (m *Manager) terminate(s *session) {
	s.proc.kill()
	t := time.NewTimer(holderGrace)
	select {
	case <-s.readerDone:
	case <-t.C:
		s.proc.killHolders()
	}
	t.Stop()
	s.proc.closeOutput()
}

// pruneLocked picks the session to drop when the Manager is full: among the
// sessions outside the ProtectedSessions most recently used ones, the least
// recently used exited one, else the least recently used one. It removes the
// victim from the map and returns it (to be terminated without the lock).
func (m *Manager) pruneLocked() *session {
	if len(m.sessions) < m.cfg.MaxSessions {
		return nil
	}
	type meta struct {
		s      *session
		used   time.Time
		exited bool
	}
	all := make([]meta, 0, len(m.sessions))
	for _, s := range m.sessions {
		s.mu.Lock()
		all = append(all, meta{s: s, used: s.lastUsed, exited: s.proc.hasExited()})
		s.mu.Unlock()
	}
	// Least recently used first; ties broken by id for determinism.
	sort.Slice(all, func(i, j int) bool {
		if !all[i].used.Equal(all[j].used) {
			return all[i].used.Before(all[j].used)
		}
		return all[i].s.info.ID < all[j].s.info.ID
	})
	candidates := all[:max(len(all)-m.cfg.ProtectedSessions, 0)]
	var victim *session
	for _, c := range candidates {
		if c.exited {
			victim = c.s
			break
		}
	}
	if victim == nil && len(candidates) > 0 {
		victim = candidates[0].s
	}
	if victim == nil {
		return nil
	}
	delete(m.sessions, victim.info.ID)
	delete(m.reserved, victim.info.ID)
	return victim
}

// startGoroutinesLocked starts the reader and the waiter of a session; it
// runs under m.mu so Close cannot miss them. The Observer hears of the start
// first; the waiter reports the end once the output is read (or shortly
// after the exit, when a background child keeps the output open).
func (m *Manager) startGoroutinesLocked(s *session) {
	obs := m.cfg.Observer
	if obs != nil {
		obs.SessionStarted(s.info)
	}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		defer close(s.readerDone)
		s.proc.readLoop(func(chunk []byte) {
			s.appendOutput(chunk)
			if obs != nil {
				obs.SessionOutput(s.info, chunk)
			}
		})
	}()
	go func() {
		defer m.wg.Done()
		defer close(s.ended)
		s.proc.waitLoop()
		if obs == nil {
			return
		}
		t := time.NewTimer(postExitWait)
		select {
		case <-s.readerDone:
		case <-t.C:
		}
		t.Stop()
		s.mu.Lock()
		transcript := lossy.String(s.script.bytes())
		s.mu.Unlock()
		obs.SessionEnded(s.info, SessionEnd{
			ExitCode:   s.proc.exitCode,
			Duration:   m.now().Sub(s.info.StartedAt),
			Transcript: transcript,
		})
	}()
}

// Terminate kills one session (its whole process tree) and forgets it.
func (m *Manager) Terminate(id int) error {
	m.mu.Lock()
	s := m.sessions[id]
	if s != nil {
		delete(m.sessions, id)
		delete(m.reserved, id)
	}
	m.mu.Unlock()
	if s == nil {
		return &UnknownSessionError{ID: id}
	}
	m.terminate(s)
	return nil
}

// Sessions lists the live sessions, by id.
func (m *Manager) Sessions() []SessionInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]SessionInfo, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, s.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// TerminateAll kills every live session (the user cleaning up the
// thread's background terminals); unlike Close, the Manager stays usable.
// It returns once each process tree is killed and its output closed.
func (m *Manager) TerminateAll() {
	m.mu.Lock()
	victims := make([]*session, 0, len(m.sessions))
	for id, s := range m.sessions {
		victims = append(victims, s)
		delete(m.sessions, id)
		delete(m.reserved, id)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.terminate(s)
		}()
	}
	wg.Wait()
}

// Close kills the process tree of every session, waits until every session
// goroutine has finished (each leader reaped, each output closed) and makes
// later calls fail with ErrClosed. It is safe to call more than once.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	clear(m.reserved) // ids being spawned: their Exec fails with ErrClosed
	m.mu.Unlock()
	m.TerminateAll()
	m.wg.Wait()
	return nil
}

// newChunkID returns 6 random lowercase hex digits.
func newChunkID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
