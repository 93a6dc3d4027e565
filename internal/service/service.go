package service

import (
	"context"
	"errors"
	"sync"
)

// Service is a long-lived part of the daemon.
//
// Start runs it: once it returns nil the service works until Stop. A
// second Start of a running service does nothing and returns nil; a
// failed Start leaves nothing running. Start's ctx bounds the start
// itself (a first query, a first connection), not the service's life.
//
// Stop ends it and returns once every goroutine it started has returned.
// It may be called at any time and more than once; every call returns
// after the first one's work is done. Before Start it does nothing (the
// service may still start); a service stopped after it started stays
// stopped: Start then returns ErrStopped.
type Service interface {
	Start(ctx context.Context) error
	Stop()
}

// ErrStopped is Start's error once Stop has been called.
var ErrStopped = errors.New("service: stopped")

// state is where a Base is in its life cycle.
type state int

const (
	stateNew state = iota
	stateStarting
	stateRunning
	stateStopped
)

// Base is the life cycle a service embeds (as a field): its Start calls
// Begin, starts its goroutines with Go and ends with Started; its Stop
// calls Base.Stop with what is left to tear down. The zero Base is new.
type Base struct {
	mu     sync.Mutex
	state  state
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// stopped is closed when the first Stop is done.
	stopped chan struct{}
}

// Begin begins a Start. run is false when the service is running or
// starting already (Start then returns nil); err is ErrStopped after Stop.
// When run, the caller goes on with its start and must end it with
// Started: ctx is the context of the goroutines it starts, which keeps
// the values of the start's context but is cancelled only by Stop.
func (b *Base) Begin(ctx context.Context) (runCtx context.Context, run bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case stateStopped:
		return nil, false, ErrStopped
	case stateStarting, stateRunning:
		return nil, false, nil
	}
	b.state = stateStarting
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return b.ctx, true, nil
}

// Go runs f in a goroutine the service owns: Stop cancels ctx and waits
// for f to return. It is called after Begin; once Stop has begun, f is
// not run.
func (b *Base) Go(f func(ctx context.Context)) {
	b.mu.Lock()
	if b.state != stateStarting && b.state != stateRunning {
		b.mu.Unlock()
		return
	}
	ctx := b.ctx
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		f(ctx)
	}()
}

// Started ends a Start that Begin let run. A nil err makes the service
// running; an error stops the goroutines it started and makes it new
// again, so that Start may be tried again. It returns err.
func (b *Base) Started(err error) error {
	b.mu.Lock()
	if b.state != stateStarting {
		// Stop came during the start: it waits for the goroutines.
		b.mu.Unlock()
		return err
	}
	if err == nil {
		b.state = stateRunning
		b.mu.Unlock()
		return nil
	}
	b.state = stateNew
	cancel := b.cancel
	b.mu.Unlock()
	cancel()
	b.wg.Wait()
	return err
}

// Running reports whether the service started and was not stopped.
func (b *Base) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == stateRunning
}

// Stop stops a service that started (or is starting): it cancels the
// goroutines' context, waits for them, then runs teardown (nil for none),
// all once; every other call waits for that first one to finish. Before
// Start it does nothing.
func (b *Base) Stop(teardown func()) {
	b.mu.Lock()
	if b.state == stateNew {
		b.mu.Unlock()
		return
	}
	if b.state == stateStopped {
		done := b.stopped
		b.mu.Unlock()
		<-done
		return
	}
	b.state = stateStopped
	b.stopped = make(chan struct{})
	cancel := b.cancel
	b.mu.Unlock()
	defer close(b.stopped)
	if cancel != nil {
		cancel()
	}
	b.wg.Wait()
	if teardown != nil {
		teardown()
	}
}
