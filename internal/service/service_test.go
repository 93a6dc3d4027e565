package service

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ticker is a service with one goroutine, as the daemon's are.
type ticker struct {
	base      Base
	starts    atomic.Int32
	teardowns atomic.Int32
	failNext  bool
}

func (t *ticker) Start(ctx context.Context) error {
	runCtx, run, err := t.base.Begin(ctx)
	if !run {
		return err
	}
	t.starts.Add(1)
	t.base.Go(func(context.Context) { <-runCtx.Done() })
	if t.failNext {
		t.failNext = false
		return t.base.Started(errors.New("first query failed"))
	}
	return t.base.Started(nil)
}

func (t *ticker) Stop() { t.base.Stop(func() { t.teardowns.Add(1) }) }

var _ Service = (*ticker)(nil)

func TestStartAndStopAreIdempotent(t *testing.T) {
	s := &ticker{}
	for range 3 {
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.starts.Load(); got != 1 {
		t.Fatalf("three Starts started it %d times", got)
	}
	if !s.base.Running() {
		t.Fatal("not running after Start")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(s.Stop)
	}
	wg.Wait()
	if got := s.teardowns.Load(); got != 1 {
		t.Fatalf("four Stops tore it down %d times", got)
	}
	if err := s.Start(t.Context()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
	if s.base.Running() {
		t.Fatal("running after Stop")
	}
}

// TestStopWaitsForTheGoroutines shows Stop returns after the service's
// goroutines, and that a second concurrent Stop waits for the first.
func TestStopWaitsForTheGoroutines(t *testing.T) {
	var b Base
	ctx, run, err := b.Begin(t.Context())
	if !run || err != nil {
		t.Fatal(run, err)
	}
	var done atomic.Bool
	b.Go(func(c context.Context) {
		<-c.Done()
		time.Sleep(20 * time.Millisecond)
		done.Store(true)
	})
	if err := b.Started(nil); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the goroutines' context ended before Stop")
	}
	release := make(chan struct{})
	first := make(chan struct{})
	go func() {
		b.Stop(func() { <-release })
		close(first)
	}()
	second := make(chan struct{})
	go func() {
		for !done.Load() {
			time.Sleep(time.Millisecond)
		}
		b.Stop(nil)
		close(second)
	}()
	select {
	case <-second:
		t.Fatal("a second Stop returned before the first's teardown")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-first
	<-second
	if !done.Load() {
		t.Fatal("Stop returned before the goroutine")
	}
}

// TestTheStartContextDoesNotEndTheService shows a service outlives the
// context of its Start, and that a failed start can be tried again.
func TestTheStartContextDoesNotEndTheService(t *testing.T) {
	s := &ticker{failNext: true}
	ctx, cancel := context.WithCancel(t.Context())
	if err := s.Start(ctx); err == nil {
		t.Fatal("the failing start succeeded")
	}
	if s.base.Running() {
		t.Fatal("running after a failed start")
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if !s.base.Running() || s.base.ctx.Err() != nil {
		t.Fatal("the start's context ended the service")
	}
	s.Stop()
	if s.base.ctx.Err() == nil {
		t.Fatal("Stop did not end the goroutines' context")
	}
}

// TestStopBeforeStart shows a Stop before Start does nothing: no
// teardown, and the service may still start (and stop).
func TestStopBeforeStart(t *testing.T) {
	s := &ticker{}
	s.Stop()
	if s.teardowns.Load() != 0 {
		t.Fatal("Stop before Start tore down")
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start after an early Stop: %v", err)
	}
	s.Stop()
	if s.teardowns.Load() != 1 || s.base.Running() {
		t.Fatal("not stopped")
	}
	var b Base
	b.Go(func(context.Context) { t.Error("Go before Begin ran") })
	b.Stop(nil)
}
