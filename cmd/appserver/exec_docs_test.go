package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// docWebhookSecret is the receiver's secret in the webhook example: "whsec_"
// and the base64 of 24 bytes.
const docWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestCIDocExamples runs the examples of docs/ci.md with the appserver
// binary of this tree on PATH and the fake model: the shell script end to
// end (a turn that completes, one whose approval the job refuses), and the
// GitHub Actions workflow's run steps in order, as the runner would (a
// turn that completes, one that fails the job).
func TestCIDocExamples(t *testing.T) {
	apptest.NeedTools(t, "bash", "jq")
	apptest.BuildBinary()
	shell := apptest.ShBlocks(t, "docs/ci.md", "ci-shell-example")
	require.Len(t, shell, 1)
	workflow := apptest.CodeBlocks(t, "docs/ci.md", "ci-github-actions", "yaml")
	require.Len(t, workflow, 1)
	path := func() string {
		return filepath.Dir(apptest.Binary(t)) + string(os.PathListSeparator) + os.Getenv("PATH")
	}

	t.Run("shell", func(t *testing.T) {
		for _, tc := range []struct {
			name, script string
			status       int
			stdout       []string
			stderr       string
		}{
			{
				name: "completed",
				script: `{"steps":[
					{"match":{"user_text":"Run the unit tests"},"tool_calls":[{"call_id":"call_t","name":"shell_command","arguments":{"command":"echo 3 passed"}}]},
					{"match":{"call_output":"call_t"},"text":"All tests pass."}]}`,
				stdout: []string{"ran: /bin/bash -lc 'echo 3 passed' -> exit 0", "All tests pass."},
			},
			{
				name:   "approval refused",
				script: `{"steps":[` + strings.ReplaceAll(escalation, "touch it", "Run the unit tests") + `]}`,
				status: 7,
				stdout: []string{"refused: /bin/bash -lc 'touch approved.txt'"},
				stderr: "the agent asked for more than this job allows",
			},
		} {
			t.Run(tc.name, func(t *testing.T) {
				fake := apptest.StartFake(t, tc.script)
				dir := t.TempDir()
				require.NoError(t, os.WriteFile(filepath.Join(dir, "appserver.toml"), []byte(fakeConfig(fake)), 0o600))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "ci.sh"), []byte(shell[0]), 0o700))
				cmd := exec.Command("bash", "ci.sh")
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "PATH="+path())
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				cmd.WaitDelay = 5 * time.Second
				err := cmd.Run()
				status := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					status = ee.ExitCode()
				} else {
					require.NoError(t, err)
				}
				require.Equal(t, tc.status, status, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
				for _, want := range tc.stdout {
					require.Contains(t, out.String(), want, "stderr:\n%s", errb.String())
				}
				require.Contains(t, errb.String(), tc.stderr)
				require.FileExists(t, filepath.Join(dir, "events.jsonl"))
				lines := jsonLines(t, readFile(t, filepath.Join(dir, "events.jsonl")))
				require.Equal(t, "thread.started", lines[0]["type"])
			})
		}
	})

	t.Run("webhook subscription", func(t *testing.T) {
		block := apptest.ShBlocks(t, "docs/ci.md", "ci-webhook-api")
		require.Len(t, block, 1)
		fake := apptest.StartFake(t, `{"steps":[{"text":"done"}]}`)
		d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...), apptest.AuthArgs()...)...)
		dir := t.TempDir()
		out, errOut := apptest.RunBash(t, d.URL(""), dir, "export RECEIVER_URL=https://hooks.example/ci\n"+block[0], apptest.CIToken)
		var id string
		for line := range strings.SplitSeq(out, "\n") {
			if v, ok := strings.CutPrefix(line, "subscribed "); ok {
				id = v
			}
		}
		require.NotEmpty(t, id, "stdout:\n%s\nstderr:\n%s", out, errOut)
		require.Contains(t, out, "unsubscribed "+id)
		secret, err := os.ReadFile(filepath.Join(dir, "webhook-secret"))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(secret), "whsec_"), "the secret kept: %q", secret)
		require.Equal(t, http.StatusNotFound, d.Do(t, "GET", "/v1/webhooks/"+id, apptest.CIToken, nil).StatusCode, "unsubscribed")
	})

	t.Run("webhook", func(t *testing.T) {
		hook := apptest.CodeBlocks(t, "docs/ci.md", "ci-webhook", "toml")
		receiver := apptest.CodeBlocks(t, "docs/ci.md", "ci-webhook", "go")
		require.Len(t, hook, 1)
		require.Len(t, receiver, 1)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "receiver.go"), []byte(receiver[0]), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "webhook-secret"), []byte(docWebhookSecret+"\n"), 0o600))
		// The receiver on a free port in place of the doc's.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		out := &apptest.SyncBuffer{}
		recv := exec.Command("go", "run", "receiver.go")
		recv.Dir = dir
		recv.Env = append(os.Environ(), "WEBHOOK_SECRET="+docWebhookSecret, "LISTEN="+addr, "GOFLAGS=")
		recv.Stdout, recv.Stderr = out, out
		recv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, recv.Start())
		t.Cleanup(func() { _ = syscall.Kill(-recv.Process.Pid, syscall.SIGKILL); _ = recv.Wait() })
		require.Eventually(t, func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				_ = c.Close()
			}
			return err == nil
		}, 2*time.Minute, 50*time.Millisecond, "the receiver listens; its output:\n%s", out)

		fake := apptest.StartFake(t, `{"steps":[{"text":"done"}]}`)
		entry := strings.NewReplacer("127.0.0.1:8099", addr, `"webhook-secret"`, `"`+filepath.Join(dir, "webhook-secret")+`"`).Replace(hook[0])
		cfg := filepath.Join(dir, "appserver.toml")
		require.NoError(t, os.WriteFile(cfg, []byte(fakeConfig(fake)+"\n"+entry), 0o600))
		d := apptest.StartProc(t, "--config", cfg, "--data-dir", t.TempDir())
		r := d.RPC(t)
		thread := apptest.StartThread(t, r, nil)
		turn := apptest.RunTurn(t, r, thread, "go")
		want := "turn.completed thread=" + thread + " turn=" + turn.Turn.ID + "\n"
		require.Eventually(t, func() bool { return strings.Contains(out.String(), want) },
			30*time.Second, 20*time.Millisecond, "the receiver printed the turn's end; its output:\n%s", out)
		_ = r.WS.CloseNow()
		d.Terminate(t)
	})

	t.Run("github actions", func(t *testing.T) {
		for _, tc := range []struct {
			name, script string
			failed       string // the step that fails the job, "" for none
			summary      string
		}{
			{"completed", `{"steps":[{"text":"Fixed TestParse: the date format was wrong."}]}`, "", "Fixed TestParse: the date format was wrong.\n"},
			{"turn failed", `{"steps":[{"error":{"status":400,"message":"bad request"}}]}`, "Run the agent", "no answer\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				fake := apptest.StartFake(t, tc.script)
				failed, summary := runWorkflow(t, workflow[0], path(), fakeEnv(fake))
				require.Equal(t, tc.failed, failed)
				require.Equal(t, tc.summary, summary)
			})
		}
	})
}

