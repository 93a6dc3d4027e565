package serve_test

import (
	"testing"

	"github.com/appserver/appserver/internal/apptest"
)

// BenchmarkPlainTurnInProcess runs plain turns (one thread, the fake model
// answering at once) against a daemon in this process on the embedded
// store. It exists for the off-CPU view of a turn: run under `go test
// -trace`, `go tool trace -pprof=sync|syscall|net|sched` shows where the
// turn's goroutines wait (bench/README.md, "Off-CPU: where a plain turn
// waits"). Its timings include the client and the fake model, which share
// the process; the daemon's own figures are BenchmarkTurns' in bench/.
func BenchmarkPlainTurnInProcess(b *testing.B) {
	_, _, c := apptest.StartWithFake(b, `{"exhausted_text": "ok"}`)
	threadID := apptest.StartThread(b, c, nil)
	apptest.RunTurn(b, c, threadID, "warm up")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		apptest.RunTurn(b, c, threadID, "hello")
	}
}
