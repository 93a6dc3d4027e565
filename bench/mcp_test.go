package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpWarmup is how many calls of each kind run before measuring.
const mcpWarmup = 200

// BenchmarkMCPToolCall measures what the daemon adds to one MCP tool call
// on a local stdio server, with the server's own time taken out.
//
// The server is the MCP test server of internal/mcp (built here with go
// build, not imported); its stamp tool returns when its handler started
// and finished (Unix ns; both processes read the same wall clock). Two
// paths call it, alternating call by call so that both see the same
// machine:
//
//	daemon  a websocket client sends mcpServer/tool/call to the daemon,
//	        which calls the tool of its configured server ("t") over stdio
//	        through the Go SDK, and reads the answer: the JSON-RPC request,
//	        the daemon's lookup, timeout and metrics, the SDK client, the
//	        stdio pipes, the server's SDK framing, and the answer back over
//	        the websocket;
//	sdk     this process calls the same tool of a second instance of the
//	        server through the Go SDK over stdio directly: the SDK client,
//	        the stdio pipes and the server's SDK framing only.
//
// Per call, overhead = round trip − (handler finished − handler started).
// It reports the p50 and p99 of both (daemon-p50-us, daemon-p99-us,
// sdk-p50-us, sdk-p99-us) and the differences of those percentiles
// (added-p50-us, added-p99-us): what the daemon adds to a bare MCP call,
// its websocket hop included. The turn path (registry dispatch and the
// mcpToolCall items) is measured in-process by internal/mcp's
// BenchmarkStdioCall.
//
//	go test -run '^$' -bench MCPToolCall -benchtime 5000x ./bench/
func BenchmarkMCPToolCall(b *testing.B) {
	srvBin := buildMCPTestServer(b)
	d := startDaemon(b, "-c", fmt.Sprintf(`mcp_servers.t={command=%q, tool_timeout_sec=30}`, srvBin))
	ctx := context.Background()
	ws, err := handshake(ctx, d.ws)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.CloseNow()
	rpc := &mcpRPC{ws: ws}
	if err := rpc.waitConnected(ctx); err != nil {
		b.Fatal(err)
	}

	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bench", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcpsdk.CommandTransport{Command: exec.Command(srvBin)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	direct := func() (time.Duration, error) {
		start := time.Now()
		res, err := sess.CallTool(ctx, &mcpsdk.CallToolParams{Name: "stamp", Arguments: map[string]any{}})
		rtt := time.Since(start)
		if err != nil {
			return 0, err
		}
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return 0, err
		}
		return overhead(rtt, raw)
	}

	for range mcpWarmup {
		if _, err := rpc.stamp(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := direct(); err != nil {
			b.Fatal(err)
		}
	}
	var viaDaemon, viaSDK []time.Duration
	b.ResetTimer()
	for b.Loop() {
		o, err := rpc.stamp(ctx)
		if err != nil {
			b.Fatal(err)
		}
		viaDaemon = append(viaDaemon, o)
		if o, err = direct(); err != nil {
			b.Fatal(err)
		}
		viaSDK = append(viaSDK, o)
	}
	b.StopTimer()
	dp50, dp99 := percentiles(viaDaemon)
	sp50, sp99 := percentiles(viaSDK)
	b.ReportMetric(us(dp50), "daemon-p50-us")
	b.ReportMetric(us(dp99), "daemon-p99-us")
	b.ReportMetric(us(sp50), "sdk-p50-us")
	b.ReportMetric(us(sp99), "sdk-p99-us")
	b.ReportMetric(us(dp50-sp50), "added-p50-us")
	b.ReportMetric(us(dp99-sp99), "added-p99-us")
}

// buildMCPTestServer builds internal/mcp's test server into a temporary
// directory.
func buildMCPTestServer(b *testing.B) string {
	b.Helper()
	root, err := moduleRoot()
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "mcptestserver")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/mcp/testdata/mcptestserver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build the MCP test server: %v\n%s", err, out)
	}
	return bin
}

// overhead is a round trip minus the tool's own time, read from the stamp
// tool's structured result.
func overhead(rtt time.Duration, structured []byte) (time.Duration, error) {
	var st struct {
		InNs  int64 `json:"inNs"`
		OutNs int64 `json:"outNs"`
	}
	if err := json.Unmarshal(structured, &st); err != nil || st.InNs == 0 {
		return 0, fmt.Errorf("stamp: undecodable result %s: %v", structured, err)
	}
	return rtt - time.Duration(st.OutNs-st.InNs), nil
}

// percentiles returns the p50 and p99 of durs (sorted in place).
func percentiles(durs []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(durs)
	at := func(p float64) time.Duration {
		i := int(p*float64(len(durs))+0.5) - 1
		return durs[min(max(i, 0), len(durs)-1)]
	}
	return at(0.50), at(0.99)
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// mcpRPC is a websocket JSON-RPC client of the daemon's MCP methods.
type mcpRPC struct {
	ws   *websocket.Conn
	next int
}

// call sends one request and returns its result, skipping notifications;
// rtt is from before the write to after the read of the response.
func (r *mcpRPC) call(ctx context.Context, method string, params any) (result json.RawMessage, rtt time.Duration, err error) {
	r.next++
	id := strconv.Itoa(r.next)
	frame, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	if err := r.ws.Write(ctx, websocket.MessageText, frame); err != nil {
		return nil, 0, err
	}
	for {
		_, data, err := r.ws.Read(ctx)
		if err != nil {
			return nil, 0, err
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, 0, err
		}
		if string(m.ID) != strconv.Quote(id) {
			continue
		}
		rtt = time.Since(start)
		if len(m.Error) > 0 {
			return nil, rtt, fmt.Errorf("%s: %s", method, m.Error)
		}
		return m.Result, rtt, nil
	}
}

// stamp calls the stamp tool through the daemon and returns the overhead.
func (r *mcpRPC) stamp(ctx context.Context) (time.Duration, error) {
	res, rtt, err := r.call(ctx, "mcpServer/tool/call", map[string]any{"threadId": "bench", "server": "t", "tool": "stamp", "arguments": map[string]any{}})
	if err != nil {
		return 0, err
	}
	var out struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return 0, err
	}
	return overhead(rtt, out.StructuredContent)
}

// waitConnected polls mcpServerStatus/list until server t is connected.
func (r *mcpRPC) waitConnected(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, _, err := r.call(ctx, "mcpServerStatus/list", map[string]any{"detail": "toolsAndAuthOnly"})
		if err != nil {
			return err
		}
		var st struct {
			Data []struct {
				RuntimeStatus string `json:"runtimeStatus"`
			} `json:"data"`
		}
		if err := json.Unmarshal(res, &st); err != nil {
			return err
		}
		if len(st.Data) == 1 && st.Data[0].RuntimeStatus == "connected" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the MCP server did not connect: %s", res)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
