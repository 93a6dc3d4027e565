package execsession

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// pollPIDs writes chars, then polls until n PID=<digits> lines arrived.
func pollPIDs(t *testing.T, m *Manager, id int, chars string, n int) string {
	t.Helper()
	var acc strings.Builder
	req := WriteRequest{SessionID: id, Chars: chars, YieldTime: 300 * time.Millisecond}
	for i := 0; i < 50; i++ {
		acc.WriteString(writeOK(t, m, req).Output)
		if len(pidLine.FindAllString(acc.String(), -1)) >= n {
			return acc.String()
		}
		req.Chars = ""
	}
	t.Fatalf("want %d pids in %q", n, acc.String())
	return ""
}

// TestSupervisorShutdownLeavesNoProcesses simulates daemon shutdown with
// sessions open in several threads: every session process and every
// descendant must be gone afterwards, and goleak (TestMain) checks that no
// session goroutine survived.
func TestSupervisorShutdownLeavesNoProcesses(t *testing.T) {
	sup := NewSupervisor(ManagerConfig{})
	var leaders, others []int
	dir := t.TempDir()
	for _, thread := range []string{"thread-a", "thread-b"} {
		m, err := sup.Manager(thread)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := sup.Manager(thread); again != m {
			t.Fatal("a thread keeps its Manager")
		}
		for _, req := range []ExecRequest{
			{Argv: sh("echo PID=$$; sleep 1000 & echo PID=$!; wait")},
			{Argv: []string{"/bin/bash", "--norc", "--noprofile", "-i"}, TTY: true},
			{Argv: sh("echo PID=$$; (sleep 1000; :) & echo PID=$!; exec sleep 1000")},
		} {
			req.Cwd = dir
			req.YieldTime = 400 * time.Millisecond
			res, err := m.Exec(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			id := running(t, res)
			if req.TTY {
				// The terminal echoes the input line ("PID=$$" does not
				// match PID=<digits>), then the shell prints both pids.
				res.Output = pollPIDs(t, m, id, "echo PID=$$; sleep 1000 & echo PID=$!\n", 2)
			}
			pids := pidsIn(t, res.Output, 2)
			leaders = append(leaders, res.pidOf(m, id))
			others = append(others, pids...)
		}
	}
	if n := sup.LiveSessions(); n != 6 {
		t.Fatalf("%d live sessions, want 6", n)
	}
	for _, p := range append(append([]int(nil), leaders...), others...) {
		if !alive(p) {
			t.Fatalf("pid %d not running before shutdown", p)
		}
	}
	if err := sup.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range leaders {
		requireReaped(t, p)
	}
	for _, p := range others {
		requireDead(t, p)
	}
	if _, err := sup.Manager("thread-c"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Manager after Close: %v", err)
	}
	if sup.LiveSessions() != 0 {
		t.Fatal("sessions left after Close")
	}
	_ = sup.Close()
}

func TestSupervisorReleaseReapsOneThread(t *testing.T) {
	sup := NewSupervisor(ManagerConfig{})
	defer sup.Close()
	a, _ := sup.Manager("a")
	b, _ := sup.Manager("b")
	ra := execOK(t, a, ExecRequest{Argv: []string{"sleep", "1000"}, YieldTime: 10 * time.Millisecond})
	rb := execOK(t, b, ExecRequest{Argv: []string{"sleep", "1000"}, YieldTime: 10 * time.Millisecond})
	pa, pb := ra.pidOf(a, running(t, ra)), rb.pidOf(b, running(t, rb))
	if err := sup.Release("a"); err != nil {
		t.Fatal(err)
	}
	requireReaped(t, pa)
	if !alive(pb) || sup.LiveSessions() != 1 {
		t.Fatal("releasing one thread must not touch another")
	}
	if _, err := a.Exec(context.Background(), ExecRequest{Argv: []string{"true"}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("released Manager: %v", err)
	}
	if a2, _ := sup.Manager("a"); a2 == a {
		t.Fatal("a released thread gets a fresh Manager")
	}
	_ = sup.Release("unknown")
}
