package shell

import (
	"context"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/appserver/appserver/internal/lossy"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/sandbox"
)

// Capture and streaming limits (docs/tools.md §3.3).
const (
	// DefaultMaxOutputBytes caps the captured output (per stream, and the
	// aggregate); the excess is read and dropped.
	DefaultMaxOutputBytes = 1 << 20
	// MaxOutputDeltas is how many output deltas one call streams at most.
	MaxOutputDeltas = 10000
	// DefaultDrainTimeout bounds how long output is still read after the
	// command exited and its process group was killed, for descendants that
	// escaped the group but hold the pipes open.
	DefaultDrainTimeout = 2 * time.Second
)

// Stream names the output a chunk came from.
type Stream int

// The streams. With merged output (the shell tools) everything is Stdout.
const (
	// Stdout is standard output (or the merged output).
	Stdout Stream = iota
	// Stderr is standard error.
	Stderr
)

// String returns "stdout" or "stderr", the command/exec wire names.
func (s Stream) String() string {
	if s == Stderr {
		return "stderr"
	}
	return "stdout"
}

// OutputDelta is one chunk of a running command's output. Chunks never
// split a UTF-8 character: an incomplete trailing sequence is held back
// until the next chunk (or the end of the stream).
type OutputDelta struct {
	// Stream is where the bytes came from.
	Stream Stream
	// Data is the chunk; it is not retained after the callback returns.
	Data []byte
	// CapReached marks the last chunk of a stream cut by the capture cap
	// (only with ExecRequest.StopDeltasAtCap).
	CapReached bool
}

// ExecRequest is one process to run to completion.
type ExecRequest struct {
	// Argv is the command; Argv[0] is looked up on Env's PATH.
	Argv []string
	// Snapshot, when set and it serves Policy (Snapshot.Serves), runs a
	// login-shell Argv from the user's login-shell snapshot
	// (Snapshot.Wrap); approval and the command item still see Argv as
	// the model wrote it.
	Snapshot *Snapshot
	// StartAhead lets the pooled sandbox of Pool start the next command's
	// shell ahead of it, with this command's shell, snapshot, environment
	// and directory, when Snapshot wraps Argv (sandbox.Request.Prelude).
	// That shell starts after this command has ended: set it only when Env
	// holds nothing a model or a client chose for this command.
	StartAhead bool
	// Cwd is the working directory (absolute).
	Cwd string
	// Env is the complete environment ("K=V").
	Env []string
	// Timeout stops the command (killing its process group) after this
	// long; the result then has TimedOut and exit code 124. Zero means none.
	Timeout time.Duration
	// Policy is the sandbox policy; read-only and workspace-write run under
	// the OS sandbox, the others directly.
	Policy policy.SandboxPolicy
	// PolicyCwd is where the policy's writable roots are resolved (the
	// turn's cwd); "" uses Cwd.
	PolicyCwd string
	// Sandbox builds the command; nil uses sandbox.Default().
	Sandbox *sandbox.Sandbox
	// Pool is the sandbox's pool key (sandbox.Request.Pool): the thread
	// the command runs for; "" builds a sandbox for this command alone.
	Pool string
	// SeparateStreams captures stdout and stderr apart (command/exec).
	// Otherwise both share one pipe, so the aggregate keeps the exact order
	// in which the command wrote them (the shell tools).
	SeparateStreams bool
	// MaxOutputBytes caps each captured stream and the aggregate; nil means
	// DefaultMaxOutputBytes, a negative value means unlimited.
	MaxOutputBytes *int
	// OnOutput, when set, receives output as it arrives, from one goroutine
	// per stream; it must not block for long.
	OnOutput func(OutputDelta)
	// MaxDeltas caps the OnOutput calls; 0 means MaxOutputDeltas, negative
	// means unlimited.
	MaxDeltas int
	// StopDeltasAtCap stops streaming a stream once its cap is reached and
	// flags that chunk with CapReached (command/exec). Otherwise streaming
	// goes on past the capture cap, as the reference does for items.
	StopDeltasAtCap bool
	// StreamOnly keeps no copy of the output for the result: it only goes
	// to OnOutput (Stdout, Stderr and Aggregated stay empty, the cap flags
	// are still set), so a long-running streamed command holds none of its
	// output in memory.
	StreamOnly bool
	// Stdin feeds the command; nil is /dev/null.
	Stdin io.Reader
	// DrainTimeout overrides DefaultDrainTimeout when positive.
	DrainTimeout time.Duration
	// WaitForOutput keeps what the command left running in its process
	// group alive after it exited, until the output closes or the drain
	// timeout passes (then the group is killed), so that background
	// children finishing within it are heard (process/spawn). Otherwise
	// the group is killed as soon as the command exits.
	WaitForOutput bool
	// TTY runs the command on a fresh pseudo-terminal (its own session and
	// process group) of TTYRows x TTYCols (0 is 24 x 80); its output is
	// the stdout stream, and Stdin is ignored.
	TTY              bool
	TTYRows, TTYCols uint16
	// StdinPipe gives the command a stdin pipe fed by Process.Write
	// (instead of Stdin); implied by TTY.
	StdinPipe bool
	// OnStart, when set, receives the started process's controls before
	// any output is read.
	OnStart func(*Process)
}

