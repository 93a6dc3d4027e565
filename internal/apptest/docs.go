package apptest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// RepoFile is the path of a file of the repository (README.md,
// docs/http-api.md), wherever the test runs.
func RepoFile(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", name)
}

// CodeBlocks returns the code blocks of a language (```lang) of a Markdown
// file of the repository between the <!-- name:begin --> and
// <!-- name:end --> markers, in order: the examples a doc test runs.
func CodeBlocks(t testing.TB, file, name, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(RepoFile(file))
	require.NoError(t, err)
	text := string(b)
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	i, j := strings.Index(text, begin), strings.Index(text, end)
	require.True(t, i >= 0 && j > i, "%s has no %s … %s section", file, begin, end)
	var blocks []string
	rest := text[i+len(begin) : j]
	fence := "```" + lang + "\n"
	for {
		k := strings.Index(rest, fence)
		if k < 0 {
			break
		}
		rest = rest[k+len(fence):]
		e := strings.Index(rest, "\n```")
		require.True(t, e >= 0, "unterminated code block in the %s examples of %s", name, file)
		blocks = append(blocks, rest[:e+1])
		rest = rest[e+len("\n```"):]
	}
	return blocks
}

// ShBlocks is CodeBlocks of the ```sh blocks.
func ShBlocks(t testing.TB, file, name string) []string {
	t.Helper()
	return CodeBlocks(t, file, name, "sh")
}

// RunBash runs a bash script in dir with the API's base URL (APPSERVER),
// a token (APPSERVER_TOKEN) and CI_RUN_ID=test in its environment, as the
// documented scripts expect, and requires that it succeeds.
func RunBash(t testing.TB, baseURL, dir, script, token string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "APPSERVER="+baseURL, "APPSERVER_TOKEN="+token, "CI_RUN_ID=test")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// A stream a script left behind (it stopped reading) must not keep
	// the test waiting for its output pipes.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	require.NoError(t, err, "script failed\nstdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	return out.String(), errb.String()
}

// KV parses the key=value lines of a script's output.
func KV(out string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}
