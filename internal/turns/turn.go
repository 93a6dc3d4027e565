package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/subagents"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// turnSettings are the per-turn choices (thread settings with the turn's
// overrides applied).
type turnSettings struct {
	model        string
	provider     string
	instructions string
	developer    string
	effort       string
	summary      string
	serviceTier  string
	verbosity    string
	outputSchema json.RawMessage
	cwd          string
}

// steer is input added to a running turn by turn/steer or turn/start, or
// items thread/inject_items added (items, then input is nil).
type steer struct {
	input    []api.UserInput
	clientID *string
	items    []model.InputItem
}

// activeTurn is the running turn of a thread.
type activeTurn struct {
	id        string
	startedAt time.Time
	settings  turnSettings
	ctx       context.Context
	cancel    context.CancelCauseFunc
	done      chan struct{}
	// released is closed once the turn has given its thread's lease back
	// (after done): a write that follows the turn's end on this daemon,
	// such as archiving the thread, then carries no stale fence.
	released chan struct{}
	// stored is closed once StartTurn has stored the turn and its input
	// (or failed to, closing its input): only then does it take more.
	stored chan struct{}
	// ending is set (under the thread's lock) once the turn has settled
	// and is announcing its end: the thread then reports its end status.
	ending bool
	// run is the turn's run, set before the turn is published: the
	// items of its children's ends join it (childEndItem).
	run *turnRun
	// kind is "compact" for a compaction the client asked for, which
	// takes no input ("" for every other turn).
	kind string
	// root is the rootTurnId the turn was started with (a sub-agent's
	// turn names its parent's), "" when the turn is its own root.
	root string
	// completed is set (under the thread's lock) when the turn ended
	// completed: the thread's queue then moves on.
	completed bool

	mu      sync.Mutex // guards pending, preempt, closed, settingsNext
	pending []steer
	preempt context.CancelCauseFunc // cancels the model stream in flight
	closed  bool                    // the turn is ending and takes no more input
	// settingsNext is a turn/settings/update for the next model request.
	settingsNext *settingsPatch

	// flagSet counts the server requests pending per active flag; it has
	// its own lock (taken under thread.mu by statusLocked).
	flagSet flagSet
}

// rootID is the turn's rootTurnId: the turn that led to it, or itself.
func (at *activeTurn) rootID() *string {
	if at.root != "" {
		root := at.root
		return &root
	}
	id := at.id
	return &id
}

// flags are the status flags of the running turn: waitingOnApproval and
// waitingOnUserInput while such a server request is pending.
func (at *activeTurn) flags() []api.ThreadActiveFlag { return at.flagSet.list() }

// addSteer queues input and abandons the model stream in flight, so that a
// fresh request carries the new input (docs/protocol.md §8.3). It reports false,
// queueing nothing, once the turn has stopped taking input.
func (at *activeTurn) addSteer(s steer) bool {
	<-at.stored
	at.mu.Lock()
	if at.closed {
		at.mu.Unlock()
		return false
	}
	at.pending = append(at.pending, s)
	preempt := at.preempt
	at.mu.Unlock()
	if preempt != nil {
		preempt(errPreempted)
	}
	return true
}

// closeInput stops the turn taking input. With ifIdle it does so only when
// no input is pending, and reports whether it did.
func (at *activeTurn) closeInput(ifIdle bool) bool {
	at.mu.Lock()
	defer at.mu.Unlock()
	if ifIdle && len(at.pending) > 0 {
		return false
	}
	at.closed = true
	return true
}

func (at *activeTurn) takeSteers() []steer {
	at.mu.Lock()
	defer at.mu.Unlock()
	s := at.pending
	at.pending = nil
	return s
}

var (
	errPreempted   = errors.New("preempted by new input")
	errInterrupted = errors.New("interrupted by client")
)

// turnRun is the agent loop's working state for one turn.
type turnRun struct {
	t  *thread
	at *activeTurn
	// hist is this turn's additions to the model history, persisted in
	// the turn meta; prior is the finished turns' history (a snapshot).
	hist      transcript.History
	prior     transcript.History
	specsJSON []json.RawMessage // the turn's tool specs, encoded once
	// reqInput and reqWire are requestInput's slices, reused by every
	// round (the model client does not keep a request after Stream);
	// devWire is the developer message's upstream encoding.
	reqInput []model.InputItem
	reqWire  []json.RawMessage
	devWire  json.RawMessage
	commits  roundCommitter
	// endUsage is the last response's usage commit, carried by the turn's
	// end commit (finish) instead of its own; turn goroutine only.
	endUsage *roundCommit
	final    *api.ThreadItem // the last completed agent message
	// reviewer hides the model's messages from clients and the thread's
	// items (a review turn shows its result as exitedReviewMode instead);
	// they still join the model history.
	reviewer bool
	// reviewing is set while a review's reviewer works in its fresh
	// context (startReviewer): hist is then the reviewer's, which never
	// joins the thread's history, and the turn's record keeps none of it.
	reviewing bool
	total     api.TokenUsageBreakdown
	// budget is the turn's view of the budgets, nil without any.
	budget *turnBudget
	// take is the queued entry the turn is made of, taken by the batch
	// that stores the turn; nil for any other turn.
	take *store.QueueTake
	// limits are the rate limits of the last model response, until its
	// token usage is recorded (recordUsageAsync).
	limits   *model.RateLimits
	specs    []registry.ConfiguredToolSpec
	registry *registry.Registry
	// obs is the Observer's context of the turn (TurnStarted), derived
	// from at.ctx: set before the turn's goroutine runs anything, passed
	// to the Observer's other hooks, and the parent of the turn's model
	// requests and tool calls.
	obs context.Context

	mu           sync.Mutex      // guards the fields below; tools run concurrently
	diff         string          // the turn's aggregate diff (turn/diff/updated)
	lateResolved []api.RequestID // serverRequest/resolved held until turn/completed
	finished     bool            // turn/completed was sent
}

