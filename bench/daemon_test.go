package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// buildDir holds the daemon binary built once per test process; TestMain
// removes it.
var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// daemonBinary builds ./cmd/appserver once per process and returns its path.
func daemonBinary(tb testing.TB) string {
	tb.Helper()
	// A prebuilt daemon, to compare builds in alternating runs.
	if p := os.Getenv("APPSERVER_BENCH_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		buildDir, err = os.MkdirTemp("", "appserver-bench-")
		if err != nil {
			buildErr = err
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil && os.Getenv("GOROOT") != "" {
			goBin, err = filepath.Join(os.Getenv("GOROOT"), "bin", "go"), nil
		}
		if err != nil {
			buildErr = fmt.Errorf("go toolchain not found: %w", err)
			return
		}
		bin := filepath.Join(buildDir, "appserver")
		args := []string{"build", "-o", bin}
		if profileDir() != "" {
			overlay, err := profileOverlay(root, buildDir)
			if err != nil {
				buildErr = err
				return
			}
			args = append(args, "-overlay", overlay)
		}
		cmd := exec.Command(goBin, append(args, "./cmd/appserver")...)
		cmd.Dir = root
		// Static, as released (Makefile, Dockerfile): a cgo build links the
		// psx library externally, and the dynamically linked binary keeps
		// its whole text and rodata resident (~18 MB more RSS).
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/appserver: %v\n%s", err, out)
			return
		}
		buildBin = bin
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return buildBin
}

// removeBuild deletes the binary built by daemonBinary, if any.
func removeBuild() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// moduleRoot walks up from the working directory (the package directory
// under go test) to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// daemon is a running appserver subprocess.
type daemon struct {
	cmd      *exec.Cmd
	ws       string // ws://127.0.0.1:PORT
	http     string // http://127.0.0.1:PORT
	stderr   *lockedBuffer
	exited   chan error
	stopOnce sync.Once
	// reference is set for the reference server (startReference): it has
	// no /metrics, and how it exits on SIGTERM is not ours to check.
	reference bool
}

const listenPrefix = "appserver listening on "

// startDaemon starts the daemon on a free loopback port with a private data
// dir and any extra flags (later flags win, so an extra --data-dir replaces
// the private one); it is stopped with SIGTERM (then SIGKILL after 10 s) at
// cleanup.
func startDaemon(tb testing.TB, extra ...string) *daemon {
	tb.Helper()
	return startDaemonBinary(tb, daemonBinary(tb), extra...)
}

// startDaemonBinary is startDaemon for the daemon binary bin.
func startDaemonBinary(tb testing.TB, bin string, extra ...string) *daemon {
	tb.Helper()
	cmd := exec.Command(bin, append([]string{
		"--listen", "ws://127.0.0.1:0",
		"--data-dir", tb.TempDir(),
		"--log-level", "warn",
	}, extra...)...)
	stdout := &lineWatcher{prefix: listenPrefix, found: make(chan string, 1)}
	d := &daemon{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	cmd.Stdout = stdout
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start daemon: %v", err)
	}
	exited := d.exited
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() { d.stop(tb) })

	d.awaitAddress(tb, stdout.found, 30*time.Second)
	return d
}

// awaitAddress waits up to limit for the address found prints, or fails
// tb if the process exits first.
func (d *daemon) awaitAddress(tb testing.TB, found <-chan string, limit time.Duration) {
	tb.Helper()
	select {
	case addr := <-found:
		d.ws = addr
		d.http = "http://" + strings.TrimPrefix(addr, "ws://")
	case err := <-d.exited:
		d.exited <- err // for stop
		tb.Fatalf("%s exited before listening: %v\noutput:\n%s", d.cmd.Path, err, d.stderr)
	case <-time.After(limit):
		tb.Fatalf("%s did not print its address within %s\noutput:\n%s", d.cmd.Path, limit, d.stderr)
	}
}

// stop sends SIGTERM and waits for the daemon to exit, killing it after
// 10 s. It is idempotent; startDaemon also registers it as a cleanup.
func (d *daemon) stop(tb testing.TB) {
	tb.Helper()
	d.stopOnce.Do(func() { d.terminate(tb) })
}

func (d *daemon) terminate(tb testing.TB) {
	exited := d.exited
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-exited:
	case <-time.After(10 * time.Second):
		tb.Errorf("daemon did not exit within 10 s of SIGTERM; killing it\nstderr:\n%s", d.stderr)
		_ = d.cmd.Process.Kill()
		<-exited
		return
	}
	if err != nil && !d.reference {
		tb.Errorf("daemon exited uncleanly after SIGTERM: %v\nstderr:\n%s", err, d.stderr)
	}
}

// pid is the daemon's process id.
func (d *daemon) pid() int { return d.cmd.Process.Pid }

