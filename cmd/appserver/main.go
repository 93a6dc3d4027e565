package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/appserver/appserver/internal/sandbox"
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
