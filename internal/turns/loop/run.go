package loop

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
	"github.com/appserver/appserver/internal/turns/transcript"
)

// Run is the agent loop's working state for one turn.
type Run struct {
	d        *Deps
	t        Thread
	threadID string
	at       *Turn
	// hist is this turn's additions to the model history, persisted in
	// the turn meta; prior is the finished turns' history (a snapshot).
	hist      transcript.History
	prior     transcript.History
	specsJSON []json.RawMessage // the turn's tool specs, encoded once
	// reqInput and reqWire are requestInput's slices, reused by every
	// round (the model client does not keep a request after Stream) and,
	// through the thread, by the thread's next turn (UseRequestBuffers,
	// End.RequestBuffers): each holds the whole history, which grows with
	// the thread, and building them afresh every turn was half of the
	// bytes a plain turn allocated on a thread of a few hundred turns
	// (BenchmarkEventLogCost's allocation profile, 2026-12-05); devWire
	// is the developer message's upstream encoding.
	reqInput []model.InputItem
	reqWire  []json.RawMessage
	devWire  json.RawMessage
	commits  roundCommitter
	// endUsage is the last response's usage commit, carried by the turn's
	// end commit (End) instead of its own; turn goroutine only.
	endUsage *roundCommit
	// streamed is the response's last completed message, reasoning or web
	// search item, not stored nor announced yet: the next item's start or
	// the response's end stores it (flushStreamed), or, when the response
	// ends the turn, the turn's end commit takes it (one commit less a
	// plain turn). Turn goroutine only.
	streamed *deferredItem
	final    *api.ThreadItem // the last completed agent message
	// reviewer hides the model's messages from clients and the thread's
	// items (a review turn shows its result as exitedReviewMode instead);
	// they still join the model history.
	reviewer bool
	// record is the turn's record in the batch that creates it, whose Seq
	// the store fills in once it is written (Seq).
	record *store.Turn
	// reviewing is set while a review's reviewer works in its fresh
	// context (StartReviewer): hist is then the reviewer's, which never
	// joins the thread's history, and the turn's record keeps none of it.
	reviewing bool
	// budget is the turn's view of the budgets, nil without any.
	budget *Budget
	// limits are the rate limits of the last model response, until its
	// token usage is recorded (recordUsageAsync).
	limits   *model.RateLimits
	specs    []registry.ConfiguredToolSpec
	registry *registry.Registry
	// obs is the Observer's context of the turn (TurnStarted), derived
	// from at.Ctx: set (SetObserved) before the turn's goroutine runs
	// anything, passed to the Observer's other hooks, and the parent of
	// the turn's model requests and tool calls.
	obs context.Context
	// first is the first commit of a turn run by RunInputOverlapped, nil
	// otherwise.
	first *FirstCommit
	// holding is set while the turn goroutine reads a response before
	// its first commit has settled (holdable); turn goroutine only.
	holding bool
	holdMu  sync.Mutex // guards held and heldOut
	// held are the announcements made while holding, which the turn's
	// first announcement sends after its own (sendHeld) or a failed
	// first commit drops (settle); heldOut is set once it has run.
	held    []heldNote
	heldOut bool

	mu           sync.Mutex      // guards the fields below; tools run concurrently
	diff         string          // the turn's aggregate diff (turn/diff/updated)
	lateResolved []api.RequestID // serverRequest/resolved held until turn/completed
	finished     bool            // turn/completed was sent
}

// RunInput is the goroutine of a turn started by user input: it emits
// turn/started and the turn's user message (first, stored before the turn
// was acknowledged), runs model rounds until the model stops calling
// tools, and finishes the turn.
func (r *Run) RunInput(first api.ThreadItem) {
	defer close(r.at.Done)
	r.announceStart(first)
	r.finish(r.loop())
}

