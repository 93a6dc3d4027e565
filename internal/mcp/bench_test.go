package mcp

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/registry"
)

// BenchmarkStdioCall measures one call of the test server's echo tool over
// stdio: "dispatch" as a turn makes it (registry dispatch, the mcpToolCall
// items, tools/call, the model output), "sdk" as a bare SDK call on the
// same session (the transport and the server's own time). Their difference
// is the daemon's overhead per MCP call. p50 and p99 are reported per
// variant.
func BenchmarkStdioCall(b *testing.B) {
	srv := stdioServer(&testing.T{})
	m, err := New(Config{Servers: map[string]config.MCPServer{"t": srv}})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer m.Stop()
	s, _ := m.server("t")
	deadline := time.Now().Add(waitTimeout)
	var c *conn
	for c == nil {
		if time.Now().After(deadline) {
			b.Fatal("server not ready")
		}
		time.Sleep(10 * time.Millisecond)
		_, _, _, c = s.snapshot()
	}
	rec := &recorder{}
	bld := registry.NewBuilder(registry.Config{})
	if err := m.Register(bld, rec.turn()); err != nil {
		b.Fatal(err)
	}
	_, reg := bld.Build()
	d := reg.NewDispatcher(registry.DispatcherConfig{})
	args := `{"text":"bench"}`
	ctx := context.Background()

	run := func(b *testing.B, op func() error) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			if err := op(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.Run("dispatch", func(b *testing.B) {
		run(b, func() error {
			rec.mu.Lock()
			rec.started, rec.done = rec.started[:0], rec.done[:0]
			rec.mu.Unlock()
			out, err := d.Dispatch(ctx, registry.Call{CallID: "c", Name: "mcp__t__echo", Payload: registry.FunctionPayload{Arguments: args}})
			if err == nil && !out.Output.Succeeded() {
				b.Fatal(out.Output.Text)
			}
			return err
		})
	})
	b.Run("sdk", func(b *testing.B) {
		run(b, func() error {
			_, err := c.sess.CallTool(ctx, &mcpsdk.CallToolParams{Name: "echo", Arguments: json.RawMessage(args)})
			return err
		})
	})
}