func readFile(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// fakeConfig is a daemon config file for the fake model.
func fakeConfig(fake *fakemodel.Server) string {
	return `model = "fake-model"
model_provider = "fake"

[model_providers.fake]
name = "Fake"
base_url = "` + fake.URL() + `"
wire_api = "responses"
request_max_retries = 0
`
}

// fakeEnv points a daemon at the fake model through the environment, so
// that a command line naming another model still reaches it.
func fakeEnv(fake *fakemodel.Server) []string {
	return []string{
		"APPSERVER_MODEL_PROVIDER=fake",
		"APPSERVER_MODEL_PROVIDERS__FAKE__NAME=Fake",
		"APPSERVER_MODEL_PROVIDERS__FAKE__BASE_URL=" + fake.URL(),
		"APPSERVER_MODEL_PROVIDERS__FAKE__WIRE_API=responses",
		"APPSERVER_MODEL_PROVIDERS__FAKE__REQUEST_MAX_RETRIES=0",
	}
}

// runWorkflow runs the run steps of a GitHub Actions workflow's one job as
// the runner does: each in bash -e -o pipefail in the checkout, with the
// job's and the step's env, $GITHUB_ENV carried from step to step, steps
// after a failure skipped unless `if: always()`, and the processes steps
// left running ended with the job. Steps that use an action are skipped
// (checkout, setup-go, upload-artifact), and so is the install step: the
// appserver on PATH is the one under test. It returns the name of the step
// that failed the job ("" for none) and the step summary.
func runWorkflow(t *testing.T, workflow, path string, env []string) (failed, summary string) {
	t.Helper()
	var wf struct {
		Jobs map[string]struct {
			Env   map[string]string `yaml:"env"`
			Steps []struct {
				Name string            `yaml:"name"`
				Uses string            `yaml:"uses"`
				If   string            `yaml:"if"`
				Env  map[string]string `yaml:"env"`
				Run  string            `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(workflow), &wf))
	require.Len(t, wf.Jobs, 1)
	work, temp := t.TempDir(), t.TempDir()
	ghEnv, ghSummary := filepath.Join(temp, "github_env"), filepath.Join(temp, "step_summary")
	expr := regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)
	expand := func(s string) string {
		return expr.ReplaceAllStringFunc(s, func(m string) string {
			name := expr.FindStringSubmatch(m)[1]
			require.True(t, strings.HasPrefix(name, "secrets."), "expression %s", m)
			return "unused-in-the-test"
		})
	}
	var groups []int
	t.Cleanup(func() {
		// The runner ends what the steps left running with the job; the
		// test waits for them to be gone before removing their files.
		for _, pgid := range groups {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
		}
		for _, pgid := range groups {
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if syscall.Kill(-pgid, 0) != nil {
					break
				}
			}
		}
	})
	installs := 0
	for _, job := range wf.Jobs {
		for _, step := range job.Steps {
			if step.Uses != "" {
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(step.Run), "go install ") {
				installs++
				continue
			}
			switch step.If {
			case "":
				if failed != "" {
					continue
				}
			case "always()":
			default:
				t.Fatalf("step %q: condition %q", step.Name, step.If)
			}
			stepEnv := append(append(os.Environ(), env...),
				"PATH="+path, "RUNNER_TEMP="+temp, "GITHUB_ENV="+ghEnv, "GITHUB_STEP_SUMMARY="+ghSummary)
			for k, v := range job.Env {
				stepEnv = append(stepEnv, k+"="+expand(v))
			}
			for k, v := range step.Env {
				stepEnv = append(stepEnv, k+"="+expand(v))
			}
			if b, err := os.ReadFile(ghEnv); err == nil {
				sc := bufio.NewScanner(bytes.NewReader(b))
				for sc.Scan() {
					stepEnv = append(stepEnv, sc.Text())
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", expand(step.Run))
			cmd.Dir, cmd.Env = work, stepEnv
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.WaitDelay = 5 * time.Second
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			groups = append(groups, cmd.Process.Pid)
			err := cmd.Wait()
			cancel()
			t.Logf("step %q: %v\n%s", step.Name, err, out.String())
			if err != nil && failed == "" {
				failed = step.Name
			}
		}
	}
	require.Equal(t, 1, installs, "the install step")
	s, _ := os.ReadFile(ghSummary)
	return failed, string(s)
}
