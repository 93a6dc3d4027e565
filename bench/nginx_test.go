package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// nginxBinary finds nginx (Debian installs it in /usr/sbin, which a
// non-root PATH may lack). It skips the test when nginx is missing,
// unless CI=true, where that fails it.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("nginx not found with CI=true: scripts/test-deps.sh installs it")
	}
	t.Skip("nginx not found: scripts/test-deps.sh installs it")
	return ""
}

// renderNginx turns deploy/nginx.conf into a configuration for this
// machine: the compose service names become the daemons' loopback
// addresses, nginx listens on listen, and its temporary files go under
// dir (the distribution's /var/lib/nginx belongs to root). Every
// replacement must apply, so a change to nginx.conf that this test no
// longer understands fails it rather than testing something else.
func renderNginx(t *testing.T, nginx, dir, listen string, daemons []*daemon) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(raw)
	replace := func(old, new string) {
		t.Helper()
		if !strings.Contains(conf, old) {
			t.Fatalf("deploy/nginx.conf has no %q", old)
		}
		conf = strings.ReplaceAll(conf, old, new)
	}
	for i, d := range daemons {
		replace(fmt.Sprintf(" appserver-%d:7878", i+1), " "+strings.TrimPrefix(d.http, "http://"))
	}
	if m := regexp.MustCompile(`(?m)^\s*server\s+appserver-`).FindString(conf); m != "" {
		t.Fatalf("deploy/nginx.conf balances more daemons than the %d this test starts", len(daemons))
	}
	replace("listen 8080;", "listen "+listen+";")
	// As root, the workers would run as www-data, which cannot enter the
	// test's private directories; as anyone else the directive is ignored.
	replace("user www-data;", "user root;")
	out, err := exec.Command(nginx, "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -V: %v\n%s", err, out)
	}
	temps := "client_body_temp_path " + filepath.Join(dir, "body") + ";\n    proxy_temp_path " + filepath.Join(dir, "proxy") + ";\n"
	for _, mod := range []string{"fastcgi", "uwsgi", "scgi"} {
		if !bytes.Contains(out, []byte("--without-http_"+mod+"_module")) {
			temps += "    " + mod + "_temp_path " + filepath.Join(dir, mod) + ";\n"
		}
	}
	replace("http {\n", "http {\n    "+temps)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startNginx runs nginx in the foreground with the rendered config and a