// run is the turn's goroutine: it emits turn/started and the turn's user
// message (stored by StartTurn before it answered), runs model rounds
// until the model stops calling tools, and finishes the turn.
func (r *turnRun) run(first api.ThreadItem) {
	defer close(r.at.done)
	t := r.t
	t.broadcastStatus()
	t.emit("turn/started", api.TurnStartedNotification{ThreadID: t.id, Turn: r.apiTurn(api.TurnInProgress, nil, nil)})
	r.announceUserMessage(first)
	r.finish(r.loop())
}

// loop runs model rounds, compacting the context first when it has
// reached the auto-compact limit.
func (r *turnRun) loop() error {
	overflowCompacted := false
	for {
		if err := r.drainSteers(); err != nil {
			return err
		}
		if r.needsCompaction() {
			if err := r.compact(); err != nil {
				return err
			}
		}
		if err := r.checkBudget(); err != nil {
			return err
		}
		calls, usage, err := r.modelRound()
		if errors.Is(err, errPreempted) {
			continue
		}
		if overflowed(err) && !overflowCompacted {
			// The history outgrew the window before the limit was
			// reached (or none is set): compact once and go on.
			overflowCompacted = true
			if err := r.compact(); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := r.chargeBudget(usage); err != nil {
			return err
		}
		if len(calls) == 0 {
			c := r.recordUsageAsync(usage, false)
			// Input that arrives from here on would be lost: the turn
			// ends unless some is already pending.
			if !r.at.closeInput(true) {
				// The usage commit overlaps the next request.
				r.commits.pipeline(c)
				continue
			}
			// The last response's usage rides the turn's end commit, which
			// stores the thread's meta with it: one commit (an fsync on
			// disk) less per turn. finish announces it once that is
			// stored. A commit that stores a tool item runs as it is
			// (finish settles it first).
			if c.items > 0 {
				r.commits.pipeline(c)
			} else {
				r.endUsage = c
			}
			return nil
		}
		// As the reference does, a response's token usage is reported once
		// its tool calls have completed.
		err = r.runTools(calls)
		if err != nil {
			if perr := r.recordUsage(usage, true); perr != nil {
				return perr
			}
			return err
		}
		// The round's commit overlaps the next request (roundCommitter).
		r.commits.pipeline(r.recordUsageAsync(usage, true))
	}
}

func (r *turnRun) drainSteers() error {
	steers := r.at.takeSteers()
	if len(steers) > 0 {
		if err := r.commits.settle(); err != nil {
			return err
		}
	}
	for _, s := range steers {
		if s.items != nil {
			if err := r.addInjectedItems(s.items); err != nil {
				return fmt.Errorf("persist injected items: %w", err)
			}
			continue
		}
		if err := r.addUserMessage(s.input, s.clientID); err != nil {
			return err
		}
	}
	return nil
}

// addUserMessage persists a userMessage item of steered input, adds it to
// the model history and announces it.
func (r *turnRun) addUserMessage(input []api.UserInput, clientID *string) error {
	item, b, _, err := r.userMessage(input, clientID, false)
	if err != nil {
		return err
	}
	if err := r.t.write(r.persistCtx(), b); err != nil {
		return fmt.Errorf("persist user message: %w", err)
	}
	r.announceUserMessage(item)
	return nil
}

// userMessage prepares a userMessage item and the batch that stores it,
// and adds the input to the model history. The first one of a turn also
// creates the turn record and returns the thread preview the batch sets
// ("" when the thread has one); t.mu must not be held.
func (r *turnRun) userMessage(input []api.UserInput, clientID *string, first bool) (api.ThreadItem, *store.Batch, string, error) {
	t := r.t
	now := t.m.now()
	ms := now.UnixMilli()
	item := api.ThreadItem{
		Body:        &api.UserMessageItem{ID: newID(), ClientID: clientID, Content: input},
		StartedAtMs: &ms, CompletedAtMs: &ms,
	}
	r.hist.Add(transcript.UserInputToModel(input))

	b := &store.Batch{}
	var preview string
	if first {
		started := r.at.startedAt
		b.CreateTurns = append(b.CreateTurns, &store.Turn{
			ThreadID: t.id, ID: r.at.id, Status: store.TurnInProgress, StartedAt: &started, Meta: r.metaJSON(),
		})
		t.mu.Lock()
		if t.rec.Preview == "" {
			if p := transcript.PreviewOf(input); p != "" {
				preview = p
				b.UpdateThreads = append(b.UpdateThreads, store.ThreadPatch{ID: t.id, Preview: &p, UpdatedAt: &now, RecencyAt: &now})
			}
		}
		t.mu.Unlock()
	} else {
		b.UpdateTurns = append(b.UpdateTurns, store.TurnPatch{ThreadID: t.id, ID: r.at.id, Meta: r.metaJSON()})
	}
	sit, err := transcript.StoreItem(t.id, r.at.id, item, now)
	if err != nil {
		return item, nil, "", err
	}
	b.AppendItems = append(b.AppendItems, sit)
	return item, b, preview, nil
}

// announceUserMessage announces a stored userMessage item.
func (r *turnRun) announceUserMessage(item api.ThreadItem) {
	started := item
	started.CompletedAtMs = nil
	r.t.emit("item/started", api.ItemStartedNotification{Item: started, ThreadID: r.t.id, TurnID: r.at.id, StartedAtMs: *item.StartedAtMs})
	r.t.emit("item/completed", api.ItemCompletedNotification{Item: item, ThreadID: r.t.id, TurnID: r.at.id, CompletedAtMs: *item.CompletedAtMs})
}

// createTurn stores the turn record of a turn that starts without a user
// message (a user shell command).
func (r *turnRun) createTurn() error {
	started := r.at.startedAt
	b := &store.Batch{CreateTurns: []*store.Turn{{
		ThreadID: r.t.id, ID: r.at.id, Status: store.TurnInProgress, StartedAt: &started, Meta: r.metaJSON(),
	}}}
	if err := r.t.write(r.persistCtx(), b); err != nil {
		return fmt.Errorf("persist turn: %w", err)
	}
	return nil
}

// persistCtx bounds store writes; they are not cancelled by an interrupt,
// so that what a client has seen is always durable.
func (r *turnRun) persistCtx() context.Context { return context.WithoutCancel(r.at.ctx) }

// streamItem tracks a ThreadItem being streamed from the model.
type streamItem struct {
	item    api.ThreadItem
	text    strings.Builder
	summary []string
	content []string
}

// modelRound sends one request and handles the streamed response. It
// returns the tool calls the model made.
func (r *turnRun) modelRound() (calls []model.InputItem, usage model.Usage, err error) {
	// read holds the tool calls of this response, which may be read before
	// the previous round's commit is over (quietEvent); settleErr is that
	// commit's failure if an event found it.
	var read []model.InputItem
	var settleErr error
	defer func() {
		serr := r.commits.settle()
		if serr == nil {
			serr = settleErr
		}
		if serr != nil {
			// The previous round's commit failed: that decides the turn,
			// whatever else ended this response (new input, an interrupt,
			// a stream error), and the calls read meanwhile never run.
			r.hist.DropCalls(read)
			calls, usage, err = nil, model.Usage{}, serr
		}
	}()
	t, at := r.t, r.at
	at.applySettings()
	client, err := t.m.cfg.Models.Client(at.settings.provider)
	if err != nil {
		return nil, model.Usage{}, err
	}
	input, wire := r.requestInput()
	req := model.Request{
		Model:             at.settings.model,
		Instructions:      at.settings.instructions,
		Input:             input,
		InputWire:         wire,
		ParallelToolCalls: true,
		ReasoningEffort:   at.settings.effort,
		ReasoningSummary:  at.settings.summary,
		ServiceTier:       at.settings.serviceTier,
		Verbosity:         at.settings.verbosity,
		OutputSchema:      at.settings.outputSchema,
		LogAttrs:          []slog.Attr{slog.String("thread", t.id), slog.String("turn", at.id)},
	}
	defer r.commits.startOnSend(&req)()
	if r.specsJSON == nil {
		r.specsJSON = make([]json.RawMessage, 0, len(r.specs))
		for _, s := range r.specs {
			raw, err := json.Marshal(s.Spec)
			if err != nil {
				r.specsJSON = nil
				return nil, model.Usage{}, fmt.Errorf("encode tool spec %s: %w", s.Spec.ToolName(), err)
			}
			r.specsJSON = append(r.specsJSON, raw)
		}
	}
	req.Tools = r.specsJSON

	reqCtx := t.m.cfg.Observer.ModelRequestStarted(r.obs, at.settings.provider, at.settings.model)
	streamCtx, cancelStream := context.WithCancelCause(reqCtx)
	defer cancelStream(nil)
	at.mu.Lock()
	at.preempt = cancelStream
	steered := len(at.pending) > 0
	at.mu.Unlock()
	defer func() {
		at.mu.Lock()
		at.preempt = nil
		at.mu.Unlock()
	}()
	if steered {
		return nil, model.Usage{}, errPreempted
	}

	open := map[string]*streamItem{}
	var res model.Result
	sent := t.m.now()
	var firstEvent time.Duration
	// Deferred after the settle above, so that it runs first and sees the
	// request's own error.
	defer func() { r.observeModelRequest(reqCtx, res, err, sent, firstEvent) }()
	res, err = client.Stream(streamCtx, req, func(ev model.Event) error {
		if firstEvent == 0 {
			firstEvent = max(t.m.now().Sub(sent), time.Nanosecond)
		}
		if r.commits.unsettled() && !quietEvent(ev) {
			if err := r.commits.settle(); err != nil {
				settleErr = err
				return err
			}
		}
		switch e := ev.(type) {
		case model.OutputItemAdded:
			r.itemAdded(open, e.Item)
		case model.TextDelta:
			if si := open[e.ItemID]; si != nil {
				si.text.WriteString(e.Delta)
				if r.hidden(si) {
					break
				}
				t.emit("item/agentMessage/delta", api.ItemDeltaNotification{ThreadID: t.id, TurnID: at.id, ItemID: si.item.Body.ItemID(), Delta: e.Delta})
			}
		case model.ReasoningSummaryPartAdded:
			if si := open[e.ItemID]; si != nil {
				t.emit("item/reasoning/summaryPartAdded", api.ReasoningSummaryPartAddedNotification{ThreadID: t.id, TurnID: at.id, ItemID: si.item.Body.ItemID(), SummaryIndex: int64(e.Index)})
			}
		case model.ReasoningSummaryDelta:
			if si := open[e.ItemID]; si != nil {
				t.emit("item/reasoning/summaryTextDelta", api.ReasoningSummaryTextDeltaNotification{ThreadID: t.id, TurnID: at.id, ItemID: si.item.Body.ItemID(), Delta: e.Delta, SummaryIndex: int64(e.Index)})
			}
		case model.ReasoningTextDelta:
			if si := open[e.ItemID]; si != nil {
				t.emit("item/reasoning/textDelta", api.ReasoningTextDeltaNotification{ThreadID: t.id, TurnID: at.id, ItemID: si.item.Body.ItemID(), Delta: e.Delta, ContentIndex: int64(e.Index)})
			}
		case model.OutputItemDone:
			call, err := r.itemDone(open, e.Item)
			if err != nil {
				return err
			}
			if call != nil {
				read = append(read, *call)
			}
		}
		return nil
	})
	if err != nil {
		if cause := context.Cause(streamCtx); errors.Is(cause, errPreempted) && at.ctx.Err() == nil {
			// Abandoned for new input: calls of this response never ran, so
			// they leave the history; completed messages stay.
			r.hist.DropCalls(read)
			return nil, model.Usage{}, errPreempted
		}
		if at.ctx.Err() != nil {
			return nil, model.Usage{}, context.Cause(at.ctx)
		}
		return nil, model.Usage{}, err
	}
	r.limits = res.RateLimits
	return read, res.Usage, nil
}

// quietEvent reports whether handling ev neither announces nor writes
// anything, so that it need not wait for the previous round's commit
// (roundCommitter): the start and end of a tool call, only added to the history
// until the call runs, and the response's completion. A response that only
// calls tools is thus read whole while that commit finishes.
func quietEvent(ev model.Event) bool {
	switch e := ev.(type) {
	case model.OutputItemAdded:
		return transcript.IsToolCall(e.Item)
	case model.OutputItemDone:
		return transcript.IsToolCall(e.Item)
	case model.Completed:
		return true
	}
	return false
}

// requestInput is the full history: finished turns, then this turn, with
// developer instructions first when set; and, when every item's encoding
// is at hand, their upstream encodings (else nil: the client encodes).
// The slices are reused by the next round.
func (r *turnRun) requestInput() ([]model.InputItem, []json.RawMessage) {
	out, wire := r.reqInput[:0], r.reqWire[:0]
	defer func() { r.reqInput, r.reqWire = out, wire }()
	if d := r.at.settings.developer; d != "" {
		it := model.InputItem{Type: model.ItemMessage, Role: model.RoleDeveloper, Content: []model.ContentPart{{Type: model.PartInputText, Text: d}}}
		out = append(out, it)
		if r.devWire == nil {
			r.devWire, _ = model.WireJSON(it)
		}
		wire = append(wire, r.devWire)
	}
	out = append(out, r.prior.Items...)
	out = append(out, r.hist.Items...)
	if !r.prior.WireComplete() || !r.hist.WireComplete() {
		return out, nil
	}
	wire = append(wire, r.prior.Wire...)
	wire = append(wire, r.hist.Wire...)
	return out, wire
}

// itemAdded starts the ThreadItem of a streamed message or reasoning item.
func (r *turnRun) itemAdded(open map[string]*streamItem, it model.InputItem) {
	var body api.ThreadItemBody
	switch it.Type {
	case model.ItemMessage:
		body = &api.AgentMessageItem{ID: r.t.uniqueItemID(r.persistCtx(), it.ID, "msg")}
	case model.ItemReasoning:
		body = &api.ReasoningItem{ID: r.t.uniqueItemID(r.persistCtx(), it.ID, "rs")}
	case itemWebSearchCall:
		body = &api.WebSearchItem{ID: r.t.uniqueItemID(r.persistCtx(), it.ID, "ws")}
	default:
		return
	}
	ms := r.t.m.now().UnixMilli()
	si := &streamItem{item: api.ThreadItem{Body: body, StartedAtMs: &ms}}
	open[it.ID] = si
	if r.hidden(si) {
		return
	}
	r.t.emit("item/started", api.ItemStartedNotification{Item: si.item, ThreadID: r.t.id, TurnID: r.at.id, StartedAtMs: ms})
}

// itemDone completes a streamed item: it is added to the history and
// committed together with the history before item/completed goes out.
// Tool calls are returned for dispatch.
func (r *turnRun) itemDone(open map[string]*streamItem, it model.InputItem) (*model.InputItem, error) {
	t := r.t
	r.hist.Add(it)
	switch it.Type {
	case model.ItemFunctionCall, model.ItemCustomToolCall, model.ItemToolSearchCall:
		// Committed with its output once the call has run (recordUsage);
		// a call cut short by a crash is answered "aborted" on reload.
		return &it, nil
	case model.ItemMessage, model.ItemReasoning, itemWebSearchCall:
	default:
		return nil, r.persistHistory(nil)
	}
	si := open[it.ID]
	if si == nil {
		r.itemAdded(open, it)
		si = open[it.ID]
	}
	delete(open, it.ID)
	now := t.m.now()
	ms := now.UnixMilli()
	si.item.CompletedAtMs = &ms
	switch b := si.item.Body.(type) {
	case *api.AgentMessageItem:
		b.Text = it.Text()
		if b.Text == "" {
			b.Text = si.text.String()
		}
	case *api.ReasoningItem:
		b.Summary = partsText(it.Summary)
		b.Content = partsText(it.Content)
	case *api.WebSearchItem:
		b.Query, b.Action = webSearchOf(it.Raw)
	}
	if _, ok := si.item.Body.(*api.AgentMessageItem); ok {
		final := si.item
		r.final = &final
	}
	if r.hidden(si) {
		return nil, r.persistHistory(nil)
	}
	if err := r.persistHistory(&si.item); err != nil {
		return nil, err
	}
	t.emit("item/completed", api.ItemCompletedNotification{Item: si.item, ThreadID: t.id, TurnID: r.at.id, CompletedAtMs: ms})
	return nil, nil
}

// hidden reports whether a streamed item stays out of the client's view
// and the thread's items: a reviewer's messages.
func (r *turnRun) hidden(si *streamItem) bool {
	_, msg := si.item.Body.(*api.AgentMessageItem)
	return msg && r.reviewer
}

func partsText(parts []model.ContentPart) []string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return out
}

