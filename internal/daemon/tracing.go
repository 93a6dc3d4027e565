package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/reqlog"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/turns"
)

// tracerName is the instrumentation scope of the daemon's spans.
const tracerName = "github.com/appserver/appserver/internal/daemon"

// traceShutdownTimeout bounds the last export at shutdown: a collector
// that does not answer must not hold the daemon's exit.
const traceShutdownTimeout = 5 * time.Second

// requestIDAttr is the attribute of a server span naming its request id,
// which the request's log lines carry as request_id.
const requestIDAttr = attribute.Key("appserver.request.id")

// propagator reads and writes the W3C trace context (traceparent,
// tracestate): the only propagation the daemon speaks.
var propagator = propagation.TraceContext{}

// Traces is the daemon's OpenTelemetry when [otel] configures an
// exporter: the tracer whose spans it exports, and the hooks that put
// spans around the front door's requests, the sessions' JSON-RPC
// requests, the turns and their model requests and tool calls. A nil
// *Traces (traces off, the default) gives nil hooks: then no span, no
// propagation and no exporter exist.
type Traces struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// newTraces builds the tracer provider exporting spans as cfg says, or
// returns nil when traces are off (the default). The provider is not
// installed as the global one; the daemon's hooks use it. Its shutdown,
// which exports the last spans, goes in stops.
func newTraces(ctx context.Context, cfg config.OTel, version string, log *slog.Logger, stops *Stops) (*Traces, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch cfg.Exporter {
	case config.OTelExporterHTTP:
		opts := []otlptracehttp.Option{otlptracehttp.WithHeaders(cfg.Headers)}
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	case config.OTelExporterGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithHeaders(cfg.Headers)}
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("otel exporter %s: %w", cfg.Exporter, err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", cfg.ServiceName),
		attribute.String("service.version", version),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	stops[StopTraces] = func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("exporting the last spans", "err", err)
		}
	}
	return newTracesOf(tp), nil
}

// newTracesOf is the daemon's tracing through tp.
func newTracesOf(tp *sdktrace.TracerProvider) *Traces {
	return &Traces{tp: tp, tracer: tp.Tracer(tracerName)}
}

// continueTrace returns ctx with the span context of from as its current
// span, so that spans started from it continue from's trace; ctx as it
// is when from has none. Only the span context crosses: from may be a
// request's context that ended.
func continueTrace(ctx, from context.Context) context.Context {
	if from == nil {
		return ctx
	}
	sc := trace.SpanContextFromContext(from)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}

// HTTP returns the front door's tracing middleware (frontdoor.Config.
// Tracing): a server span per request, continuing the trace of its W3C
// traceparent header, named by its method and route pattern, with the
// request's id; nil when traces are off. Nothing of the query or of the
// headers but User-Agent is recorded.
func (t *Traces) HTTP() func(http.Handler) http.Handler {
	if t == nil {
		return nil
	}
	mw := otelhttp.NewMiddleware("http",
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithPropagators(propagator),
		otelhttp.WithMeterProvider(noopmetric.NewMeterProvider()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return httpSpanName(r) }),
	)
	return func(next http.Handler) http.Handler {
		return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			span := trace.SpanFromContext(r.Context())
			span.SetAttributes(requestIDAttr.String(reqlog.ID(r.Context())))
			next.ServeHTTP(w, r)
			if route := routePattern(r); route != "" {
				span.SetName(r.Method + " " + route)
				span.SetAttributes(semconv.HTTPRoute(route))
			}
		}))
	}
}

// httpSpanName names a server span as the HTTP conventions do: method and
// route pattern, or the method alone before routing.
func httpSpanName(r *http.Request) string {
	if route := routePattern(r); route != "" {
		return r.Method + " " + route
	}
	return r.Method
}

// routePattern is the route chi matched for r so far.
func routePattern(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		return rc.RoutePattern()
	}
	return ""
}

// Sessions returns the JSON-RPC sessions' tracer (server.Config.Tracer),
// nil when traces are off.
func (t *Traces) Sessions() server.Tracer {
	if t == nil {
		return nil
	}
	return sessionTracer{t.tracer}
}

// sessionTracer puts a server span around each JSON-RPC request of a
// session. When the upgrade request that opened the session carried a
// traceparent, the requests' spans are children of the upgrade's span,
// in the caller's trace; otherwise each starts a trace of its own, linked
// to the upgrade's span, so that a session open for hours (an editor's)
// is not one trace.
type sessionTracer struct{ tracer trace.Tracer }

// sessionLinkKey holds, in a session's context, the span context of the
// upgrade its requests' spans link to.
type sessionLinkKey struct{}

// Session implements server.Tracer.
func (s sessionTracer) Session(base, upgrade context.Context) context.Context {
	span := trace.SpanFromContext(upgrade)
	sc := span.SpanContext()
	if !sc.IsValid() {
		return base
	}
	if ro, ok := span.(sdktrace.ReadOnlySpan); ok && !ro.Parent().IsValid() {
		return context.WithValue(base, sessionLinkKey{}, sc)
	}
	return trace.ContextWithSpanContext(base, sc)
}

