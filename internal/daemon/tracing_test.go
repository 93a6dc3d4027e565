package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/turns"
)

// TestTracesOffByDefault: the default configuration builds no tracer
// provider; the turns' Observer is the series alone, and the global
// provider is left alone.
func TestTracesOffByDefault(t *testing.T) {
	cfg := config.Default()
	tel := newTelemetry(prometheus.NewRegistry(), "v")
	var stops Stops
	tr, err := newTraces(context.Background(), cfg.OTel, "v", slog.New(slog.DiscardHandler), &stops)
	require.NoError(t, err)
	require.Nil(t, tr)
	require.Same(t, tel, turnsObserver(tel, tr))
	require.Nil(t, tr.HTTP())
	require.Nil(t, tr.Sessions())
	require.Nil(t, tr.Propagate())
	require.Nil(t, stops[StopTraces])
	_, isSDK := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	require.False(t, isSDK)
}

// TestTracesExportOverOTLPHTTP: with exporter otlp-http, the spans of a
// turn reach the configured endpoint, with the configured headers, at the
// latest when the daemon stops.
func TestTracesExportOverOTLPHTTP(t *testing.T) {
	got := make(chan *http.Request, 4)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 0 {
			got <- r
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	cfg := config.Default()
	cfg.OTel = config.OTel{Exporter: config.OTelExporterHTTP, Endpoint: collector.URL + "/v1/traces",
		Headers: map[string]string{"X-Api-Key": "k"}, ServiceName: "svc"}
	tel := newTelemetry(prometheus.NewRegistry(), "v")
	var stops Stops
	tr, err := newTraces(context.Background(), cfg.OTel, "v", slog.New(slog.DiscardHandler), &stops)
	require.NoError(t, err)
	obs := turnsObserver(tel, tr)
	require.NotNil(t, stops[StopTraces])
	ctx := obs.TurnStarted(context.Background(), turns.TurnInfo{ThreadID: "th", TurnID: "tu", Provider: "p", Model: "m"})
	obs.TurnEnded(ctx, api.TurnCompleted, time.Second)
	stops.Run()
	select {
	case r := <-got:
		require.Equal(t, "/v1/traces", r.URL.Path)
		require.Equal(t, "k", r.Header.Get("X-Api-Key"))
	case <-time.After(5 * time.Second):
		t.Fatal("no spans reached the collector")
	}
}

// collector is an OTLP/gRPC trace collector that passes on the API key
// of each export carrying spans.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	got chan string
}

func (c *collector) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if len(req.GetResourceSpans()) > 0 {
		md, _ := metadata.FromIncomingContext(ctx)
		c.got <- strings.Join(md.Get("x-api-key"), ",")
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestTracesExportOverOTLPGRPC: with exporter otlp-grpc and an http://
// endpoint (no TLS), the spans reach the collector with the headers.
func TestTracesExportOverOTLPGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	c := &collector{got: make(chan string, 4)}
	coltracepb.RegisterTraceServiceServer(srv, c)
	go srv.Serve(lis)
	defer srv.Stop()
	cfg := config.Default()
	cfg.OTel = config.OTel{Exporter: config.OTelExporterGRPC, Endpoint: "http://" + lis.Addr().String(),
		Headers: map[string]string{"x-api-key": "k"}, ServiceName: "svc"}
	var stops Stops
	tr, err := newTraces(context.Background(), cfg.OTel, "v", slog.New(slog.DiscardHandler), &stops)
	require.NoError(t, err)
	obs := turnsObserver(newTelemetry(prometheus.NewRegistry(), "v"), tr)
	ctx := obs.TurnStarted(context.Background(), turns.TurnInfo{ThreadID: "th", TurnID: "tu", Provider: "p", Model: "m"})
	obs.TurnEnded(ctx, api.TurnCompleted, time.Second)
	stops.Run()
	select {
	case key := <-c.got:
		require.Equal(t, "k", key)
	case <-time.After(5 * time.Second):
		t.Fatal("no spans reached the collector")
	}
}

// notified is a hub subscriber that signals turn/completed; the other
// notifications are dropped.
type notified chan struct{}

func (n notified) Notify(note *hub.Notification) {
	if note.Method == "turn/completed" {
		n <- struct{}{}
	}
}

func (n notified) Request(*hub.Request, int64) bool { return false }
func (n notified) Settled(*hub.Request)             {}

type fakeModels struct{ c model.Client }

func (p fakeModels) Client(string) (model.Client, error) { return p.c, nil }

