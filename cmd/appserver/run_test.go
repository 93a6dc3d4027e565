package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/serve"
)

func TestMain(m *testing.M) {
	apptest.Main(m)
}

func TestServeRefusals(t *testing.T) {
	dir := t.TempDir()
	err := run(context.Background(), []string{"serve", "--listen", "ws://0.0.0.0:0", "--data-dir", dir}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "refusing to start non-loopback websocket listener")
	err = run(context.Background(), []string{"serve", "--data-dir", dir, "-c", "listen=5"}, io.Discard, io.Discard)
	require.Error(t, err)
	err = run(context.Background(), []string{"serve", "--data-dir", dir, "--ws-token-file", "relative/path"}, io.Discard, io.Discard)
	require.Error(t, err)
	err = run(context.Background(), []string{"bogus"}, io.Discard, io.Discard)
	require.Equal(t, 2, exitCode(err))
}

func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var out, errb strings.Builder
		require.NoError(t, run(context.Background(), args, &out, &errb), "%v", args)
		require.Equal(t, "appserver "+appVersion()+"\n", out.String(), "%v", args)
		require.Empty(t, errb.String())
	}
}

// -h and --help, alone or after a command, print the usage on stdout and
// succeed; a bad flag is a usage error (2) that names the flag, with
// nothing on stdout.
func TestHelpAndUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "usage: appserver [command]"},
		{[]string{"--help"}, "usage: appserver [command]"},
		{[]string{"help"}, "usage: appserver [command]"},
		{[]string{"serve", "-h"}, "usage: appserver serve"},
		{[]string{"serve", "--help"}, "-shutdown-grace-period"},
		{[]string{"serve", "-h"}, "stdio://"},
		{[]string{"app-server", "-h"}, "usage: appserver app-server"},
		{[]string{"migrate", "--help"}, "usage: appserver migrate"},
		{[]string{"exec", "-h"}, "exit status:"},
		{[]string{"exec", "--help"}, "-idempotency-key"},
	} {
		var out, errb strings.Builder
		err := run(context.Background(), tc.args, &out, &errb)
		require.NoError(t, err, "%v", tc.args)
		require.Contains(t, out.String(), tc.want, "%v", tc.args)
		require.Empty(t, errb.String(), "%v", tc.args)
	}
	for _, args := range [][]string{{"serve", "--bogus"}, {"exec", "--bogus", "hi"}, {"migrate", "extra"}, {"exec"}} {
		var out strings.Builder
		err := run(context.Background(), args, &out, io.Discard)
		require.Error(t, err, "%v", args)
		require.Equal(t, 2, exitCode(err), "%v: %v", args, err)
		require.Empty(t, out.String(), "%v", args)
	}
	err := run(context.Background(), []string{"serve", "--bogus"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "-bogus")
}

// With --log-format json everything the daemon writes, on stdout as on
// stderr, is JSON: the address announcement is a record too.
func TestJSONLogsKeepStdoutJSON(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb apptest.SyncBuffer
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"serve", "--listen", "ws://127.0.0.1:0", "--data-dir", t.TempDir(), "--log-format", "json", "--log-level", "info"}, pw, &errb)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	var stdout []string
	addr := ""
	sc := bufio.NewScanner(pr)
	for addr == "" && sc.Scan() {
		stdout = append(stdout, sc.Text())
		addr, _ = serve.ListenAddr(sc.Text())
	}
	require.NotEmpty(t, addr, "no address announced; stdout: %q", stdout)
	require.Equal(t, 200, apptest.Status(t, apptest.HTTPURL(addr, "/readyz")))
	cancel()
	rest, _ := io.ReadAll(pr)
	require.NoError(t, <-done)
	stdout = append(stdout, strings.Split(strings.TrimSpace(string(rest)), "\n")...)
	for _, out := range []struct {
		name  string
		lines []string
	}{{"stdout", stdout}, {"stderr", strings.Split(strings.TrimSpace(errb.String()), "\n")}} {
		for _, line := range out.lines {
			if line == "" {
				continue
			}
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), "%s line %q is not JSON", out.name, line)
		}
	}
	require.Contains(t, errb.String(), `"msg":"appserver listening"`)
}