// rss reads VmRSS of the daemon from /proc, in bytes.
func (d *daemon) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.pid()))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v) // "12345 kB"
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("unexpected VmRSS line %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("VmRSS not found in /proc/PID/status")
}

// metrics scrapes /metrics uncompressed (which allocates little in the
// daemon) and returns the unlabelled samples by name.
func (d *daemon) metrics() (map[string]float64, error) { return d.scrape(false) }

// scrape gets /metrics, gzip-compressed if gzip is set: compressing costs
// the daemon several hundred KB of allocation per scrape, which is what
// nudgeGC wants.
func (d *daemon) scrape(gzip bool) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.http+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if !gzip {
		req.Header.Set("Accept-Encoding", "identity")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format, keeping samples without
// labels (enough for the go_* and process_* gauges).
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.Contains(line, "{") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		out[f[0]] = v
	}
	return out, sc.Err()
}

// initializeFrame is the first request every client sends.
const initializeFrame = `{"id":"initialize","method":"initialize","params":{"clientInfo":{"name":"bench","title":null,"version":"1"}}}`

// optOutBroadcastsFrame is initializeFrame for a client that opts out of
// the notifications the daemon sends every connection about every thread
// (capabilities.optOutNotificationMethods, as the reference accepts it):
// a bot that runs turns on its own thread and reads its turn/* and item/*.
const optOutBroadcastsFrame = `{"id":"initialize","method":"initialize","params":{"clientInfo":{"name":"bench","title":null,"version":"1"},"capabilities":{"optOutNotificationMethods":["thread/started","thread/status/changed","thread/readState/changed"]}}}`

// handshake dials the daemon and completes initialize, returning the open
// connection.
func handshake(ctx context.Context, url string) (*websocket.Conn, error) {
	return handshakeWith(ctx, url, initializeFrame, nil)
}

// handshakeWith is handshake with another initialize request (its id must
// be "initialize") and dial options.
func handshakeWith(ctx context.Context, url, initialize string, opts *websocket.DialOptions) (*websocket.Conn, error) {
	ws, resp, err := websocket.Dial(ctx, url, opts)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte(initialize)); err != nil {
		_ = ws.CloseNow()
		return nil, err
	}
	typ, data, err := ws.Read(ctx)
	if err != nil {
		_ = ws.CloseNow()
		return nil, err
	}
	if err := checkInitialize(typ, data); err != nil {
		_ = ws.CloseNow()
		return nil, err
	}
	return ws, nil
}

func checkInitialize(typ websocket.MessageType, data []byte) error {
	if typ != websocket.MessageText {
		return fmt.Errorf("initialize: got a %v frame", typ)
	}
	var m struct {
		ID     string          `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("initialize: %v: %s", err, data)
	}
	if m.ID != "initialize" || len(m.Result) == 0 || m.Result[0] != '{' {
		return fmt.Errorf("initialize: unexpected response %s", data)
	}
	return nil
}

// lineWatcher is the daemon's stdout: it reports the address from the first
// line starting with prefix.
type lineWatcher struct {
	prefix string
	found  chan string
	buf    []byte
	done   bool
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	if w.done {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimSpace(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
		if addr, ok := strings.CutPrefix(line, w.prefix); ok {
			w.done = true
			w.buf = nil
			w.found <- addr
			return len(p), nil
		}
	}
}

// lockedBuffer collects the daemon's stderr for failure messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// referenceBinary is the reference server the turn benchmarks measure
// instead of ours when APPSERVER_BENCH_REFERENCE names it: the native
// `codex` binary of the npm package (under
// node_modules/@openai/codex-linux-x64/vendor/…/bin/codex), not the
// package's Node wrapper, whose process would be the one measured.
func referenceBinary() string { return os.Getenv("APPSERVER_BENCH_REFERENCE") }

// referenceListenPrefix starts the line of the reference's stderr that
// gives its websocket address.
const referenceListenPrefix = "listening on: "

// startReference starts the reference app-server on a free loopback port
// with its own CODEX_HOME and the given -c flags; HOME stays this
// process's, as for our daemon, so a login shell costs the same. It is
// stopped at cleanup.
func startReference(tb testing.TB, extra ...string) *daemon {
	tb.Helper()
	home := tb.TempDir()
	cmd := exec.Command(referenceBinary(), append([]string{"app-server", "--listen", "ws://127.0.0.1:0"}, extra...)...)
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "OPENAI_API_KEY=sk-bench", "RUST_LOG=warn")
	cmd.Dir = home
	watch := &lineWatcher{prefix: referenceListenPrefix, found: make(chan string, 1)}
	d := &daemon{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan error, 1), reference: true}
	cmd.Stdout = d.stderr
	cmd.Stderr = io.MultiWriter(watch, d.stderr)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start the reference: %v", err)
	}
	exited := d.exited
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() { d.stop(tb) })
	d.awaitAddress(tb, watch.found, 60*time.Second)
	return d
}