// metaJSON is the turn meta stored with the turn's record: its history,
// or, while a reviewer works, none of it, so that a turn reloaded after a
// crash mid-review brings nothing of the reviewer's into the thread.
func (r *turnRun) metaJSON() json.RawMessage {
	if r.reviewing {
		h := transcript.History{Root: r.hist.Root, Usage: r.hist.Usage}
		return h.MetaJSON()
	}
	return r.hist.MetaJSON()
}

// persistHistory commits the turn's history, with a completed item if one
// is given, in one atomic batch.
func (r *turnRun) persistHistory(item *api.ThreadItem) error {
	b := &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: r.t.id, ID: r.at.id, Meta: r.metaJSON()}}}
	if item != nil {
		sit, err := transcript.StoreItem(r.t.id, r.at.id, *item, r.t.m.now())
		if err != nil {
			return err
		}
		b.AppendItems = append(b.AppendItems, sit)
	}
	if err := r.t.write(r.persistCtx(), b); err != nil {
		return fmt.Errorf("persist turn history: %w", err)
	}
	return nil
}

// runTools dispatches the model's tool calls and adds their outputs to the
// history.
func (r *turnRun) runTools(calls []model.InputItem) error {
	regCalls := make([]registry.Call, 0, len(calls))
	// A tool's item takes its call's id, which the model may have used
	// before in this thread (the store keeps one item per id): such a call
	// runs under an id of its own, and its output goes back to the model
	// under the call id the model gave.
	var renamed map[string]string
	for _, c := range calls {
		call := registry.Call{CallID: c.CallID, Namespace: c.Namespace, Name: c.Name}
		if id := r.t.uniqueItemID(r.persistCtx(), c.CallID, "call"); id != c.CallID {
			if renamed == nil {
				renamed = map[string]string{}
			}
			renamed[id], call.CallID = c.CallID, id
		}
		// Tools inside a namespace spec are called as "ns.tool", unless
		// the call names its namespace itself.
		if _, ok := r.registry.Handler("", c.Name); !ok && c.Namespace == "" {
			if ns, name, found := strings.Cut(c.Name, "."); found {
				if _, ok := r.registry.Handler(ns, name); ok {
					call.Namespace, call.Name = ns, name
				}
			}
		}
		switch c.Type {
		case model.ItemCustomToolCall:
			call.Payload = registry.CustomPayload{Input: c.Input}
		case model.ItemToolSearchCall:
			// A client-executed search: the item names no tool.
			call.Name, call.Payload = registry.ToolSearchName, registry.ToolSearchPayload{Arguments: c.Arguments}
		default:
			call.Payload = registry.FunctionPayload{Arguments: c.Arguments}
		}
		regCalls = append(regCalls, call)
	}
	d := r.registry.NewDispatcher(registry.DispatcherConfig{Turn: registry.TurnContext{
		TurnID:  r.at.id,
		Cwd:     r.at.settings.cwd,
		Emitter: r, // the turn's ToolSink
	}, Observe: r.observeToolCall})
	round := make(map[string]bool, len(regCalls))
	for _, c := range regCalls {
		round[c.CallID] = true
	}
	r.commits.beginRound(round)
	outs, err := d.DispatchAll(r.obs, regCalls)
	r.commits.endRound()
	for _, o := range outs {
		if orig, ok := renamed[o.CallID]; ok {
			o.CallID = orig
		}
		r.hist.Add(transcript.ResponseItemToModel(o))
	}
	if err != nil {
		return err
	}
	if r.at.ctx.Err() != nil {
		return context.Cause(r.at.ctx)
	}
	return nil
}

