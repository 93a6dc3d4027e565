package shell

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
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
	// Snapshot, when set, runs a login-shell Argv from the user's
	// login-shell snapshot (Snapshot.Wrap); approval and the command item
	// still see Argv as the model wrote it.
	Snapshot *Snapshot
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
	// Stdin feeds the command; nil is /dev/null.
	Stdin io.Reader
	// DrainTimeout overrides DefaultDrainTimeout when positive.
	DrainTimeout time.Duration
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

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, req.Timeout)
		defer cancel()
	}
	cmd, err := sb.CommandFor(runCtx, sandbox.Request{
		Policy: req.Policy, PolicyCwd: req.PolicyCwd, Cwd: req.Cwd, Argv: req.Snapshot.Wrap(runCtx, req.Argv), Env: req.Env,
	})
	if err != nil {
		return ExecResult{}, &SpawnError{Err: err}
	}
	cmd.Stdin = req.Stdin

	c := &capture{cap: capBytes, maxDeltas: maxDeltas, onOutput: req.OnOutput, stopAtCap: req.StopDeltasAtCap}
	proc := &Process{tty: req.TTY, terminate: cancel}
	var readers []*os.File
	var start time.Time
	if req.TTY {
		if readers, err = startTTY(cmd, req, proc); err != nil {
			return ExecResult{}, err
		}
		start = time.Now()
	} else {
		var stdinR *os.File
		if req.StdinPipe {
			if stdinR, proc.in, err = os.Pipe(); err != nil {
				return ExecResult{}, err
			}
			cmd.Stdin = stdinR
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			closeAll([]*os.File{stdinR, proc.in}, nil)
			return ExecResult{}, err
		}
		readers = append(readers, outR)
		writers := []*os.File{outW}
		cmd.Stdout, cmd.Stderr = outW, outW
		if req.SeparateStreams {
			errR, errW, err := os.Pipe()
			if err != nil {
				closeAll(readers, writers)
				closeAll([]*os.File{stdinR, proc.in}, nil)
				return ExecResult{}, err
			}
			readers = append(readers, errR)
			writers = append(writers, errW)
			cmd.Stderr = errW
		}

		start = time.Now()
		err = cmd.Start()
		if stdinR != nil {
			_ = stdinR.Close() // the child holds its own copy
		}
		if err != nil {
			closeAll(readers, writers)
			if proc.in != nil {
				_ = proc.in.Close()
			}
			return ExecResult{}, &SpawnError{Err: err}
		}
		closeAll(nil, writers)
	}
	proc.pid = cmd.Process.Pid
	defer proc.finish()
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
	_ = cmd.Wait()
	// Decide now, before draining, whether the deadline or the caller
	// stopped the command: a command that exited in time stays a normal exit.
	canceled, timedOut := ctx.Err(), errors.Is(runCtx.Err(), context.DeadlineExceeded)
	// Reap whatever the command left running in its group, as bubblewrap's
	// PID namespace does, then give escaped writers a bounded time.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drain):
		for _, r := range readers {
			_ = r.SetReadDeadline(time.Now())
		}
		<-drained
	}
	proc.finish()
	closeAll(readers, nil)

	res := c.result(req.SeparateStreams)
	res.Duration = time.Since(start)
	res.Sandboxed = sandbox.Sandboxed(req.Policy)
	res.ExitCode = exitCode(cmd.ProcessState)
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

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalExitBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

// capture collects the output of one run. Lock order: mu only.
type capture struct {
	cap       int
	maxDeltas int
	onOutput  func(OutputDelta)
	stopAtCap bool

	mu        sync.Mutex
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

// store appends chunk to the stream and aggregate buffers within the cap.
func (c *capture) store(s Stream, chunk []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
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

// startTTY starts cmd on a new pseudo-terminal and returns the master as
// the only reader; proc gets the master for input and resizing.
func startTTY(cmd *sandbox.Cmd, req ExecRequest, proc *Process) ([]*os.File, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
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
		return nil, err
	}
	attrs := &syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		a := *cmd.SysProcAttr
		attrs = &a
	}
	// A new session makes the command its own process group, so the group
	// kill still reaches it (setpgid would fail for a session leader).
	attrs.Setsid, attrs.Setctty, attrs.Setpgid, attrs.Ctty = true, true, false, 0
	cmd.SysProcAttr = attrs
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	err = cmd.Start()
	_ = tty.Close() // the child holds its own copies
	if err != nil {
		_ = ptmx.Close()
		return nil, &SpawnError{Err: err}
	}
	// creack/pty returns a blocking master; a pollable one honours
	// deadlines and lets Close end the reader.
	if f, err := pollableFile(ptmx); err == nil {
		ptmx = f
	}
	proc.in = ptmx
	return []*os.File{ptmx}, nil
}
