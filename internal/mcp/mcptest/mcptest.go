package mcptest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// Build compiles the test server once per test binary and returns the
// path of the executable. Call Cleanup from TestMain when done.
func Build() (string, error) {
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(file), "..", "testdata", "mcptestserver")
		buildDir, buildErr = os.MkdirTemp("", "mcptestserver")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "mcptestserver")
		cmd := exec.Command("go", "build", "-o", buildBin, ".")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building the MCP test server: %v\n%s", err, out)
		}
	})
	return buildBin, buildErr
}

// Everything is the path of the reference MCP server from npm
// (@modelcontextprotocol/server-everything, pinned), which
// scripts/test-deps.sh installs into .tools/ of the checkout. Without it
// the test is skipped, and under CI=true it fails.
func Everything(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", "..", ".tools", "server-everything", "node_modules", ".bin", "mcp-server-everything")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the reference MCP server is missing (run scripts/test-deps.sh): %v", err)
		}
		t.Skipf("the reference MCP server is missing (run scripts/test-deps.sh): %v", err)
	}
	return bin
}

// Cleanup removes the built executable.
func Cleanup() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// HTTPServer is a running streamable HTTP test server.
type HTTPServer struct {
	// URL is its MCP endpoint.
	URL string
	cmd *exec.Cmd
}

// StartHTTP runs the test server over streamable HTTP on a free loopback
// port; token, when set, is the bearer token it requires.
func StartHTTP(ctx context.Context, token string) (*HTTPServer, error) {
	return StartHTTPOn(ctx, "127.0.0.1:0", token)
}

// StartHTTPOn is StartHTTP on the address addr (host:port), for a server
// that comes back where a stopped one was.
func StartHTTPOn(ctx context.Context, addr, token string) (*HTTPServer, error) {
	bin, err := Build()
	if err != nil {
		return nil, err
	}
	args := []string{"-http", addr}
	if token != "" {
		args = append(args, "-token", token)
	}
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case u := <-line:
		if u == "" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("the MCP test server printed no URL")
		}
		return &HTTPServer{URL: u, cmd: cmd}, nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-line
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-line
		return nil, fmt.Errorf("the MCP test server did not start")
	}
}

// Stop kills the server and waits for it.
func (s *HTTPServer) Stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
