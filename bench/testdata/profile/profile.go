// This file is not part of any package of the module: the bench harness
// adds it to cmd/appserver with `go build -overlay` when
// APPSERVER_BENCH_PPROF names a directory (bench/README.md, "Profiling
// the daemon"). The daemon built that way profiles itself between two
// signals: SIGUSR1 starts a CPU profile, SIGUSR2 stops it and writes the
// allocation profile next to it, then a marker file saying both are
// complete. A daemon built without it has no such handler.

package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
)

func init() {
	dir := os.Getenv("APPSERVER_BENCH_PPROF")
	if dir == "" {
		return
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var cpu *os.File
		name := func(kind string) string {
			return filepath.Join(dir, fmt.Sprintf("%d-%s", os.Getpid(), kind))
		}
		for s := range sig {
			switch {
			case s == syscall.SIGUSR1 && cpu == nil:
				f, err := os.Create(name("cpu.pprof"))
				if err != nil {
					fmt.Fprintln(os.Stderr, "bench profile:", err)
					continue
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					fmt.Fprintln(os.Stderr, "bench profile:", err)
					_ = f.Close()
					continue
				}
				cpu = f
			case s == syscall.SIGUSR2 && cpu != nil:
				pprof.StopCPUProfile()
				_ = cpu.Close()
				cpu = nil
				if f, err := os.Create(name("allocs.pprof")); err == nil {
					_ = pprof.Lookup("allocs").WriteTo(f, 0)
					_ = f.Close()
				}
				_ = os.WriteFile(name("done"), nil, 0o644)
			}
		}
	}()
}
