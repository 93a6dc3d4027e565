package shell

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/policy"
)

func TestExecCancelKillsGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		_, err = Exec(ctx, ExecRequest{Argv: []string{"/bin/sh", "-c", "sleep 30 & sleep 30"}, Cwd: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}, Policy: wsPolicy()})
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Exec did not return after cancel")
	}
	require.ErrorIs(t, err, context.Canceled)
}

func TestExecReapsBackgroundChildren(t *testing.T) {
	// A background child holding the pipe does not keep the call open: the
	// group is killed once the command exits.
	start := time.Now()
	res, err := Exec(context.Background(), ExecRequest{Argv: []string{"/bin/sh", "-c", "sleep 30 & echo started"}, Cwd: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}, Policy: wsPolicy()})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, "started\n", string(res.Aggregated))
}

func TestExecCaps(t *testing.T) {
	cap := 10
	res, err := Exec(context.Background(), ExecRequest{Argv: []string{"/bin/sh", "-c", "seq 100; seq 100 >&2"}, Cwd: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")},
		Policy: policy.SandboxPolicy{Kind: policy.DangerFullAccess}, SeparateStreams: true, MaxOutputBytes: &cap})
	require.NoError(t, err)
	require.Equal(t, "1\n2\n3\n4\n5\n", string(res.Stdout))
	require.Equal(t, "1\n2\n3\n4\n5\n", string(res.Stderr))
	require.True(t, res.StdoutCapped)
	require.True(t, res.StderrCapped)
	require.Len(t, res.Aggregated, 10)
}

func TestCommandExecBuffered(t *testing.T) {
	unset := (*string)(nil)
	v := "over"
	res, err := CommandExec(context.Background(), CommandExecParams{
		Command: []string{"/bin/sh", "-c", `echo "out $A $B"; echo err >&2; exit 7`},
		Env:     map[string]*string{"A": &v, "B": unset},
	}, CommandExecOptions{BaseEnv: []string{"PATH=" + os.Getenv("PATH"), "A=base", "B=gone"}, DefaultCwd: t.TempDir(), DefaultPolicy: wsPolicy()})
	require.NoError(t, err)
	require.Equal(t, CommandExecResult{ExitCode: 7, Stdout: "out over \n", Stderr: "err\n"}, res)
}

func TestCommandExecStreaming(t *testing.T) {
	var mu sync.Mutex
	var got [2]bytes.Buffer
	var capFlags [2]int
	limit := int64(100)
	res, err := CommandExec(context.Background(), CommandExecParams{
		Command: []string{"/bin/sh", "-c", "seq 1000; echo small >&2"}, StreamStdoutStderr: true, HasProcessID: true, OutputBytesCap: &limit,
	}, CommandExecOptions{BaseEnv: []string{"PATH=" + os.Getenv("PATH")}, DefaultCwd: t.TempDir(), DefaultPolicy: policy.SandboxPolicy{Kind: policy.ReadOnly},
		OnOutput: func(d OutputDelta) {
			mu.Lock()
			defer mu.Unlock()
			got[d.Stream].Write(d.Data)
			if d.CapReached {
				capFlags[d.Stream]++
			}
		}})
	require.NoError(t, err)
	require.Equal(t, CommandExecResult{ExitCode: 0, StdoutCapReached: true}, res, "streamed bytes are not repeated")
	require.Equal(t, seqOutput(1000)[:100], got[Stdout].String())
	require.Equal(t, "small\n", got[Stderr].String())
	require.Equal(t, [2]int{1, 0}, capFlags)
}

func TestCommandExecTimeoutAndValidation(t *testing.T) {
	opts := CommandExecOptions{BaseEnv: []string{"PATH=" + os.Getenv("PATH")}, DefaultCwd: t.TempDir(), DefaultPolicy: wsPolicy()}
	ms := int64(200)
	res, err := CommandExec(context.Background(), CommandExecParams{Command: []string{"sleep", "20"}, TimeoutMS: &ms}, opts)
	require.NoError(t, err)
	require.Equal(t, TimeoutExitCode, res.ExitCode)

	capN := int64(1)
	for name, p := range map[string]CommandExecParams{
		"empty":        {},
		"timeouts":     {Command: []string{"ls"}, TimeoutMS: &ms, DisableTimeout: true},
		"caps":         {Command: []string{"ls"}, OutputBytesCap: &capN, DisableOutputCap: true},
		"tty":          {Command: []string{"ls"}, TTY: true},
		"stream no id": {Command: []string{"ls"}, StreamStdoutStderr: true},
	} {
		_, err := CommandExec(context.Background(), p, opts)
		require.True(t, apperr.Is(err, apperr.Invalid), "%s: %v", name, err)
	}
	_, err = CommandExec(context.Background(), CommandExecParams{Command: []string{"appserver-missing-cmd"}}, opts)
	require.True(t, apperr.Is(err, apperr.Invalid))
	require.True(t, strings.Contains(err.Error(), "executable file not found"), err.Error())
}