// TestTurnSpans runs a turn with a tool call through the turns manager
// and the fake model: the turn's span is the parent of a span per model
// request and one for the tool call, each with its attributes.
func TestTurnSpans(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db"), Migrate: true})
	require.NoError(t, err)
	defer st.Close()
	script, err := fakemodel.ParseScript([]byte(`{"steps":[
		{"tool_calls":[{"call_id":"c1","name":"probe","arguments":{}}],"usage":{"input_tokens":7,"output_tokens":2,"total_tokens":9}},
		{"text":"done","usage":{"input_tokens":11,"output_tokens":3,"total_tokens":14}}]}`))
	require.NoError(t, err)
	fake, err := fakemodel.Start(script)
	require.NoError(t, err)
	defer fake.Close()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(ctx)
	tr := newTracesOf(tp)
	client, err := model.New(model.ProviderConfig{BaseURL: fake.URL(), MaxRetries: -1}, nil, model.WithPropagation(tr.Propagate()))
	require.NoError(t, err)
	done := make(notified, 1)
	h := hub.New(hub.Config{})
	defer h.Close()
	conn := h.NewConnID()
	h.Attach(conn, done, hub.AttachOptions{})
	m, err := turns.New(turns.Config{
		Store: st, Sink: h, Models: fakeModels{client},
		Observer: turnsObserver(newTelemetry(prometheus.NewRegistry(), "v"), tr),
		Defaults: turns.Defaults{Model: "fake-model", ModelProvider: "fake", Cwd: t.TempDir()},
		Tools: func(turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			b := registry.NewBuilder(registry.Config{})
			spec := registry.FunctionSpec{Name: "probe", Description: "probe", Parameters: registry.Object(map[string]*registry.Schema{}, nil, nil)}
			if err := b.Register(spec, registry.HandlerFunc(func(context.Context, registry.Invocation) (registry.Output, error) {
				return registry.TextOutput("ok", true), nil
			}), false); err != nil {
				return nil, nil, err
			}
			specs, reg := b.Build()
			return specs, reg, nil
		},
	})
	require.NoError(t, err)
	defer m.Stop()
	th, after, err := m.StartThread(ctx, turns.Caller{Conn: conn}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	// The request that starts the turn continues a caller's trace.
	callerTrace, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	require.NoError(t, err)
	callerSpan, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	require.NoError(t, err)
	caller := trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: callerTrace, SpanID: callerSpan, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	turn, after, err := m.StartTurn(caller, turns.Caller{Conn: conn}, api.TurnStartParams{
		ThreadID: th.Thread.ID, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "go"}},
	})
	require.NoError(t, err)
	after()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn did not complete")
	}
	// The turn's span ends just after turn/completed is sent.
	require.Eventually(t, func() bool { return len(spans.GetSpans()) == 4 }, 5*time.Second, time.Millisecond)

	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		byName[s.Name] = s
	}
	turnSpan := byName["turn"]
	require.Equal(t, callerTrace, turnSpan.SpanContext.TraceID(), "the turn continues its caller's trace")
	require.Equal(t, callerSpan, turnSpan.Parent.SpanID())
	require.Equal(t, map[attribute.Key]string{
		"appserver.thread.id": th.Thread.ID, "appserver.turn.id": turn.Turn.ID,
		"gen_ai.provider.name": "fake", "gen_ai.request.model": "fake-model", "appserver.turn.status": "completed",
	}, stringAttrs(turnSpan.Attributes))

	var requests []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.Name == "chat fake-model" {
			requests = append(requests, s)
		}
	}
	require.Len(t, requests, 2)
	tool, ok := byName["execute_tool probe"]
	require.True(t, ok)
	for _, child := range append(requests, tool) {
		require.Equal(t, callerTrace, child.SpanContext.TraceID())
		require.Equal(t, turnSpan.SpanContext.SpanID(), child.Parent.SpanID(), "%s is a child of the turn", child.Name)
		require.False(t, child.StartTime.Before(turnSpan.StartTime))
		require.False(t, child.EndTime.After(turnSpan.EndTime))
	}
	// Each model request went out with its span's trace context, so the
	// provider's spans join the trace under it.
	sent := fake.Requests()
	require.Len(t, sent, 2)
	for i, r := range sent {
		require.Equal(t, "00-"+callerTrace.String()+"-"+requests[i].SpanContext.SpanID().String()+"-01", r.Header.Get("Traceparent"))
	}
	first := attrMap(requests[0].Attributes)
	require.Equal(t, "fake", first["gen_ai.provider.name"].AsString())
	require.Equal(t, "ok", first["appserver.model.outcome"].AsString())
	require.Equal(t, int64(1), first["appserver.model.attempts"].AsInt64())
	require.Equal(t, int64(7), first["gen_ai.usage.input_tokens"].AsInt64())
	require.Equal(t, int64(2), first["gen_ai.usage.output_tokens"].AsInt64())
	require.Equal(t, int64(11), attrMap(requests[1].Attributes)["gen_ai.usage.input_tokens"].AsInt64())
	require.Equal(t, map[attribute.Key]string{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "probe", "appserver.tool.outcome": "ok",
	}, stringAttrs(tool.Attributes))
}

func attrMap(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func stringAttrs(kvs []attribute.KeyValue) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range kvs {
		if kv.Value.Type() == attribute.STRING {
			m[kv.Key] = kv.Value.AsString()
		}
	}
	return m
}

// BenchmarkTracingPerTurn is what traces add to the series for a turn of
// one model request and one tool call: four spans handed to a batching
// processor (whose exporter drops them).
func BenchmarkTracingPerTurn(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	obs := turnsObserver(newTelemetry(prometheus.NewRegistry(), "bench"), newTracesOf(tp))
	stats := turns.ModelRequestStats{Provider: "openai", Model: "gpt-5.1-codex", Outcome: "ok", Duration: time.Second,
		FirstEvent: 300 * time.Millisecond, Usage: model.Usage{InputTokens: 1000, CachedInputTokens: 800, OutputTokens: 50, ReasoningOutputTokens: 20}}
	info := turns.TurnInfo{ThreadID: "thread", TurnID: "turn", Provider: "openai", Model: "gpt-5.1-codex"}
	b.ReportAllocs()
	for b.Loop() {
		ctx := obs.TurnStarted(context.Background(), info)
		obs.ModelRequest(obs.ModelRequestStarted(ctx, stats.Provider, stats.Model), stats)
		obs.ToolCall(ctx, "shell_command", "ok", 20*time.Millisecond)
		obs.ModelRequest(obs.ModelRequestStarted(ctx, stats.Provider, stats.Model), stats)
		obs.TurnEnded(ctx, api.TurnCompleted, 2*time.Second)
	}
}
