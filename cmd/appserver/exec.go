package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/appserver/appserver/internal/execclient"
)

const execUsage = `usage: appserver exec [flags] "prompt"

Runs one turn on a running daemon over its HTTP API: creates a thread (or
continues --thread), posts the prompt, streams the agent's text to stdout
and progress to stderr. The bearer token is read from $APPSERVER_TOKEN.
A prompt of "-" is read from stdin.

exit status:
  0  the turn completed
  1  the turn failed or was interrupted
  2  bad usage
  3  the daemon could not be reached or was lost (connection, TLS, 5xx)
  4  the daemon refused the request (4xx: token, unknown thread, input)

flags:
`

// runExec parses exec's flags and runs the turn with internal/execclient.
func runExec(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := execclient.Options{Token: os.Getenv(execclient.EnvToken), Stdout: stdout, Stderr: stderr}
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	defServer := os.Getenv(execclient.EnvServer)
	if defServer == "" {
		defServer = execclient.DefaultServer
	}
	fs.StringVar(&o.Server, "server", defServer, "daemon URL: http(s)://HOST:PORT or the ws:// listen address (default $"+execclient.EnvServer+")")
	fs.StringVar(&o.Thread, "thread", "", "continue this thread instead of creating one")
	fs.BoolVar(&o.JSON, "json", false, "print the finished turn as one JSON object on stdout instead of streaming text")
	fs.StringVar(&o.Cwd, "cwd", "", "working directory of a new thread (default: the current directory)")
	fs.StringVar(&o.Model, "model", "", "model of a new thread (default: the daemon's)")
	fs.StringVar(&o.IdempotencyKey, "idempotency-key", "", "Idempotency-Key of the turn; a rerun with the same key never starts a second turn (default: random)")
	if err := parseFlags(fs, args, execUsage, stdout); err != nil {
		return err
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fmt.Errorf("read the prompt from stdin: %w", err)
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		return usageError{`exec needs a prompt (run "appserver exec -h" for usage)`}
	}
	c, err := execclient.New(o)
	if err != nil {
		return usageError{err.Error()}
	}
	if err := c.Run(ctx, prompt); err != nil {
		return execError{err}
	}
	return nil
}
