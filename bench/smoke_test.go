package bench

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestDaemonSmoke keeps the benchmarks from rotting: it starts the daemon
// once, does one handshake and scrapes the metrics the idle and dynamic
// tool benchmarks need.
func TestDaemonSmoke(t *testing.T) {
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, err := handshake(ctx, d.ws)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatalf("close: %v", err)
	}
	m, err := d.metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines",
		"go_memstats_alloc_bytes_total", "go_gc_duration_seconds_count"} {
		if _, ok := m[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if rss, err := d.rss(); err != nil || rss <= 0 {
		t.Errorf("rss = %d, %v", rss, err)
	}
}