// finish settles the turn: the loop's end (end) goes to the thread
// table, which commits it (thread.commitEnd).
func (r *turnRun) finish(runErr error) {
	r.t.commitEnd(r.at, r.end(runErr))
}

// turnEnd is how a turn's run ended, as the loop hands it to the thread
// table: the status and error it ends with, what its record and the
// thread keep of it, and the loop's part of announcing it (the usage that
// rides the end commit, the end's observation, the turn as turn/completed
// shows it, the serverRequest/resolved held back until then).
type turnEnd struct {
	r *turnRun
	// runErr is what ended the run (nil when it completed).
	runErr error
	// at is when the turn ended.
	at      time.Time
	status  api.TurnStatus
	turnErr *api.TurnError
	// hist is the turn's additions to the model history; meta its turn
	// record's meta (metaJSON).
	hist transcript.History
	meta json.RawMessage
	// final is the last completed agent message, nil without one.
	final *api.ThreadItem
	// usage is the last response's usage commit, stored with the end
	// instead of on its own; nil when there is none.
	usage *roundCommit
}

// end settles what the run left pending (the round's commit and any
// deferred tool item, stored and announced first), stops the turn taking
// input, and returns its end for the table to commit.
func (r *turnRun) end(runErr error) *turnEnd {
	t, at := r.t, r.at
	if err := r.commits.settle(); err != nil && runErr == nil {
		runErr = err
	}
	// Every tool round ends with a usage commit that takes the deferred
	// tool item; should one be left, it still goes out before the turn
	// ends, once stored.
	if items := r.commits.takeDeferred(); len(items) > 0 {
		sits, err := r.storeDeferred(items)
		if err == nil {
			err = t.write(r.persistCtx(), &store.Batch{AppendItems: sits})
		}
		if err == nil {
			r.announceDeferred(items)
		} else if runErr == nil {
			runErr = fmt.Errorf("persist tool item: %w", err)
		}
	}
	at.closeInput(false)
	now := t.m.now()
	status, turnErr := r.endStatus(runErr)
	return &turnEnd{r: r, runErr: runErr, at: now, status: status, turnErr: turnErr,
		hist: r.hist, meta: r.metaJSON(), final: r.final, usage: r.endUsage}
}

