package loop

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
)

// Settings are the per-turn choices (thread settings with the turn's
// overrides applied).
type Settings struct {
	Model        string
	Provider     string
	Instructions string
	Developer    string
	Effort       string
	Summary      string
	ServiceTier  string
	Verbosity    string
	OutputSchema json.RawMessage
	Cwd          string
}

// steer is input added to a running turn by turn/steer or turn/start, or
// items thread/inject_items added (items, then input is nil).
type steer struct {
	input    []api.UserInput
	clientID *string
	items    []model.InputItem
}

// Turn is the loop's part of a thread's running turn: its identity and
// settings, its context, and the input and settings updates that reach it
// while it runs. The thread table holds it (with its own part of the turn)
// and adds input through its methods.
type Turn struct {
	ID        string
	StartedAt time.Time
	// Settings are read and changed by the turn's goroutine only, once it
	// runs (applySettings); before, by the table that reserves the turn.
	Settings Settings
	Ctx      context.Context
	Cancel   context.CancelCauseFunc
	// Done is closed when the turn's goroutine has finished (or the turn
	// was abandoned before it ran).
	Done chan struct{}
	// Stored is closed once the turn and its input are stored (or failed
	// to be, closing its input): only then does it take more.
	Stored chan struct{}
	// Root is the rootTurnId the turn was started with (a sub-agent's
	// turn names its parent's), "" when the turn is its own root.
	Root string

	mu      sync.Mutex // guards pending, preempt, closed, settingsNext
	pending []steer
	preempt context.CancelCauseFunc // cancels the model stream in flight
	closed  bool                    // the turn is ending and takes no more input
	// settingsNext is a turn/settings/update for the next model request.
	settingsNext *SettingsPatch

	// flagSet counts the server requests pending per active flag; it has
	// its own lock (taken under the thread's lock by its status).
	flagSet flagSet
}

// NewTurn returns a turn about to run: ctx is its context, cancelled with
// a cause by cancel (ErrInterrupted, ErrShutdown, ErrLeaseLost).
func NewTurn(ctx context.Context, cancel context.CancelCauseFunc, id string, started time.Time, s Settings, root string) *Turn {
	return &Turn{ID: id, StartedAt: started, Settings: s, Ctx: ctx, Cancel: cancel, Root: root,
		Done: make(chan struct{}), Stored: make(chan struct{})}
}

// The causes a turn is cancelled with, besides a failure of its own.
var (
	// ErrInterrupted ends a turn a client interrupted.
	ErrInterrupted = errors.New("interrupted by client")
	// ErrShutdown ends the turns of a daemon shutting down.
	ErrShutdown = errors.New("server shutting down")
	// ErrLeaseLost ends a turn whose thread another daemon took over.
	ErrLeaseLost = errors.New("thread lease lost: another node took the thread over")

	errPreempted = errors.New("preempted by new input")
)

// RootID is the turn's rootTurnId: the turn that led to it, or itself.
func (at *Turn) RootID() *string {
	if at.Root != "" {
		root := at.Root
		return &root
	}
	id := at.ID
	return &id
}

// Flags are the status flags of the running turn: waitingOnApproval and
// waitingOnUserInput while such a server request is pending.
func (at *Turn) Flags() []api.ThreadActiveFlag { return at.flagSet.list() }

// AddSteer queues input and abandons the model stream in flight, so that a
// fresh request carries the new input (docs/protocol.md §8.3). It reports false,
// queueing nothing, once the turn has stopped taking input.
func (at *Turn) AddSteer(input []api.UserInput, clientID *string) bool {
	<-at.Stored
	at.mu.Lock()
	if at.closed {
		at.mu.Unlock()
		return false
	}
	at.pending = append(at.pending, steer{input: input, clientID: clientID})
	preempt := at.preempt
	at.mu.Unlock()
	if preempt != nil {
		preempt(errPreempted)
	}
	return true
}

// AddInjected queues items for the running turn's next model request,
// without abandoning the one in flight. It reports false, queueing
// nothing, once the turn has stopped taking input.
func (at *Turn) AddInjected(items []model.InputItem) bool {
	<-at.Stored
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.closed {
		return false
	}
	at.pending = append(at.pending, steer{items: items})
	return true
}

// CloseInput stops the turn taking input. With ifIdle it does so only when
// no input is pending, and reports whether it did.
func (at *Turn) CloseInput(ifIdle bool) bool {
	at.mu.Lock()
	defer at.mu.Unlock()
	if ifIdle && len(at.pending) > 0 {
		return false
	}
	at.closed = true
	return true
}

func (at *Turn) takeSteers() []steer {
	at.mu.Lock()
	defer at.mu.Unlock()
	s := at.pending
	at.pending = nil
	return s
}

// SettingsPatch is a turn/settings/update waiting for the turn's next
// model request; nil fields leave the setting as it is.
type SettingsPatch struct {
	Model, Effort, Summary *string
}

// merge adds a later update over p.
func (p *SettingsPatch) merge(q SettingsPatch) {
	if q.Model != nil {
		p.Model = q.Model
	}
	if q.Effort != nil {
		p.Effort = q.Effort
	}
	if q.Summary != nil {
		p.Summary = q.Summary
	}
}

// PatchSettings queues an update for the turn's next model request; false
// once the turn has stopped making requests.
func (at *Turn) PatchSettings(p SettingsPatch) bool {
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.closed {
		return false
	}
	if at.settingsNext == nil {
		at.settingsNext = &SettingsPatch{}
	}
	at.settingsNext.merge(p)
	return true
}

// applySettings applies the queued update; only the turn's goroutine,
// the one reader of at.Settings, calls it, before each model request.
func (at *Turn) applySettings() {
	at.mu.Lock()
	p := at.settingsNext
	at.settingsNext = nil
	at.mu.Unlock()
	if p == nil {
		return
	}
	if p.Model != nil {
		at.Settings.Model = *p.Model
	}
	if p.Effort != nil {
		at.Settings.Effort = *p.Effort
	}
	if p.Summary != nil {
		at.Settings.Summary = *p.Summary
	}
}