// private prefix, pid file and error log (nothing of the system's nginx
// is read or written), and stops it with SIGQUIT at cleanup.
func startNginx(t *testing.T, daemons []*daemon) (base string) {
	t.Helper()
	nginx := nginxBinary(t)
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	conf := renderNginx(t, nginx, dir, listen, daemons)
	cmd := exec.Command(nginx, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"),
		"-g", "daemon off; pid "+filepath.Join(dir, "nginx.pid")+";")
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("nginx exited uncleanly: %v\n%s", err, logs)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("nginx did not stop within 10 s of SIGQUIT\n%s", logs)
		}
	})

	// nginx says nothing once it listens: poll its port until a request
	// gets through to a daemon.
	base = "http://" + listen
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("nginx exited: %v\n%s", err, logs)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		status, err := getStatus(ctx, base+"/readyz")
		cancel()
		if err == nil && status == http.StatusOK {
			return base
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx on %s: /readyz %d, %v after 30 s\n%s", listen, status, err, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getStatus(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// apiRequests sums a daemon's appserver_requests_total (JSON-RPC) and
// appserver_http_requests_total (HTTP API) over every label.
func apiRequests(t *testing.T, d *daemon) float64 {
	t.Helper()
	sum := 0.0
	for line := range strings.SplitSeq(metricsText(t, d), "\n") {
		for _, name := range []string{"appserver_requests_total", "appserver_http_requests_total"} {
			if rest, ok := strings.CutPrefix(line, name); ok && (rest[0] == '{' || rest[0] == ' ') {
				v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				if err != nil {
					t.Fatalf("metrics line %q: %v", line, err)
				}
				sum += v
			}
		}
	}
	return sum
}

// nginxTurnDelay is how long the fake model spreads each answer over
// (EventDelayMS per stream event): long enough that a stream nginx held
// back would deliver turn/started and turn/completed together.
const nginxTurnDelay = 60 * time.Millisecond

// TestNginx runs deploy/nginx.conf in front of two daemons on one
// Postgres and uses them only through it, as a client of the compose
// deployment would: /readyz; a websocket session (initialize, thread/start,
// a turn against the fake model); the HTTP API with an event stream open
// while a turn runs, whose events must arrive as they happen, not when
// the turn is over. Both daemons must have served some of it.
func TestNginx(t *testing.T) {
	nginxBinary(t) // skip before starting anything
	steps := fakemodel.Step{Text: "pong from behind nginx", Chunks: 4, EventDelayMS: int(nginxTurnDelay / time.Millisecond), Times: 2}
	fake, err := fakemodel.StartConfig(fakemodel.Config{Script: fakemodel.Script{Steps: []fakemodel.Step{steps}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	nodes := startNodes(t, 2, pgtest.URL(t), fakeModelArgs(fake.URL())...)
	base := startNginx(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	// The websocket: the same session a client has with one daemon.
	w, err := newTurnWorker(ctx, "ws://"+strings.TrimPrefix(base, "http://"), t.TempDir())
	if err != nil {
		t.Fatalf("websocket through nginx: %v", err)
	}
	defer w.ws.CloseNow()
	if _, _, err := w.turn(ctx); err != nil {
		t.Fatalf("websocket turn through nginx: %v", err)
	}

	// The HTTP API, with the websocket still open: least_conn sends the
	// thread's creation to the other daemon.
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	hw, err := newHTTPWorker(ctx, hc, base, t.TempDir())
	if err != nil {
		t.Fatalf("POST /v1/threads through nginx: %v", err)
	}
	resp, err := openEvents(ctx, hc, base, hw.threadID)
	if err != nil {
		t.Fatalf("event stream through nginx: %v", err)
	}
	defer resp.Body.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/threads/"+hw.threadID+"/turns", bytes.NewReader(httpTurnBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	post, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var started struct {
		ID string `json:"id"`
	}
	err = json.NewDecoder(post.Body).Decode(&started)
	post.Body.Close()
	if post.StatusCode != http.StatusAccepted && post.StatusCode != http.StatusCreated && post.StatusCode != http.StatusOK {
		t.Fatalf("POST turns through nginx: %s", post.Status)
	}
	if err != nil || started.ID == "" {
		t.Fatalf("POST turns through nginx: no turn id (%v)", err)
	}

	r := newSSEReader(resp.Body)
	var methods []string
	var at = map[string]time.Time{}
	lastID := -1
	for {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("event stream after %v: %v", methods, err)
		}
		id, err := strconv.Atoi(ev.id)
		if err != nil || id <= lastID {
			t.Fatalf("event %q after id %d: ids must increase", ev.id, lastID)
		}
		lastID = id
		methods = append(methods, ev.event)
		if (ev.event == "turn/started" || ev.event == "turn/completed") && turnIDOf(ev.data) == started.ID {
			at[ev.event] = time.Now()
		}
		if ev.event == "turn/completed" && turnIDOf(ev.data) == started.ID {
			break
		}
	}
	if at["turn/started"].IsZero() {
		t.Fatalf("no turn/started for %s in %v", started.ID, methods)
	}
	// The model took at least 4 × nginxTurnDelay after the turn started;
	// a buffered stream would hand both events over at once.
	if gap := at["turn/completed"].Sub(at["turn/started"]); gap < 3*nginxTurnDelay {
		t.Fatalf("turn/started reached the client only %v before turn/completed: the stream was held back; events %v", gap, methods)
	}
	for i, d := range nodes {
		if n := apiRequests(t, d); n == 0 {
			t.Errorf("daemon %d served no request: nginx did not balance", i+1)
		}
	}
}