// failed is the status and error of a turn whose end the store did not
// take (err).
func (e *turnEnd) failed(err error) (api.TurnStatus, *api.TurnError) { return e.r.endStatus(err) }

// usageStored announces the usage that rode the end commit, now stored.
func (e *turnEnd) usageStored() {
	if e.usage != nil {
		e.usage.announce()
	}
}

// observe reports the turn's end, with the status it was told with.
func (e *turnEnd) observe(status api.TurnStatus, turnErr *api.TurnError) {
	e.r.observeEnd(status, turnErr, e.runErr, e.at)
}

// apiTurn is the ended turn as turn/completed shows it.
func (e *turnEnd) apiTurn(status api.TurnStatus, turnErr *api.TurnError) api.Turn {
	return e.r.apiTurn(status, turnErr, &e.at)
}

// completedSent sends the serverRequest/resolved notifications held back
// until turn/completed.
func (e *turnEnd) completedSent() { e.r.flushResolved() }

// commitEnd stores a turn's end with the thread's meta, then announces
// it (docs/protocol.md §8.1–§8.2): the thread's status, the error if any,
// turn/completed; the turn then lets go of the thread.
func (t *thread) commitEnd(at *activeTurn, e *turnEnd) {
	now := e.at
	status, turnErr := e.status, e.turnErr
	patch := store.TurnPatch{ThreadID: t.id, ID: at.id, Status: string(status), CompletedAt: &now, Meta: e.meta}
	if turnErr != nil {
		patch.Error, _ = json.Marshal(turnErr)
	}
	t.metaMu.Lock()
	t.mu.Lock()
	t.meta.LastTurnID = at.id
	t.stopGoalClockLocked(now)
	t.meta.SubAgent = subagents.RecordEnd(t.meta.SubAgent, at.id, status, turnErr, e.final)
	threadPatch := store.ThreadPatch{ID: t.id, UpdatedAt: &now, RecencyAt: &now, Meta: t.metaJSONLocked()}
	t.mu.Unlock()
	persistCtx := context.WithoutCancel(at.ctx)
	endErr := t.write(persistCtx, &store.Batch{UpdateTurns: []store.TurnPatch{patch}, UpdateThreads: []store.ThreadPatch{threadPatch}})
	sanitised := false
	if apperr.Is(endErr, apperr.Invalid) {
		// The store refuses what this end carries (its history or the
		// thread's meta), so no retry of it can pass: the end is stored
		// without them, so that the turn does not stay inProgress and the
		// thread takes its next turn. The history stays in memory.
		t.m.log.ErrorContext(e.r.obs, "turn end refused by the store; storing it without its history", "thread", t.id, "turn", at.id, "err", endErr)
		status, turnErr = api.TurnFailed, &api.TurnError{Message: "the turn's end could not be stored: " + apperr.MessageOf(endErr)}
		patch = store.TurnPatch{ThreadID: t.id, ID: at.id, Status: string(status), CompletedAt: &now}
		patch.Error, _ = json.Marshal(turnErr)
		threadPatch = store.ThreadPatch{ID: t.id, UpdatedAt: &now, RecencyAt: &now}
		sanitised = true
		endErr = t.write(persistCtx, &store.Batch{UpdateTurns: []store.TurnPatch{patch}, UpdateThreads: []store.ThreadPatch{threadPatch}})
	}
	switch err := endErr; {
	case err == nil:
	case errors.Is(e.runErr, errLeaseLost) || t.m.cfg.Ownership != nil && apperr.Is(err, apperr.Conflict):
		// This daemon lost the thread's lease (its heartbeat found it
		// expired, or the store refused the end's fence): the turn's end
		// is the failover's, which stores it interrupted, and so does this
		// daemon once it can. It tells its clients that end, never one it
		// could not store.
		status, turnErr = api.TurnInterrupted, nil
		patch = store.TurnPatch{ThreadID: t.id, ID: at.id, Status: string(status), CompletedAt: &now}
		t.m.ends.addSettle(t.store, patch)
	default:
		// The end the client is told is the one the store gets: the
		// commit failed, so the turn did; that status is written again
		// until the store takes it (turnEnds), so that the turn does not
		// stay inProgress in the store while the daemon runs.
		status, turnErr = e.failed(fmt.Errorf("persist turn end: %w", err))
		patch.Status = string(status)
		patch.Error, _ = json.Marshal(turnErr)
		// Any other refusal is final.
		if !permanent(err) {
			t.m.ends.add(t.store, patch)
		}
	}
	t.metaMu.Unlock()
	if endErr == nil && !sanitised {
		// Stored with the end: the thread's meta holds the usage.
		e.usageStored()
	}
	e.observe(status, turnErr)

	t.mu.Lock()
	if t.historyLoaded {
		t.history.AppendTurn(e.hist)
	}
	t.historyGen++
	// Until a turn's end is stored with its history, memory has history
	// the store lacks.
	t.historyUnsaved = endErr != nil || sanitised
	t.lastTurnFailed = status == api.TurnFailed
	t.rec.UpdatedAt, t.rec.RecencyAt = now, now
	at.ending = true
	at.completed = status == api.TurnCompleted
	t.mu.Unlock()

	// Before the end is announced and the turn lets go of the thread: a
	// wait_agent on this child, or a client that saw its turn/completed,
	// finds the note in the parent's history.
	t.m.sub.TellParent(persistCtx, subagentThread{t})

	// The turn stays active until turn/completed is out, so that a turn
	// started meanwhile waits (StartTurn waits on done) and its events never
	// precede this one's end.
	end := api.ThreadStatus{Type: api.ThreadIdle}
	if status == api.TurnFailed {
		end = api.ThreadStatus{Type: api.ThreadSystemError}
	}
	if endErr == nil {
		t.announceReadState(persistCtx)
	}
	t.m.broadcastThread(t.originator(), "thread/status/changed", api.ThreadStatusChangedNotification{ThreadID: t.id, Status: end})
	if turnErr != nil {
		t.emit("error", api.ErrorNotification{Error: *turnErr, WillRetry: false, ThreadID: t.id, TurnID: at.id})
	}
	t.emit("turn/completed", api.TurnCompletedNotification{ThreadID: t.id, Turn: e.apiTurn(status, turnErr)})
	e.completedSent()
	t.m.sub.ShowEndToParent(subagentThread{t})

	t.mu.Lock()
	t.active = nil
	t.armUnloadLocked()
	t.mu.Unlock()
	t.childTurn(false)
	if status == api.TurnInterrupted {
		t.m.sub.InterruptChildren(t.id)
	}
}

