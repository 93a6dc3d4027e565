package daemon

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/turns"
)

// tracerName is the instrumentation scope of the daemon's spans.
const tracerName = "github.com/appserver/appserver/internal/daemon"

// traceShutdownTimeout bounds the last export at shutdown: a collector
// that does not answer must not hold the daemon's exit.
const traceShutdownTimeout = 5 * time.Second

// newTracerProvider builds the provider exporting spans as cfg says, or
// returns nil when traces are off (the default): then no provider, no
// exporter and no span exist. The provider is not installed as the
// global one; only the turns Observer uses it.
func newTracerProvider(ctx context.Context, cfg config.OTel, version string) (*sdktrace.TracerProvider, error) {
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
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// tracing is the turns Observer when traces are on: the series of the
// Observer it wraps, plus a span per turn with a child per model request
// and per tool call. The turns report a request or call when it ended,
// with its duration, so its span is recorded then, back-dated to its
// start.
type tracing struct {
	turns.Observer
	tracer trace.Tracer
}

// TurnStarted implements turns.Observer: the turn's span starts and its
// context is the turn's.
func (o tracing) TurnStarted(ctx context.Context, t turns.TurnInfo) context.Context {
	ctx = o.Observer.TurnStarted(ctx, t)
	ctx, _ = o.tracer.Start(ctx, "turn", trace.WithAttributes(
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

// ModelRequest implements turns.Observer: a child span of the turn's,
// named as the GenAI conventions name an inference span.
func (o tracing) ModelRequest(ctx context.Context, s turns.ModelRequestStats) {
	o.Observer.ModelRequest(ctx, s)
	end := time.Now()
	_, span := o.tracer.Start(ctx, "chat "+s.Model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(end.Add(-s.Duration)), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", s.Provider),
			attribute.String("gen_ai.request.model", s.Model),
			attribute.String("appserver.model.outcome", s.Outcome),
			attribute.Int("appserver.model.attempts", s.Retries+1),
			attribute.Int64("gen_ai.usage.input_tokens", s.Usage.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", s.Usage.OutputTokens),
			attribute.Int64("appserver.model.cached_input_tokens", s.Usage.CachedInputTokens),
			attribute.Int64("appserver.model.reasoning_output_tokens", s.Usage.ReasoningOutputTokens),
		))
	if s.Outcome != "ok" && s.Outcome != "canceled" {
		span.SetStatus(codes.Error, s.Outcome)
	}
	span.End(trace.WithTimestamp(end))
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