// ExecResult is a finished process.
type ExecResult struct {
	// ExitCode is the exit status; 128+signal when killed by a signal; 124
	// on timeout.
	ExitCode int
	// Stdout and Stderr are the captured streams (SeparateStreams only).
	Stdout, Stderr []byte
	// Aggregated is all output in arrival order, capped.
	Aggregated []byte
	// StdoutCapped and StderrCapped report that the cap dropped output
	// (with merged streams, StdoutCapped covers the merged output).
	StdoutCapped, StderrCapped bool
	// Duration is the wall time from start to the end of output.
	Duration time.Duration
	// TimedOut is set when the timeout stopped the command.
	TimedOut bool
	// Sandboxed is set when the command ran under the OS sandbox.
	Sandboxed bool
	// DrainTimedOut is set when the output was still open the drain
	// timeout after the command exited (a descendant that left the
	// process group held it); what came later is lost.
	DrainTimedOut bool
}

// SandboxRun describes r for policy.IsSandboxDenial.
func (r ExecResult) SandboxRun() policy.SandboxRun {
	return policy.SandboxRun{
		Sandboxed:  r.Sandboxed,
		ExitCode:   r.ExitCode,
		TimedOut:   r.TimedOut,
		Stdout:     lossy.String(r.Stdout),
		Stderr:     lossy.String(r.Stderr),
		Aggregated: lossy.String(r.Aggregated),
	}
}

