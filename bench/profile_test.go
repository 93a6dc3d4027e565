package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// profileDir is where the daemon's profiles go: APPSERVER_BENCH_PPROF, ""
// when the daemon is not profiled.
func profileDir() string { return os.Getenv("APPSERVER_BENCH_PPROF") }

// profileOverlay writes the `go build -overlay` file that adds
// testdata/profile/profile.go to cmd/appserver and returns its path.
func profileOverlay(root, dir string) (string, error) {
	if !filepath.IsAbs(profileDir()) {
		return "", errors.New("APPSERVER_BENCH_PPROF must be an absolute path (the daemon runs in another directory)")
	}
	raw, err := json.Marshal(map[string]map[string]string{"Replace": {
		filepath.Join(root, "cmd", "appserver", "zz_benchprofile.go"): filepath.Join(root, "bench", "testdata", "profile", "profile.go"),
	}})
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "overlay.json")
	return p, os.WriteFile(p, raw, 0o644)
}

// profile is a running profile of the daemon (nil when not profiling).
type profile struct {
	d    *daemon
	name string
}

// startProfile starts the daemon's CPU profile when APPSERVER_BENCH_PPROF
// is set; stop writes it with the allocation profile as
// NAME-cpu.pprof and NAME-allocs.pprof in that directory, NAME being the
// benchmark's name with its slashes replaced. A daemon from
// APPSERVER_BENCH_BIN must have been built with the overlay.
func startProfile(b *testing.B, d *daemon) *profile { return startProfileAs(b, d, "") }

// startProfileAs is startProfile for one of several daemons of a
// benchmark: suffix, when not "", is added to NAME.
func startProfileAs(b *testing.B, d *daemon, suffix string) *profile {
	if profileDir() == "" || d.reference {
		return nil
	}
	if err := d.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		b.Fatalf("start the daemon's profile: %v", err)
	}
	name := strings.NewReplacer("/", "_", "=", "-", ",", "_").Replace(b.Name())
	if suffix != "" {
		name += "_" + suffix
	}
	return &profile{d: d, name: name}
}

// stop ends the profile and renames its files after the benchmark.
func (p *profile) stop(b *testing.B) {
	if p == nil {
		return
	}
	if err := p.d.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		b.Fatalf("stop the daemon's profile: %v", err)
	}
	dir, pid := profileDir(), p.d.pid()
	done := filepath.Join(dir, fmt.Sprintf("%d-done", pid))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(done); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the daemon wrote no profile to %s within 30 s (built without the overlay?)", dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = os.Remove(done)
	for _, kind := range []string{"cpu", "allocs"} {
		from := filepath.Join(dir, fmt.Sprintf("%d-%s.pprof", pid, kind))
		to := filepath.Join(dir, p.name+"-"+kind+".pprof")
		if err := os.Rename(from, to); err != nil {
			b.Fatal(err)
		}
		b.Logf("daemon profile: %s", to)
	}
}