// endStatus is the status and error a turn ends with after runErr.
func (r *turnRun) endStatus(runErr error) (api.TurnStatus, *api.TurnError) {
	switch {
	case runErr == nil:
		return api.TurnCompleted, nil
	case errors.Is(runErr, errInterrupted) || errors.Is(runErr, errShutdown) || errors.Is(runErr, errLeaseLost):
		// A lost lease ends the turn as a failover does.
		return api.TurnInterrupted, nil
	}
	if turnErr, ok := budgetTurnError(runErr); ok {
		return api.TurnFailed, turnErr
	}
	msg, info := model.TurnError(runErr)
	if !isModelError(runErr) {
		r.t.m.log.ErrorContext(r.obs, "turn failed", "thread", r.t.id, "turn", r.at.id, "err", runErr)
		if apperr.Is(runErr, apperr.Unavailable) {
			// The store's own words ("storage unavailable"): the client
			// can tell an outage from a bug.
			msg = apperr.MessageOf(runErr)
		}
	}
	turnErr := &api.TurnError{Message: msg}
	var cei api.CodexErrorInfo
	if json.Unmarshal(info, &cei) == nil {
		turnErr.CodexErrorInfo = &cei
	}
	return api.TurnFailed, turnErr
}

// overflowed reports whether a request failed because its input did not
// fit the model's context window.
func overflowed(err error) bool {
	var me *model.Error
	return errors.As(err, &me) && me.Kind == model.KindContextWindowExceeded
}

