package fakemodel

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Main runs the fake model server until SIGINT or SIGTERM. It is the body of
// `appserver mockmodel`; see Run for the flags.
func Main(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, args, stdout, stderr)
}

// Run parses the flags
//
//	--listen ADDR          listen address (default 127.0.0.1:0)
//	--script FILE          script file (JSON); without it every request
//	                       gets the exhausted text
//	--exhausted-text TEXT  override the script's exhausted_text
//
// starts the server, prints its base URL (e.g. http://127.0.0.1:41234/v1)
// on a line of its own to stdout, logs one line per request to stderr, and
// serves until ctx ends.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mockmodel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen `address`")
	scriptPath := fs.String("script", "", "script `file` (JSON)")
	exhausted := fs.String("exhausted-text", "", "answer once the script is used up (default "+fmt.Sprintf("%q", DefaultExhaustedText)+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mockmodel: unexpected arguments %q", fs.Args())
	}
	var script Script
	if *scriptPath != "" {
		var err error
		if script, err = LoadScript(*scriptPath); err != nil {
			return err
		}
	}
	if *exhausted != "" {
		script.ExhaustedText = *exhausted
	}
	srv, err := StartConfig(Config{Addr: *listen, Script: script, Logger: slog.New(slog.NewTextHandler(stderr, nil))})
	if err != nil {
		return err
	}
	defer srv.Close()
	if _, err := fmt.Fprintln(stdout, srv.URL()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
