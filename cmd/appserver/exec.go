package main

import (
	"context"
	"flag"
	"io"
	"os"
	"strings"

	"github.com/appserver/appserver/internal/execclient"
	"github.com/appserver/appserver/internal/serve"
)

const execUsage = `usage: appserver exec [flags] ["prompt" | -]

Runs one turn on a running daemon over its HTTP API: creates a thread (or
continues --resume THREAD), posts the prompt, streams the agent's text to
stdout (--json: a JSONL event stream) and progress to stderr. The bearer
token is read from $APPSERVER_TOKEN. The prompt is the arguments, or stdin
with "-" or with no argument and stdin not a terminal.

Approval and user-input requests are asked at the terminal when stdin is
one, else answered by --on-approval: decline (the default, as codex exec:
the model is told and the turn goes on) or fail (the turn is interrupted,
exit status 7). Each is shown on stderr.

exit status:
  0    the turn completed (and its final message matches --output-schema)
  1    the turn failed
  2    bad usage
  3    the daemon could not be reached or was lost (connection, TLS, 5xx)
  4    the daemon refused the request (4xx: unknown thread, invalid input)
  5    the daemon refused the caller (401: token; 403: beyond the principal's ceiling or roots)
  6    the turn was interrupted by someone else (another client, shutdown)
  7    exec refused an approval and interrupted the turn (--on-approval fail, c at the terminal)
  8    the final message does not match --output-schema
  124  --timeout expired: exec interrupted the turn
  130  exec was stopped by SIGINT or SIGTERM: it interrupted the turn

flags:
`

// runExec parses exec's flags and runs the turn with internal/execclient.
func runExec(ctx context.Context, args []string, stdin *os.File, stdout, stderr io.Writer) error {
	o := execclient.Options{Token: os.Getenv(execclient.EnvToken), Stdout: stdout, Stderr: stderr}
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	defServer := os.Getenv(execclient.EnvServer)
	if defServer == "" {
		defServer = execclient.DefaultServer
	}
	var thread, onApproval string
	var images serve.Repeated
	fs.StringVar(&o.Server, "server", defServer, "daemon URL: http(s)://HOST:PORT or the ws:// listen address (default $"+execclient.EnvServer+")")
	fs.StringVar(&o.Resume, "resume", "", "continue this thread instead of creating one")
	fs.StringVar(&thread, "thread", "", "the same as --resume")
	fs.BoolVar(&o.JSON, "json", false, "print a JSONL stream of the turn's events on stdout instead of the agent's text")
	fs.StringVar(&o.Cwd, "cwd", "", `working directory of a new thread (default: the current directory; --cwd "" leaves it to the daemon: a principal's first workspace root)`)
	fs.StringVar(&o.Model, "model", "", "model of a new thread, or of this turn on a resumed one (default: the daemon's)")
	fs.StringVar(&o.ApprovalPolicy, "approval-policy", "", "approval policy of a new thread: untrusted, on-failure, on-request or never (default: the daemon's)")
	fs.StringVar(&o.Sandbox, "sandbox", "", "sandbox of a new thread: read-only, workspace-write or danger-full-access (default: the daemon's)")
	fs.StringVar(&onApproval, "on-approval", "", "what to do with an approval or user-input request: ask (at the terminal), decline (the turn goes on) or fail (interrupt the turn) (default: ask with a terminal on stdin, else decline)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "bound of the whole run, e.g. 10m: then the turn is interrupted and exec exits with 124 (default: none)")
	fs.StringVar(&o.OutputSchema, "output-schema", "", "JSON Schema file the final message must match (sent with the turn; exit status 8 when it does not)")
	fs.Var(&images, "image", "image file sent with the prompt (PNG, JPEG, GIF, WebP); repeat it or separate files with commas")
	fs.Var(&images, "i", "the same as --image")
	fs.StringVar(&o.IdempotencyKey, "idempotency-key", "", "Idempotency-Key of the turn; a rerun with the same key never starts a second turn (default: random)")
	if err := serve.ParseFlags(fs, args, execUsage, stdout); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "cwd" && o.Cwd == "" {
			o.DaemonCwd = true
		}
	})
	switch {
	case thread != "" && o.Resume != "" && thread != o.Resume:
		return serve.UsageError{Msg: "--thread and --resume name different threads"}
	case thread != "":
		o.Resume = thread
	}
	for _, list := range images {
		for path := range strings.SplitSeq(list, ",") {
			if path = strings.TrimSpace(path); path != "" {
				o.Images = append(o.Images, path)
			}
		}
	}
	o.OnApproval = execclient.ApprovalRule(onApproval)
	prompt, err := execclient.ReadPrompt(fs.Args(), stdin, execclient.IsTerminal(stdin))
	if err != nil {
		return serve.UsageError{Msg: err.Error() + ` (run "appserver exec -h" for usage)`}
	}
	term, err := execclient.OpenTerminal(stdin)
	if err != nil {
		return serve.UsageError{Msg: err.Error()}
	}
	if term != nil {
		defer term.Close()
		o.Terminal = term
	}
	c, err := execclient.New(o)
	if err != nil {
		return serve.UsageError{Msg: err.Error()}
	}
	if err := c.Run(ctx, prompt); err != nil {
		return execError{err}
	}
	return nil
}