func isModelError(err error) bool {
	var me *model.Error
	return errors.As(err, &me)
}

// apiTurn renders the running or finished turn for turn/started and
// turn/completed.
func (r *turnRun) apiTurn(status api.TurnStatus, turnErr *api.TurnError, completed *time.Time) api.Turn {
	started := r.at.startedAt.Unix()
	id := r.at.id
	turn := api.Turn{ID: id, RootTurnID: r.at.rootID(), Items: api.List[api.ThreadItem]{}, ItemsView: api.ItemsNotLoaded, Status: status, Error: turnErr, StartedAt: &started}
	if completed != nil {
		c := completed.Unix()
		d := completed.Sub(r.at.startedAt).Milliseconds()
		turn.CompletedAt, turn.DurationMs = &c, &d
		if status == api.TurnCompleted && r.final != nil {
			turn.Items = api.List[api.ThreadItem]{*r.final}
			turn.ItemsView = api.ItemsSummary
		}
	}
	return turn
}

// itemWebSearchCall is the output item of the hosted web_search tool: the
// provider ran the search; the daemon only records it as a webSearch item.
const itemWebSearchCall = "web_search_call"

// webSearchOf reads the query and action of a web_search_call item.
func webSearchOf(raw json.RawMessage) (string, *api.WebSearchAction) {
	var w struct {
		Action *struct {
			Type    string   `json:"type"`
			Query   string   `json:"query"`
			Queries []string `json:"queries"`
			URL     string   `json:"url"`
			Pattern string   `json:"pattern"`
		} `json:"action"`
	}
	if json.Unmarshal(raw, &w) != nil || w.Action == nil {
		return "", nil
	}
	a := w.Action
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	switch a.Type {
	case "search":
		return a.Query, &api.WebSearchAction{Type: api.WebSearchSearch, Query: opt(a.Query), Queries: a.Queries}
	case "open_page":
		return a.URL, &api.WebSearchAction{Type: api.WebSearchOpenPage, URL: opt(a.URL)}
	case "find_in_page":
		return a.Pattern, &api.WebSearchAction{Type: api.WebSearchFindInPage, URL: opt(a.URL), Pattern: opt(a.Pattern)}
	}
	return a.Query, &api.WebSearchAction{Type: api.WebSearchOther}
}
