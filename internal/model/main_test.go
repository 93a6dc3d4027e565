package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// wires lists both wire APIs; most behaviour is tested against each.
var wires = []string{model.WireAPIResponses, model.WireAPIChat}

// sleeper records retry delays instead of sleeping.
type sleeper struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeper) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

func startFake(t *testing.T, script fakemodel.Script) *fakemodel.Server {
	t.Helper()
	srv, err := fakemodel.Start(script)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

// newClient returns a client for baseURL with instant, recorded retries
// and no jitter; edit adjusts the config.
func newClient(t *testing.T, baseURL, wire string, edit func(*model.ProviderConfig)) (model.Client, *sleeper) {
	t.Helper()
	cfg := model.ProviderConfig{ID: "fake", BaseURL: baseURL, APIKey: "sk-test", WireAPI: wire, MaxRetries: 3}
	if edit != nil {
		edit(&cfg)
	}
	sl := &sleeper{}
	c, err := model.New(cfg, nil, model.WithSleep(sl.sleep), model.WithJitter(func() float64 { return 1 }))
	require.NoError(t, err)
	return c, sl
}

// run streams req and returns every event, the result and the error.
func run(t *testing.T, c model.Client, req model.Request) ([]model.Event, model.Result, error) {
	t.Helper()
	var events []model.Event
	res, err := c.Stream(context.Background(), req, func(ev model.Event) error {
		events = append(events, ev)
		return nil
	})
	return events, res, err
}

func userRequest(text string) model.Request {
	return model.Request{Model: "fake-model", Instructions: "Be brief.", Input: []model.InputItem{model.UserMessage(text)}}
}

// modelError asserts err is a *model.Error of the given kind.
func modelError(t *testing.T, err error, kind model.ErrorKind) *model.Error {
	t.Helper()
	require.Error(t, err)
	var me *model.Error
	require.True(t, errors.As(err, &me), "want *model.Error, got %T: %v", err, err)
	require.Equal(t, kind, me.Kind, "error: %v", err)
	return me
}

// body decodes a recorded request body.
func body(t *testing.T, r fakemodel.RecordedRequest) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, r.Decode(&m))
	return m
}

// jsonEq asserts that got (any JSON-encodable value) encodes like want.
func jsonEq(t *testing.T, want string, got any) {
	t.Helper()
	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, want, string(b))
}