// Exec runs req to completion and captures its output. A command that
// cannot be started is an error (e.g. wrapping exec.ErrNotFound); a command
// that ran and failed is a result with its exit code. When ctx ends first,
// the process group is killed and ctx's error is returned with the partial
// result.
func Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	sb := req.Sandbox
	if sb == nil {
		sb = sandbox.Default()
	}
	capBytes := DefaultMaxOutputBytes
	if req.MaxOutputBytes != nil {
		capBytes = max(*req.MaxOutputBytes, -1)
	}
	maxDeltas := req.MaxDeltas
	if maxDeltas == 0 {
		maxDeltas = MaxOutputDeltas
	}
	drain := req.DrainTimeout
	if drain <= 0 {
		drain = DefaultDrainTimeout
	}

	// runCtx is the command's: its end (ctx's, the timeout, Terminate)
	// kills the process group. The timeout counts from here, but a
	// command is started even when it has passed (and killed at once), as
	// a zero timeout asks.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var deadline time.Time
	if req.Timeout > 0 {
		deadline = time.Now().Add(req.Timeout)
	}
	argv, prelude := req.Argv, 0
	if req.Snapshot.Serves(req.Policy) {
		prepCtx := runCtx
		if !deadline.IsZero() {
			var cancelPrep context.CancelFunc
			prepCtx, cancelPrep = context.WithDeadline(runCtx, deadline)
			defer cancelPrep()
		}
		argv = req.Snapshot.Wrap(prepCtx, argv)
		if req.StartAhead {
			prelude = req.Snapshot.Prelude(req.Argv, argv)
		}
	}
	// The pipes or the terminal come first, so that a built command is
	// always started: a pooled sandbox's command holds the sandbox from
	// its build on.
	c := &capture{cap: capBytes, maxDeltas: maxDeltas, onOutput: req.OnOutput, stopAtCap: req.StopDeltasAtCap, streamOnly: req.StreamOnly}
	proc := &Process{tty: req.TTY, terminate: cancel}
	var readers, children []*os.File // ours to read; the command's ends
	if req.TTY {
		ptmx, tty, err := openTTY(req)
		if err != nil {
			return ExecResult{}, err
		}
		readers, children = []*os.File{ptmx}, []*os.File{tty}
	} else {
		outR, outW, err := os.Pipe()
		if err != nil {
			return ExecResult{}, err
		}
		readers, children = []*os.File{outR}, []*os.File{outW}
		if req.SeparateStreams {
			errR, errW, err := os.Pipe()
			if err != nil {
				closeAll(readers, children)
				return ExecResult{}, err
			}
			readers, children = append(readers, errR), append(children, errW)
		}
		if req.StdinPipe {
			inR, inW, err := os.Pipe()
			if err != nil {
				closeAll(readers, children)
				return ExecResult{}, err
			}
			proc.in, children = inW, append(children, inR)
		}
	}
	cmd, err := sb.CommandFor(runCtx, sandbox.Request{
		Policy: req.Policy, PolicyCwd: req.PolicyCwd, Cwd: req.Cwd, Argv: argv, Env: req.Env, Pool: req.Pool, Prelude: prelude,
	})
	if err != nil {
		closeAll(readers, children)
		closeAll([]*os.File{proc.in}, nil)
		return ExecResult{}, &SpawnError{Err: err}
	}
	if req.TTY {
		attrs := &syscall.SysProcAttr{}
		if cmd.SysProcAttr != nil {
			a := *cmd.SysProcAttr
			attrs = &a
		}
		// A new session makes the command its own process group, so the
		// group kill still reaches it (setpgid would fail for a session
		// leader).
		attrs.Setsid, attrs.Setctty, attrs.Setpgid, attrs.Ctty = true, true, false, 0
		cmd.SysProcAttr = attrs
		cmd.Stdin, cmd.Stdout, cmd.Stderr = children[0], children[0], children[0]
	} else {
		cmd.Stdin = req.Stdin
		if req.StdinPipe {
			cmd.Stdin = children[len(children)-1]
		}
		cmd.Stdout, cmd.Stderr = children[0], children[0]
		if req.SeparateStreams {
			cmd.Stderr = children[1]
		}
	}
	start := time.Now()
	err = cmd.Start()
	closeAll(nil, children) // the command holds its own copies
	if err != nil {
		closeAll(readers, nil)
		closeAll([]*os.File{proc.in}, nil)
		return ExecResult{}, &SpawnError{Err: err}
	}
	if req.TTY {
		// creack/pty returns a blocking master; a pollable one honours
		// deadlines and lets Close end the reader.
		if f, err := pollableFile(readers[0]); err == nil {
			readers[0] = f
		}
		proc.in = readers[0]
	}
	proc.pid = cmd.Process.Pid
	defer proc.finish()
	var expired atomic.Bool
	timeout := func() {
		expired.Store(true)
		cancel()
	}
	switch left := time.Until(deadline); {
	case deadline.IsZero():
	case left <= 0:
		timeout() // before the command can exit on its own
	default:
		defer time.AfterFunc(left, timeout).Stop()
	}
	if req.OnStart != nil {
		req.OnStart(proc)
	}

	var wg sync.WaitGroup
	for i, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.read(r, Stream(i))
		}()
	}
	cmd.WaitExited()
	// Decide now, before draining, whether the deadline or the caller
	// stopped the command: a command that exited in time stays a normal exit.
	canceled, timedOut := ctx.Err(), expired.Load()
	// Kill whatever the command left running in its group, as bubblewrap's
	// PID namespace does (with WaitForOutput, once its output closed, the
	// drain time passed or the caller stopped it), then give escaped
	// writers a bounded time. The leader is reaped only after the last
	// kill: until then its zombie holds the group's id.
	killGroup := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stop := runCtx.Done()
	if !req.WaitForOutput || runCtx.Err() != nil {
		killGroup()
		stop = nil
	}
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	drainEnd := time.NewTimer(drain)
	defer drainEnd.Stop()
	drainTimedOut := false
	for waiting := true; waiting; {
		select {
		case <-drained:
			waiting = false
		case <-stop:
			killGroup()
			stop = nil
		case <-drainEnd.C:
			drainTimedOut = true
			killGroup()
			for _, r := range readers {
				_ = r.SetReadDeadline(time.Now())
			}
			<-drained
			waiting = false
		}
	}
	if req.WaitForOutput {
		killGroup()
	}
	_ = cmd.Wait()
	proc.finish()
	closeAll(readers, nil)

	res := c.result(req.SeparateStreams)
	res.Duration = time.Since(start)
	res.Sandboxed = sandbox.Sandboxed(req.Policy)
	res.ExitCode = exitCode(cmd)
	res.DrainTimedOut = drainTimedOut
	if canceled != nil {
		return res, canceled
	}
	if timedOut {
		res.TimedOut = true
		res.ExitCode = TimeoutExitCode
	}
	return res, nil
}

// SpawnError is returned by Exec when the process could not be started
// (command not found, missing working directory, ...).
type SpawnError struct {
	// Err is the cause.
	Err error
}

// Error returns the cause's message.
func (e *SpawnError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *SpawnError) Unwrap() error { return e.Err }

func closeAll(rs, ws []*os.File) {
	for _, f := range rs {
		_ = f.Close()
	}
	for _, f := range ws {
		_ = f.Close()
	}
}

