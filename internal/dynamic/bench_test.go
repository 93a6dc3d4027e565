package dynamic

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// benchRouter is the cheapest realistic transport: Offer hands the call to
// a connection goroutine over a channel (the websocket writer's queue), and
// that goroutine answers at once (a client that takes no time), so what is
// measured is the daemon's own round trip.
type benchRouter struct {
	inbox chan *Pending
	done  chan struct{}
	res   api.DynamicToolCallResult
}

func newBenchRouter() *benchRouter {
	r := &benchRouter{
		inbox: make(chan *Pending, 1024),
		done:  make(chan struct{}),
		res: api.DynamicToolCallResult{
			ContentItems: api.List[api.DynamicToolCallOutputContentItem]{{Type: api.ContentInputText, Text: "ok"}},
			Success:      true,
		},
	}
	go func() {
		defer close(r.done)
		for p := range r.inbox {
			p.Resolve(r.res)
		}
	}()
	return r
}

func (r *benchRouter) Offer(_ context.Context, p *Pending) error {
	r.inbox <- p
	return nil
}

func (r *benchRouter) Withdraw(*Pending, Outcome) {}

func (r *benchRouter) close() {
	close(r.inbox)
	<-r.done
}

type latencies []time.Duration

func (l latencies) quantile(q float64) time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

type memSnapshot struct {
	goroutines int
	heap       uint64
}

func snapshot() memSnapshot {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnapshot{goroutines: runtime.NumGoroutine(), heap: ms.HeapAlloc}
}

// roundTrips runs len(lat) sequential calls on b and records their
// latencies in lat (allocated by the caller, so that it does not count as
// heap growth).
func roundTrips(tb testing.TB, b *Broker, lat latencies) {
	tb.Helper()
	n := len(lat)
	ctx := context.Background()
	args := json.RawMessage(`{"city":"Paris"}`)
	for i := range n {
		start := time.Now()
		_, err := b.Call(ctx, CallRequest{ThreadID: "th", TurnID: "turn", CallID: "call-" + strconv.Itoa(i), Tool: "lookup", Arguments: args})
		lat[i] = time.Since(start)
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// TestRoundTripOverhead makes 100,000 calls through the broker (Call →
// Router.Offer → connection goroutine → Resolve → return), reports p50/p99
// and checks that neither goroutines nor heap grow.
func TestRoundTripOverhead(t *testing.T) {
	leakCheck(t)
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	r := newBenchRouter()
	defer r.close()
	b := NewBroker(BrokerConfig{Router: r})
	roundTrips(t, b, make(latencies, 1000)) // warm up

	lat := make(latencies, n)
	before := snapshot()
	roundTrips(t, b, lat)
	after := snapshot()

	p50, p99, pmax := lat.quantile(0.50), lat.quantile(0.99), lat.quantile(1)
	t.Logf("%d calls: p50=%v p99=%v max=%v (race=%v)", n, p50, p99, pmax, raceEnabled)
	t.Logf("goroutines before=%d after=%d; heap before=%d B after=%d B (delta %+d B)",
		before.goroutines, after.goroutines, before.heap, after.heap, int64(after.heap)-int64(before.heap))
	assert.Equal(t, 0, b.Len(), "no pending call left")
	assert.Equal(t, before.goroutines, after.goroutines, "no goroutine growth")
	assert.Less(t, int64(after.heap)-int64(before.heap), int64(1<<20), "no heap growth over %d calls", n)
	if !raceEnabled {
		assert.Less(t, p99, time.Millisecond, "p99 round-trip overhead target")
	}
}

// BenchmarkBrokerRoundTrip measures one call through the broker with a
// connection goroutine that answers at once.
func BenchmarkBrokerRoundTrip(b *testing.B) {
	r := newBenchRouter()
	defer r.close()
	br := NewBroker(BrokerConfig{Router: r})
	lat := make(latencies, 0, 1<<20)
	before := snapshot()
	ctx := context.Background()
	args := json.RawMessage(`{"city":"Paris"}`)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		start := time.Now()
		if _, err := br.Call(ctx, CallRequest{ThreadID: "th", TurnID: "turn", CallID: "call-" + strconv.Itoa(i), Tool: "lookup", Arguments: args}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	after := snapshot()
	b.ReportMetric(float64(lat.quantile(0.50).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat.quantile(0.99).Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(after.goroutines-before.goroutines), "goroutine-delta")
	b.ReportMetric(float64(int64(after.heap)-int64(before.heap)), "heap-delta-B")
}

// BenchmarkHandlerRoundTrip measures what the issue calls the daemon's
// round trip: from the model's tool call entering the registry dispatcher
// to the output item coming back, with argument validation, the
// dynamicToolCall item events (to a discarding emitter) and the broker, and
// a client that answers at once.
func BenchmarkHandlerRoundTrip(b *testing.B) {
	r := newBenchRouter()
	defer r.close()
	br := NewBroker(BrokerConfig{Router: r})
	var specs []api.DynamicToolSpec
	if err := json.Unmarshal([]byte(weatherTools), &specs); err != nil {
		b.Fatal(err)
	}
	tools, err := Validate(specs, Options{})
	if err != nil {
		b.Fatal(err)
	}
	builder := registry.NewBuilder(registry.Config{})
	if err := tools.AddTo(builder, NewHandler(HandlerConfig{ThreadID: "th", Tools: tools, Broker: br, Items: discardItems{}})); err != nil {
		b.Fatal(err)
	}
	_, reg := builder.Build()
	d := reg.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{TurnID: "turn"}})
	ctx := context.Background()
	lat := make(latencies, 0, 1<<20)
	before := snapshot()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		start := time.Now()
		item, err := d.Dispatch(ctx, registry.Call{CallID: fmt.Sprint("call-", i), Name: "lookup_weather",
			Payload: registry.FunctionPayload{Arguments: `{"city":"Paris","days":3}`}})
		if err != nil || !item.Output.Succeeded() {
			b.Fatal(err, item.Output.Text)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	after := snapshot()
	b.ReportMetric(float64(lat.quantile(0.50).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat.quantile(0.99).Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(after.goroutines-before.goroutines), "goroutine-delta")
	b.ReportMetric(float64(int64(after.heap)-int64(before.heap)), "heap-delta-B")
}

type discardItems struct{}

func (discardItems) ItemStarted(api.ThreadItem)        {}
func (discardItems) ItemCompletedFinal(api.ThreadItem) {}

func TestBenchRouterQuantile(t *testing.T) {
	l := latencies{3, 1, 2}
	require.Equal(t, time.Duration(2), l.quantile(0.5))
	require.Equal(t, time.Duration(3), l.quantile(1))
}