// Request implements server.Tracer: a span named by the method, with the
// RPC conventions' attributes, and the error code of an error answer.
func (s sessionTracer) Request(ctx context.Context, method, id string) (context.Context, func(int64, string)) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		semconv.RPCSystemNameJSONRPC,
		semconv.RPCMethod(method),
		semconv.JSONRPCRequestID(id),
		requestIDAttr.String(reqlog.ID(ctx)),
	)}
	if link, ok := ctx.Value(sessionLinkKey{}).(trace.SpanContext); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: link}))
	}
	ctx, span := s.tracer.Start(ctx, method, opts...)
	return ctx, func(code int64, message string) {
		if code != 0 {
			c := strconv.FormatInt(code, 10)
			span.SetAttributes(semconv.RPCResponseStatusCode(c), semconv.ErrorTypeKey.String(c))
			span.SetStatus(codes.Error, message)
		}
		span.End()
	}
}

// Propagate writes the W3C trace context of ctx's span into h, for the
// model clients (model.RouterConfig.Propagate); nil when traces are off.
func (t *Traces) Propagate() func(ctx context.Context, h http.Header) {
	if t == nil {
		return nil
	}
	return func(ctx context.Context, h http.Header) { propagator.Inject(ctx, propagation.HeaderCarrier(h)) }
}

// turnsObserver is the turns manager's Observer: the series, with spans
// when t traces.
func turnsObserver(tel *telemetry, t *Traces) turns.Observer {
	if t == nil {
		return tel
	}
	return tracing{Observer: tel, tracer: t.tracer}
}

// tracing is the turns Observer when traces are on: the series of the
// Observer it wraps, plus a span per turn, a child of the span of the
// request that started it, with a child per model request (whose HTTP
// requests carry its traceparent) and per tool call. A tool call is
// reported when it ended, with its duration, so its span is recorded
// then, back-dated to its start.
type tracing struct {
	turns.Observer
	tracer trace.Tracer
}

// TurnStarted implements turns.Observer: the turn's span starts, in the
// trace of the request that started the turn, and its context is the
// turn's.
func (o tracing) TurnStarted(ctx context.Context, t turns.TurnInfo) context.Context {
	ctx = o.Observer.TurnStarted(ctx, t)
	ctx, _ = o.tracer.Start(continueTrace(ctx, t.Caller), "turn", trace.WithAttributes(
		attribute.String("appserver.thread.id", t.ThreadID),
		attribute.String("appserver.turn.id", t.TurnID),
		attribute.String("gen_ai.provider.name", t.Provider),
		attribute.String("gen_ai.request.model", t.Model),
	))
	return ctx
}

// TurnEnded implements turns.Observer: the turn's span ends with its
// status.
func (o tracing) TurnEnded(ctx context.Context, status api.TurnStatus, d time.Duration) {
	o.Observer.TurnEnded(ctx, status, d)
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String("appserver.turn.status", string(status)))
	if status == api.TurnFailed {
		span.SetStatus(codes.Error, "turn failed")
	}
	span.End()
}

// TurnAbandoned implements turns.Observer: the span of a turn that never
// was (its first write failed) ends as an error.
func (o tracing) TurnAbandoned(ctx context.Context) {
	o.Observer.TurnAbandoned(ctx)
	span := trace.SpanFromContext(ctx)
	span.SetStatus(codes.Error, "turn not started: its first write failed")
	span.End()
}

// ModelRequestStarted implements turns.Observer: a child span of the
// turn's, named as the GenAI conventions name an inference span; the
// model client sends the request under it.
func (o tracing) ModelRequestStarted(ctx context.Context, provider, model string) context.Context {
	ctx = o.Observer.ModelRequestStarted(ctx, provider, model)
	ctx, _ = o.tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", provider),
		attribute.String("gen_ai.request.model", model),
	))
	return ctx
}

// ModelRequest implements turns.Observer: the request's span ends with
// its outcome and usage.
func (o tracing) ModelRequest(ctx context.Context, s turns.ModelRequestStats) {
	o.Observer.ModelRequest(ctx, s)
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(
		attribute.String("appserver.model.outcome", s.Outcome),
		attribute.Int("appserver.model.attempts", s.Retries+1),
		attribute.Int64("gen_ai.usage.input_tokens", s.Usage.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", s.Usage.OutputTokens),
		attribute.Int64("appserver.model.cached_input_tokens", s.Usage.CachedInputTokens),
		attribute.Int64("appserver.model.reasoning_output_tokens", s.Usage.ReasoningOutputTokens),
	)
	if s.Outcome != "ok" && s.Outcome != "canceled" {
		span.SetStatus(codes.Error, s.Outcome)
	}
	span.End()
}

// ToolCall implements turns.Observer: a child span of the turn's.
func (o tracing) ToolCall(ctx context.Context, tool, outcome string, d time.Duration) {
	o.Observer.ToolCall(ctx, tool, outcome, d)
	end := time.Now()
	_, span := o.tracer.Start(ctx, "execute_tool "+tool, trace.WithTimestamp(end.Add(-d)), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", tool),
		attribute.String("appserver.tool.outcome", outcome),
	))
	if outcome != registry.CallOK {
		span.SetStatus(codes.Error, outcome)
	}
	span.End(trace.WithTimestamp(end))
}

// traceID is the trace id of the span ctx carries, "" when it carries
// none: the audit log's entries name the request's trace by it.
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