func exitCode(cmd *sandbox.Cmd) int {
	ws, ok := cmd.WaitStatus()
	switch {
	case !ok:
		return -1
	case ws.Signaled():
		return signalExitBase + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// capture collects the output of one run. Lock order: mu only.
type capture struct {
	cap        int
	maxDeltas  int
	onOutput   func(OutputDelta)
	stopAtCap  bool
	streamOnly bool

	mu        sync.Mutex
	readBytes [2]int // per stream (streamOnly)
	streams   [2][]byte
	capped    [2]bool
	agg       []byte
	deltas    int
	sent      [2]int
	deltaDone [2]bool
}

func (c *capture) read(r io.Reader, s Stream) {
	buf := make([]byte, 32<<10)
	var pending []byte // incomplete UTF-8 tail held back from the last delta
	for {
		n, err := r.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			c.store(s, chunk)
			switch {
			case c.onOutput == nil:
			case c.stopAtCap:
				// Raw bytes (command/exec sends them base64-encoded).
				c.emitCapped(s, chunk)
			default:
				data := append(pending, chunk...)
				cut := utf8Boundary(data)
				c.emit(s, data[:cut])
				pending = append([]byte(nil), data[cut:]...)
			}
		}
		if err != nil {
			if c.onOutput != nil && len(pending) > 0 {
				c.emit(s, pending)
			}
			return
		}
	}
}

// store appends chunk to the stream and aggregate buffers within the cap
// (with streamOnly, it only counts it).
func (c *capture) store(s Stream, chunk []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streamOnly {
		c.readBytes[s] += len(chunk)
		c.capped[s] = c.capped[s] || (c.cap >= 0 && c.readBytes[s] > c.cap)
		return
	}
	c.streams[s], c.capped[s] = appendCapped(c.streams[s], chunk, c.cap, c.capped[s])
	c.agg, _ = appendCapped(c.agg, chunk, c.cap, false)
}

func appendCapped(dst, src []byte, limit int, capped bool) ([]byte, bool) {
	if limit < 0 {
		return append(dst, src...), capped
	}
	room := limit - len(dst)
	if room <= 0 {
		return dst, capped || len(src) > 0
	}
	if len(src) > room {
		return append(dst, src[:room]...), true
	}
	return append(dst, src...), capped
}

// takeDeltaLocked reserves one delta event; it reports false once the
// per-call limit is used up.
func (c *capture) takeDeltaLocked() bool {
	if c.maxDeltas >= 0 && c.deltas >= c.maxDeltas {
		return false
	}
	c.deltas++
	return true
}

func (c *capture) emit(s Stream, data []byte) {
	if len(data) == 0 {
		return
	}
	c.mu.Lock()
	ok := c.takeDeltaLocked()
	c.mu.Unlock()
	if ok {
		c.onOutput(OutputDelta{Stream: s, Data: data})
	}
}

// emitCapped streams chunk up to the stream's cap; the chunk that drops
// bytes is flagged CapReached and ends the stream's deltas.
func (c *capture) emitCapped(s Stream, chunk []byte) {
	c.mu.Lock()
	if c.deltaDone[s] || !c.takeDeltaLocked() {
		c.mu.Unlock()
		return
	}
	data, reached := chunk, false
	if c.cap >= 0 {
		if room := c.cap - c.sent[s]; len(chunk) > room {
			data, reached = chunk[:room], true
			c.deltaDone[s] = true
		}
	}
	c.sent[s] += len(data)
	c.mu.Unlock()
	c.onOutput(OutputDelta{Stream: s, Data: data, CapReached: reached})
}

func (c *capture) result(separate bool) ExecResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := ExecResult{Aggregated: c.agg, StdoutCapped: c.capped[Stdout], StderrCapped: c.capped[Stderr]}
	if separate {
		res.Stdout, res.Stderr = c.streams[Stdout], c.streams[Stderr]
	}
	return res
}

// utf8Boundary returns the length of the longest prefix of b that does not
// end inside an incomplete (but so far valid) UTF-8 sequence.
func utf8Boundary(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if !utf8.RuneStart(b[i]) {
			continue
		}
		if !utf8.FullRune(b[i:]) {
			return i
		}
		break
	}
	return len(b)
}

// openTTY opens a pseudo-terminal of the request's size: the master and
// the command's end.
func openTTY(req ExecRequest) (ptmx, tty *os.File, err error) {
	if ptmx, tty, err = pty.Open(); err != nil {
		return nil, nil, err
	}
	size := &pty.Winsize{Rows: req.TTYRows, Cols: req.TTYCols}
	if size.Rows == 0 {
		size.Rows = 24
	}
	if size.Cols == 0 {
		size.Cols = 80
	}
	if err := pty.Setsize(ptmx, size); err != nil {
		_ = ptmx.Close()
		_ = tty.Close()
		return nil, nil, err
	}
	return ptmx, tty, nil
}
