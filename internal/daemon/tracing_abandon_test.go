package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// quietObserver is a turns.Observer that records nothing.
type quietObserver struct{}

func (quietObserver) TurnStarted(ctx context.Context, _ turns.TurnInfo) context.Context { return ctx }
func (quietObserver) TurnEnded(context.Context, api.TurnStatus, time.Duration)          {}
func (quietObserver) TurnAbandoned(context.Context)                                     {}
func (quietObserver) ModelRequestStarted(ctx context.Context, _, _ string) context.Context {
	return ctx
}
func (quietObserver) ModelRequest(context.Context, turns.ModelRequestStats)   {}
func (quietObserver) ToolCall(context.Context, string, string, time.Duration) {}

// The span of a turn whose first write failed ends, as an error: it is
// exported rather than left open.
func TestAbandonedTurnEndsItsSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	o := tracing{Observer: quietObserver{}, tracer: tp.Tracer("test")}
	ctx := o.TurnStarted(context.Background(), turns.TurnInfo{ThreadID: "th", TurnID: "tu", Provider: "p", Model: "m", Caller: context.Background()})
	require.Empty(t, rec.Ended())
	o.TurnAbandoned(ctx)
	ended := rec.Ended()
	require.Len(t, ended, 1)
	require.Equal(t, "turn", ended[0].Name())
	require.Equal(t, codes.Error, ended[0].Status().Code)
}
