package apptest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/serve"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// Binary builds cmd/appserver once per test binary, with the race
// detector when the test binary has it (so that the subprocess is checked
// too), and returns the executable's path. Main removes it at the end.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(build)
	require.NoError(t, buildErr)
	return buildBin
}

// BuildBinary starts building the binary in the background, for a test
// that has other work to do first (a Postgres cluster to start): Binary,
// and StartProc, wait for it.
func BuildBinary() { go buildOnce.Do(build) }

func build() {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if buildDir, buildErr = os.MkdirTemp("", "apptest-bin-"); buildErr != nil {
		return
	}
	buildBin = filepath.Join(buildDir, "appserver")
	args := []string{"build", "-o", buildBin}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	// go test puts GOROOT/bin first on PATH.
	cmd := exec.Command("go", append(args, "./cmd/appserver")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("go build ./cmd/appserver: %w\n%s", err, out)
	}
}

// removeBuilds waits for a build in progress, then removes what was built.
func removeBuilds() {
	buildOnce.Do(func() {})
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// Proc is the daemon running as a subprocess of the built binary.
type Proc struct {
	Cmd *exec.Cmd
	// Addr is the address the daemon announced (empty on stdio).
	Addr string
	// Stderr is the daemon's log.
	Stderr *SyncBuffer

	stdinW *os.File      // the daemon's stdin
	exited chan struct{} // closed when Wait returned
	err    error         // Wait's result, once exited is closed
}

// StartProc runs `appserver serve` from Binary on a loopback port with
// args after the warn log level (args may name another listener), and
// waits until it listens. When the test ends its process group is killed
// if it still runs, so no daemon outlives the test.
func StartProc(t testing.TB, args ...string) *Proc {
	t.Helper()
	p, stdout := startProc(t, append([]string{"serve", "--listen", "ws://127.0.0.1:0", "--log-level", "warn"}, args...))
	// The address line comes first; the rest of stdout is drained so the
	// daemon never blocks on a full pipe. Wait runs after the pipe is read
	// to its end, as exec requires.
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := serve.ListenAddr(sc.Text()); ok {
				addr <- a
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.wait()
	}()
	select {
	case p.Addr = <-addr:
	case <-p.exited:
		t.Fatalf("appserver exited before listening: %v\nstderr:\n%s", p.err, p.Stderr)
	case <-time.After(Wait):
		t.Fatalf("appserver did not listen within %s\nstderr:\n%s", Wait, p.Stderr)
	}
	return p
}

// StartStdioProc runs the built binary with args (its command first, e.g.
// serve --listen stdio:// or app-server) and returns it with a client of
// the JSON-RPC session on its stdin and stdout (not initialized).
func StartStdioProc(t testing.TB, args ...string) (*Proc, *Client) {
	t.Helper()
	p, stdout := startProc(t, args)
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, stdout)
		p.wait()
		pw.CloseWithError(err)
	}()
	return p, NewLinesClient(t, p.stdinW, pr)
}

// MCPCommand is the command an MCP host runs: `appserver mcp` from Binary
// with args, its log on stderr of the test.
func MCPCommand(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(Binary(t), append([]string{"mcp"}, args...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// startProc starts the binary with args in a process group of its own,
// its stdin a pipe, and returns it with its stdout.
func startProc(t testing.TB, args []string) (*Proc, io.Reader) {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	stdinR, stdinW, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdin = stdinR
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &Proc{Cmd: cmd, Stderr: &SyncBuffer{}, exited: make(chan struct{}), stdinW: stdinW}
	cmd.Stderr = p.Stderr
	require.NoError(t, cmd.Start())
	stdinR.Close()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
		_ = stdinW.Close()
	})
	return p, stdout
}

func (p *Proc) wait() {
	p.err = p.Cmd.Wait()
	close(p.exited)
}

// RPC is a client of the daemon, initialized with the experimental API.
func (p *Proc) RPC(t testing.TB) *Client {
	t.Helper()
	return RPC(t, p.Addr, "", nil)
}

// URL is the HTTP URL of path on the daemon's network listener.
func (p *Proc) URL(path string) string { return HTTPURL(p.Addr, path) }

// Kill9 sends SIGKILL to the daemon's process group and waits until it is
// gone, requiring that it died of the signal.
func (p *Proc) Kill9(t testing.TB) {
	t.Helper()
	require.NoError(t, syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL))
	<-p.exited
	var exitErr *exec.ExitError
	require.True(t, errors.As(p.err, &exitErr), "wait: %v", p.err)
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "daemon did not die of SIGKILL: %v\nstderr:\n%s", p.err, p.Stderr)
}

// Signal sends sig to the daemon.
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	require.NoError(t, p.Cmd.Process.Signal(sig))
}

// Terminate stops the daemon with SIGTERM and requires a clean exit (a
// race report from a -race build would make it exit 66).
func (p *Proc) Terminate(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGTERM)
	require.NoError(t, p.Wait(t, Wait), "appserver exit\nstderr:\n%s", p.Stderr)
}

// Wait waits for the daemon to exit within d and returns Wait's error
// (nil for status 0), failing the test if it does not exit.
func (p *Proc) Wait(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		t.Fatalf("appserver did not exit within %s\nstderr:\n%s", d, p.Stderr)
		return nil
	}
}

// Exited is closed when the daemon has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// CloseStdin closes the daemon's stdin (on stdio, that ends it).
func (p *Proc) CloseStdin(t testing.TB) {
	t.Helper()
	require.NoError(t, p.stdinW.Close())
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers
// (a subprocess's stderr copier and the test).
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// NeedTools skips the test when a program it runs is not installed
// (scripts/test-deps.sh installs them); under CI=true a missing one fails
// it instead.
func NeedTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required (scripts/test-deps.sh installs it)", tool)
			}
			t.Skipf("%s not installed (scripts/test-deps.sh installs it)", tool)
		}
	}
}
