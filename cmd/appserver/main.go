// Command appserver is the daemon that runs coding-agent conversations for
// remote clients over websocket JSON-RPC (Codex app-server protocol v2).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "appserver:", err)
		os.Exit(exitCode(err))
	}
}
