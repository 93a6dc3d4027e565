package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/appserver/appserver/internal/execclient"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/serve"
)

func main() {
	// When started as the sandbox helper, apply the sandbox and exec the
	// command; this never returns in that case.
	sandbox.MaybeRunHelper()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "appserver:", err)
		os.Exit(exitCode(err))
	}
}

// version is set at build time with -ldflags "-X main.version=…"; otherwise
// the module version from the build info is used.
var version = ""

func appVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// execError is an error of `appserver exec`'s turn, whose exit status says
// what went wrong (execclient.ExitCode).
type execError struct{ err error }

func (e execError) Error() string { return e.err.Error() }
func (e execError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var u serve.UsageError
	var e execError
	switch {
	case errors.As(err, &u):
		return 2
	case errors.As(err, &e):
		return execclient.ExitCode(e.err)
	}
	return 1
}

const usage = `usage: appserver [command] [flags]

commands:
  serve     run the daemon (default)
  app-server
            serve one JSON-RPC session on stdin/stdout, as codex app-server
            does by default (serve with --listen stdio://)
  migrate   apply database migrations and exit
  exec      run one turn on a running daemon over its HTTP API (for CI jobs)
  mcp       serve the codex and codex-reply MCP tools on stdin/stdout (for MCP hosts)
  mockmodel run the scripted fake model server (offline integration work)
  version   print the version and exit (also --version)

Run "appserver <command> -h" for the flags of a command.
`

// run is the whole program, callable in-process by tests: it parses args,
// runs the chosen command until ctx is cancelled and returns its error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := runCommand(ctx, args, stdout, stderr); !errors.Is(err, flag.ErrHelp) {
		return err
	}
	return nil // the command printed its help
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			cmd, args = "help", args[1:]
		case "-version", "--version":
			cmd, args = "version", args[1:]
		default:
			if !strings.HasPrefix(args[0], "-") {
				cmd, args = args[0], args[1:]
			}
		}
	}
	p := serve.Process{Version: appVersion(), Stdin: os.Stdin, Stdout: stdout, Stderr: stderr}
	switch cmd {
	case "serve":
		return serve.Serve(ctx, p, args)
	case "app-server":
		return serve.AppServer(ctx, p, args)
	case "migrate":
		return serve.Migrate(ctx, p, args)
	case "exec":
		return runExec(ctx, args, os.Stdin, stdout, stderr)
	case "mcp":
		return serve.MCP(ctx, p, args)
	case "mockmodel":
		return fakemodel.Run(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "appserver %s\n", appVersion())
		return nil
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return serve.UsageError{Msg: fmt.Sprintf("unknown command %q", cmd)}
	}
}