// loop runs model rounds, compacting the context first when it has
// reached the auto-compact limit.
func (r *Run) loop() error {
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
			// The response's last item, not stored yet, goes with its usage
			// and the turn's history.
			c := r.recordUsageAsync(usage, r.takeStreamed())
			// Input that arrives from here on would be lost: the turn
			// ends unless some is already pending.
			if !r.at.CloseInput(true) {
				// The usage commit overlaps the next request.
				r.commits.pipeline(c)
				continue
			}
			// The last response's usage, with its last item, rides the
			// turn's end commit, which stores the thread's meta and the
			// turn's history with them: a plain turn commits twice (its
			// user message, its end). The end announces them once stored.
			r.endUsage = c
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

func (r *Run) drainSteers() error {
	steers := r.at.takeSteers()
	if len(steers) > 0 {
		if err := r.settle(); err != nil {
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
func (r *Run) addUserMessage(input []api.UserInput, clientID *string) error {
	item, b, _, err := r.userMessage(input, clientID, false)
	if err != nil {
		return err
	}
	if err := r.t.Write(r.persistCtx(), b); err != nil {
		return fmt.Errorf("persist user message: %w", err)
	}
	r.announceUserMessage(item)
	return nil
}

// userMessage prepares a userMessage item and the batch that stores it,
// and adds the input to the model history. The first one of a turn also
// creates the turn record and returns the thread preview the batch sets
// ("" when the thread has one); the thread's lock must not be held.
func (r *Run) userMessage(input []api.UserInput, clientID *string, first bool) (api.ThreadItem, *store.Batch, string, error) {
	t := r.t
	now := r.d.Now()
	ms := now.UnixMilli()
	item := api.ThreadItem{
		Body:        &api.UserMessageItem{ID: newID(), ClientID: clientID, Content: input},
		StartedAtMs: &ms, CompletedAtMs: &ms,
	}
	r.hist.Add(transcript.UserInputToModel(input))

	b := &store.Batch{}
	var preview string
	if first {
		started := r.at.StartedAt
		r.record = &store.Turn{
			ThreadID: r.threadID, ID: r.at.ID, Status: store.TurnInProgress, StartedAt: &started, Meta: r.metaJSON(),
		}
		b.CreateTurns = append(b.CreateTurns, r.record)
		if t.NeedsPreview() {
			if p := transcript.PreviewOf(input); p != "" {
				preview = p
				b.UpdateThreads = append(b.UpdateThreads, store.ThreadPatch{ID: r.threadID, Preview: &p, UpdatedAt: &now, RecencyAt: &now})
			}
		}
	} else {
		b.UpdateTurns = append(b.UpdateTurns, store.TurnPatch{ThreadID: r.threadID, ID: r.at.ID, Meta: r.metaJSON()})
	}
	sit, err := transcript.StoreItem(r.threadID, r.at.ID, item, now)
	if err != nil {
		return item, nil, "", err
	}
	b.AppendItems = append(b.AppendItems, sit)
	return item, b, preview, nil
}

// FirstMessage prepares the first user message of a turn started by
// input, after the items injected while the thread was idle: the item,
// the batch that creates the turn record with it, and the thread preview
// the batch sets ("" when the thread has one). The table stores the batch
// before the turn is acknowledged; the turn announces the item once it
// runs (RunInput).
func (r *Run) FirstMessage(injected []model.InputItem, input []api.UserInput, clientID *string) (api.ThreadItem, *store.Batch, string, error) {
	r.hist.Add(injected...)
	return r.userMessage(input, clientID, true)
}

// addInjectedItems adds injected items to the turn's model history and
// stores it.
func (r *Run) addInjectedItems(items []model.InputItem) error {
	r.hist.Add(items...)
	b := &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: r.threadID, ID: r.at.ID, Meta: r.metaJSON()}}}
	return r.t.Write(r.persistCtx(), b)
}

// announceUserMessage announces a stored userMessage item.
func (r *Run) announceUserMessage(item api.ThreadItem) {
	started := item
	started.CompletedAtMs = nil
	r.t.Emit("item/started", api.ItemStartedNotification{Item: started, ThreadID: r.threadID, TurnID: r.at.ID, StartedAtMs: *item.StartedAtMs})
	r.t.Emit("item/completed", api.ItemCompletedNotification{Item: item, ThreadID: r.threadID, TurnID: r.at.ID, CompletedAtMs: *item.CompletedAtMs})
}

// CreateTurn stores the turn record of a turn that starts without a user
// message (a user shell command, a review, a compaction).
func (r *Run) CreateTurn() error {
	started := r.at.StartedAt
	r.record = &store.Turn{
		ThreadID: r.threadID, ID: r.at.ID, Status: store.TurnInProgress, StartedAt: &started, Meta: r.metaJSON(),
	}
	if err := r.t.Write(r.persistCtx(), &store.Batch{CreateTurns: []*store.Turn{r.record}}); err != nil {
		return fmt.Errorf("persist turn: %w", err)
	}
	return nil
}

// Seq is the turn's position in its thread once its record is stored (the
// store fills it in on write), 0 before or when the store gave none. The
// caller reads it after the write that created the record returned.
func (r *Run) Seq() int64 {
	if r.record == nil {
		return 0
	}
	return r.record.Seq
}

// persistCtx bounds store writes; they are not cancelled by an interrupt,
// so that what a client has seen is always durable.
func (r *Run) persistCtx() context.Context { return context.WithoutCancel(r.at.Ctx) }

// streamItem tracks a ThreadItem being streamed from the model.
type streamItem struct {
	item    api.ThreadItem
	text    strings.Builder
	summary []string
	content []string
}

// modelRound sends one request and handles the streamed response. It
// returns the tool calls the model made.
func (r *Run) modelRound() (calls []model.InputItem, usage model.Usage, err error) {
	// read holds the tool calls of this response, which may be read before
	// the previous round's commit is over (quietEvent); settleErr is that
	// commit's failure if an event found it.
	var read []model.InputItem
	var settleErr error
	defer func() {
		serr := r.settle()
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
	at := r.at
	at.applySettings()
	client, err := r.d.Models.Client(at.Settings.Provider)
	if err != nil {
		return nil, model.Usage{}, err
	}
	input, wire := r.requestInput()
	req := model.Request{
		Model:             at.Settings.Model,
		Instructions:      at.Settings.Instructions,
		Input:             input,
		InputWire:         wire,
		ParallelToolCalls: true,
		ReasoningEffort:   at.Settings.Effort,
		ReasoningSummary:  at.Settings.Summary,
		ServiceTier:       at.Settings.ServiceTier,
		Verbosity:         at.Settings.Verbosity,
		OutputSchema:      at.Settings.OutputSchema,
		LogAttrs:          []slog.Attr{slog.String("thread", r.threadID), slog.String("turn", at.ID)},
	}
	defer r.commits.startOnSend(&req)()
	if r.specsJSON == nil {
		r.specsJSON = make([]json.RawMessage, 0, len(r.specs))
		for _, s := range r.specs {
			// Every spec writes its own compact JSON, which json.Marshal
			// would only check and copy again (about 9 of 11 µs a spec,
			// BenchmarkFunctionSpecMarshal in internal/registry); a
			// static spec's was written once (registry.Static).
			raw, err := registry.EncodeSpec(s.Spec)
			if err != nil {
				r.specsJSON = nil
				return nil, model.Usage{}, fmt.Errorf("encode tool spec %s: %w", s.Spec.ToolName(), err)
			}
			r.specsJSON = append(r.specsJSON, raw)
		}
	}
	req.Tools = r.specsJSON

	reqCtx := r.d.Observer.ModelRequestStarted(r.obs, at.Settings.Provider, at.Settings.Model)
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
	sent := r.d.Now()
	var firstEvent time.Duration
	// Deferred after the settle above, so that it runs first and sees the
	// request's own error.
	defer func() {
		if r.abandoned() {
			// The turn never was (its first commit failed): its request
			// is not reported either.
			return
		}
		r.observeModelRequest(reqCtx, res, err, sent, firstEvent)
	}()
	res, err = client.Stream(streamCtx, req, func(ev model.Event) error {
		if firstEvent == 0 {
			firstEvent = max(r.d.Now().Sub(sent), time.Nanosecond)
		}
		if r.commits.unsettled() && !r.quietEvent(ev) {
			if r.holdable(ev) {
				r.holding = true
			} else if err := r.settle(); err != nil {
				settleErr = err
				return err
			}
		}
		switch e := ev.(type) {
		case model.OutputItemAdded:
			// The item completed before this one is stored and announced
			// before this one starts.
			if err := r.flushStreamed(); err != nil {
				return err
			}
			r.itemAdded(open, e.Item)
		case model.TextDelta:
			if si := open[e.ItemID]; si != nil {
				si.text.WriteString(e.Delta)
				if r.hidden(si) {
					break
				}
				r.emit("item/agentMessage/delta", api.ItemDeltaNotification{ThreadID: r.threadID, TurnID: at.ID, ItemID: si.item.Body.ItemID(), Delta: e.Delta})
			}
		case model.ReasoningSummaryPartAdded:
			if si := open[e.ItemID]; si != nil {
				r.emit("item/reasoning/summaryPartAdded", api.ReasoningSummaryPartAddedNotification{ThreadID: r.threadID, TurnID: at.ID, ItemID: si.item.Body.ItemID(), SummaryIndex: int64(e.Index)})
			}
		case model.ReasoningSummaryDelta:
			if si := open[e.ItemID]; si != nil {
				r.emit("item/reasoning/summaryTextDelta", api.ReasoningSummaryTextDeltaNotification{ThreadID: r.threadID, TurnID: at.ID, ItemID: si.item.Body.ItemID(), Delta: e.Delta, SummaryIndex: int64(e.Index)})
			}
		case model.ReasoningTextDelta:
			if si := open[e.ItemID]; si != nil {
				r.emit("item/reasoning/textDelta", api.ReasoningTextDeltaNotification{ThreadID: r.threadID, TurnID: at.ID, ItemID: si.item.Body.ItemID(), Delta: e.Delta, ContentIndex: int64(e.Index)})
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
	if r.holding {
		// Before anything below writes: what was held has gone out, or
		// the turn never was.
		if serr := r.settle(); serr != nil {
			settleErr = serr
			return nil, model.Usage{}, serr
		}
	}
	if settleErr == nil && (err != nil || len(read) > 0) {
		// A response that calls tools announces its completed items
		// before the calls run; one that failed keeps them, stored.
		if ferr := r.flushStreamed(); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		if cause := context.Cause(streamCtx); errors.Is(cause, errPreempted) && at.Ctx.Err() == nil {
			// Abandoned for new input: calls of this response never ran, so
			// they leave the history; completed messages stay.
			r.hist.DropCalls(read)
			return nil, model.Usage{}, errPreempted
		}
		if at.Ctx.Err() != nil {
			return nil, model.Usage{}, context.Cause(at.Ctx)
		}
		return nil, model.Usage{}, err
	}
	r.limits = res.RateLimits
	return read, res.Usage, nil
}

// holdable reports whether the turn goroutine may handle ev, which is not
// quiet, before the pending commit has settled, holding what it announces
// until then (emit). Only the turn's first commit (RunInputOverlapped) is
// read past: a quick model's answer arrives while the write of the turn
// and its user message syncs, and is read meanwhile, where it waited for
// the sync before. A failed first commit leaves no trace of the turn, so
// whatever the events changed in the run is dropped with it; after a
// round's commit the turn goes on, and that commit's rule stands. The
// event must write nothing: not the completed item still waiting
// (r.streamed), nor an item of a kind stored when done. (A review, whose
// hidden messages write their history, has no first commit to read
// past: it starts without input.) The held announcements follow the
// turn's own, on the goroutine that makes it (sendHeld).
func (r *Run) holdable(ev model.Event) bool {
	if !r.commits.pending.inline || r.first.goesOn() {
		return false
	}
	switch e := ev.(type) {
	case model.TextDelta, model.ReasoningSummaryPartAdded, model.ReasoningSummaryDelta, model.ReasoningTextDelta:
		return true
	case model.OutputItemAdded:
		return r.streamed == nil
	case model.OutputItemDone:
		switch e.Item.Type {
		case model.ItemMessage, model.ItemReasoning, itemWebSearchCall:
			return r.streamed == nil
		}
	}
	return false
}

// heldNote is an announcement held until the first commit settles.
type heldNote struct {
	method string
	params any
}

// emit announces a notification of the turn's response, or holds it
// while the turn has not been announced (holdable).
func (r *Run) emit(method string, params any) {
	if r.holding {
		r.holdMu.Lock()
		if !r.heldOut {
			r.held = append(r.held, heldNote{method, params})
			r.holdMu.Unlock()
			return
		}
		r.holdMu.Unlock()
	}
	r.t.Emit(method, params)
}

// sendHeld sends the announcements held so far, right after the turn's
// first announcement, on the goroutine that made it; from then on the
// turn goroutine announces as it reads.
func (r *Run) sendHeld() {
	r.holdMu.Lock()
	defer r.holdMu.Unlock()
	for _, h := range r.held {
		r.t.Emit(h.method, h.params)
	}
	r.held, r.heldOut = nil, true
}

// settle waits for the pending commit (roundCommitter.settle) and ends
// any holding, which only a response read while the first commit ran
// starts (modelRound): a stored commit has had what was held sent with
// its announcement (sendHeld, before it reports success); a failed one
// drops it with the turn, and the completed item still waiting, which
// nothing may store now.
func (r *Run) settle() error {
	err := r.commits.settle()
	if r.holding {
		r.holding = false
		if err != nil {
			r.holdMu.Lock()
			r.held = nil
			r.holdMu.Unlock()
			r.streamed = nil
		}
	}
	return err
}

// quietEvent reports whether handling ev neither announces nor writes
// anything, so that it need not wait for the previous round's commit
// (roundCommitter): the start and end of a tool call, only added to the history
// until the call runs, and the response's completion. A response that only
// calls tools is thus read whole while that commit finishes. The start of
// any item stores and announces the completed item still waiting
// (flushStreamed), which only a response read while holding leaves.
func (r *Run) quietEvent(ev model.Event) bool {
	switch e := ev.(type) {
	case model.OutputItemAdded:
		return transcript.IsToolCall(e.Item) && r.streamed == nil
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
func (r *Run) requestInput() ([]model.InputItem, []json.RawMessage) {
	out, wire := r.reqInput[:0], r.reqWire[:0]
	defer func() { r.reqInput, r.reqWire = out, wire }()
	if d := r.at.Settings.Developer; d != "" {
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
func (r *Run) itemAdded(open map[string]*streamItem, it model.InputItem) {
	var body api.ThreadItemBody
	switch it.Type {
	case model.ItemMessage:
		body = &api.AgentMessageItem{ID: r.t.UniqueItemID(r.persistCtx(), it.ID, "msg")}
	case model.ItemReasoning:
		body = &api.ReasoningItem{ID: r.t.UniqueItemID(r.persistCtx(), it.ID, "rs")}
	case itemWebSearchCall:
		body = &api.WebSearchItem{ID: r.t.UniqueItemID(r.persistCtx(), it.ID, "ws")}
	default:
		return
	}
	ms := r.d.Now().UnixMilli()
	si := &streamItem{item: api.ThreadItem{Body: body, StartedAtMs: &ms}}
	open[it.ID] = si
	if r.hidden(si) {
		return
	}
	item := si.item
	if r.holding {
		// The body goes on changing (itemDone) before a held
		// announcement is encoded: it gets the body as it starts.
		item.Body = startedBody(body)
	}
	r.emit("item/started", api.ItemStartedNotification{Item: item, ThreadID: r.threadID, TurnID: r.at.ID, StartedAtMs: ms})
}

// startedBody copies the body itemAdded made, before anything of the
// item is known but its id.
func startedBody(b api.ThreadItemBody) api.ThreadItemBody {
	switch b := b.(type) {
	case *api.AgentMessageItem:
		c := *b
		return &c
	case *api.ReasoningItem:
		c := *b
		return &c
	case *api.WebSearchItem:
		c := *b
		return &c
	}
	return b
}

// itemDone completes a streamed item: it is added to the history; a
// message, reasoning or web search item is committed together with the
// history before item/completed goes out, later (r.streamed). Tool calls
// are returned for dispatch.
func (r *Run) itemDone(open map[string]*streamItem, it model.InputItem) (*model.InputItem, error) {
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
	now := r.d.Now()
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
	// Stored and announced when the next item starts or the response
	// ends (flushStreamed), or with the turn's end.
	if err := r.flushStreamed(); err != nil {
		return nil, err
	}
	r.streamed = &deferredItem{at: now, note: api.ItemCompletedNotification{Item: si.item, ThreadID: r.threadID, TurnID: r.at.ID, CompletedAtMs: ms}}
	return nil, nil
}

// flushStreamed commits the completed streamed item still waiting
// (r.streamed) with the turn's history, then announces it.
func (r *Run) flushStreamed() error {
	d := r.streamed
	if d == nil {
		return nil
	}
	r.streamed = nil
	if err := r.persistHistory(&d.note.Item); err != nil {
		return err
	}
	r.emit("item/completed", d.note)
	return nil
}

// takeStreamed hands the completed streamed item still waiting to the
// response's usage commit, which stores it with the turn's history and
// announces it first; it reports whether there was one.
func (r *Run) takeStreamed() bool {
	if r.streamed == nil {
		return false
	}
	r.commits.addDeferred(*r.streamed)
	r.streamed = nil
	return true
}

// hidden reports whether a streamed item stays out of the client's view
// and the thread's items: a reviewer's messages.
func (r *Run) hidden(si *streamItem) bool {
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
func (r *Run) metaJSON() json.RawMessage {
	if r.reviewing {
		h := transcript.History{Root: r.hist.Root, Usage: r.hist.Usage}
		return h.MetaJSON()
	}
	return r.hist.MetaJSON()
}

// persistHistory commits the turn's history, with a completed item if one
// is given, in one atomic batch.
func (r *Run) persistHistory(item *api.ThreadItem) error {
	b := &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: r.threadID, ID: r.at.ID, Meta: r.metaJSON()}}}
	if item != nil {
		sit, err := transcript.StoreItem(r.threadID, r.at.ID, *item, r.d.Now())
		if err != nil {
			return err
		}
		b.AppendItems = append(b.AppendItems, sit)
	}
	if err := r.t.Write(r.persistCtx(), b); err != nil {
		return fmt.Errorf("persist turn history: %w", err)
	}
	return nil
}

// runTools dispatches the model's tool calls and adds their outputs to the
// history.
func (r *Run) runTools(calls []model.InputItem) error {
	regCalls := make([]registry.Call, 0, len(calls))
	// A tool's item takes its call's id, which the model may have used
	// before in this thread (the store keeps one item per id): such a call
	// runs under an id of its own, and its output goes back to the model
	// under the call id the model gave.
	var renamed map[string]string
	for _, c := range calls {
		call := registry.Call{CallID: c.CallID, Namespace: c.Namespace, Name: c.Name}
		if id := r.t.UniqueItemID(r.persistCtx(), c.CallID, "call"); id != c.CallID {
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
		TurnID:  r.at.ID,
		Cwd:     r.at.Settings.Cwd,
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
	if r.at.Ctx.Err() != nil {
		return context.Cause(r.at.Ctx)
	}
	return nil
}

// finish settles the turn: its end (end) goes to the thread table, which
// commits it (Thread.CommitEnd).
func (r *Run) finish(runErr error) {
	r.t.CommitEnd(r.end(runErr))
}

// End is how a turn's run ended, as the loop hands it to the thread
// table: the status and error it ends with, what its record and the
// thread keep of it, and the loop's part of announcing it (the usage that
// rides the end commit, the end's observation, the turn as turn/completed
// shows it, the serverRequest/resolved held back until then).
type End struct {
	r *Run
	// RunErr is what ended the run (nil when it completed).
	RunErr error
	// At is when the turn ended.
	At      time.Time
	Status  api.TurnStatus
	TurnErr *api.TurnError
	// Hist is the turn's additions to the model history; Meta its turn
	// record's meta.
	Hist transcript.History
	Meta json.RawMessage
	// Final is the last completed agent message, nil without one.
	Final *api.ThreadItem
	// Items are the items stored with the end (the last response's last
	// item, or a tool item left to the usage commit), announced with
	// Usage.
	Items []*store.Item
	// usage is the last response's usage commit, stored with the end
	// instead of on its own; nil when there is none.
	usage *roundCommit
}

// end settles what the run left pending (the round's commit and any
// deferred tool item, stored and announced first), stops the turn taking
// input, and returns its end for the table to commit.
func (r *Run) end(runErr error) *End {
	t, at := r.t, r.at
	if err := r.settle(); err != nil && runErr == nil {
		runErr = err
	}
	// Every tool round ends with a usage commit that takes the deferred
	// tool item; should one be left, it still goes out before the turn
	// ends, once stored.
	if items := r.commits.takeDeferred(); len(items) > 0 {
		sits, err := r.storeDeferred(items)
		if err == nil {
			err = t.Write(r.persistCtx(), &store.Batch{AppendItems: sits})
		}
		if err == nil {
			r.announceDeferred(r.t.Emit, items)
		} else if runErr == nil {
			runErr = fmt.Errorf("persist tool item: %w", err)
		}
	}
	// A streamed item still waiting (the run ended between its end and its
	// response's) is stored and announced before the turn ends.
	if err := r.flushStreamed(); err != nil && runErr == nil {
		runErr = err
	}
	var items []*store.Item
	if r.endUsage != nil {
		sits, err := r.storeDeferred(r.endUsage.deferred)
		if err != nil {
			// Nothing it carried is announced; the turn fails.
			r.endUsage = nil
			if runErr == nil {
				runErr = fmt.Errorf("persist turn history: %w", err)
			}
		}
		items = sits
	}
	at.CloseInput(false)
	now := r.d.Now()
	status, turnErr := r.endStatus(runErr)
	return &End{r: r, RunErr: runErr, At: now, Status: status, TurnErr: turnErr,
		Hist: r.hist, Meta: r.metaJSON(), Final: r.final, Items: items, usage: r.endUsage}
}

// Observed is the Observer's context of the turn, for its log lines.
func (e *End) Observed() context.Context { return e.r.obs }

// RequestBuffers hands the turn's request slices (empty, their elements
// cleared, so that they keep no item alive) to the thread, for its next
// turn's UseRequestBuffers; the run builds no request after its end. It
// hands back none when they hold more than four times what the turn's
// last request took (a compaction shrank the history), and none a second
// time.
func (e *End) RequestBuffers() ([]model.InputItem, []json.RawMessage) {
	r := e.r
	in, wire := r.reqInput, r.reqWire
	r.reqInput, r.reqWire = nil, nil
	if cap(in) > 4*len(in) {
		return nil, nil
	}
	clear(in)
	clear(wire)
	return in[:0], wire[:0]
}

// Failed is the status and error of a turn whose end the store did not
// take (err).
func (e *End) Failed(err error) (api.TurnStatus, *api.TurnError) { return e.r.endStatus(err) }

// Usage gives emit the notifications of the usage that rides the end
// commit (the items stored with it, the token usage, changed rate limits,
// the turn's diff), in the order they go out; the table delivers them
// once the end is stored with that usage, and never otherwise. It is
// called at most once.
func (e *End) Usage(emit Emit) {
	if e.usage != nil {
		e.usage.announce(emit)
	}
}

// Observe reports the turn's end, with the status it was told with.
func (e *End) Observe(status api.TurnStatus, turnErr *api.TurnError) {
	e.r.observeEnd(status, turnErr, e.RunErr, e.At)
}

// APITurn is the ended turn as turn/completed shows it.
func (e *End) APITurn(status api.TurnStatus, turnErr *api.TurnError) api.Turn {
	return e.r.apiTurn(status, turnErr, &e.At)
}

// CompletedSent sends the serverRequest/resolved notifications held back
// until turn/completed.
func (e *End) CompletedSent() { e.r.flushResolved() }

// endStatus is the status and error a turn ends with after runErr.
func (r *Run) endStatus(runErr error) (api.TurnStatus, *api.TurnError) {
	switch {
	case runErr == nil:
		return api.TurnCompleted, nil
	case errors.Is(runErr, ErrInterrupted) || errors.Is(runErr, ErrShutdown) || errors.Is(runErr, ErrLeaseLost):
		// A lost lease ends the turn as a failover does.
		return api.TurnInterrupted, nil
	}
	if turnErr, ok := budgetTurnError(runErr); ok {
		return api.TurnFailed, turnErr
	}
	msg, info := model.TurnError(runErr)
	if !isModelError(runErr) {
		r.d.Logger.ErrorContext(r.obs, "turn failed", "thread", r.threadID, "turn", r.at.ID, "err", runErr)
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
func (r *Run) apiTurn(status api.TurnStatus, turnErr *api.TurnError, completed *time.Time) api.Turn {
	started := r.at.StartedAt.Unix()
	id := r.at.ID
	turn := api.Turn{ID: id, RootTurnID: r.at.RootID(), Items: api.List[api.ThreadItem]{}, ItemsView: api.ItemsNotLoaded, Status: status, Error: turnErr, StartedAt: &started}
	if completed != nil {
		c := completed.Unix()
		d := completed.Sub(r.at.StartedAt).Milliseconds()
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
