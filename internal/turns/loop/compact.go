package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// DefaultCompactPrompt is the request that ends a compaction's model input
// unless the config gives its own (Deps.CompactPrompt): it asks for a
// summary another model can carry the work on from.
const DefaultCompactPrompt = `The conversation is about to outgrow the context window. Write a handoff note for the assistant who will continue this work with nothing but your note and the user's recent messages.

Include:
- what the user wants, with every constraint and preference they stated;
- what has been done so far: decisions taken, files read or changed, commands run and what they showed;
- what remains open, and the next concrete steps;
- exact names, paths, identifiers and values the remaining work needs.

Be brief and specific. Answer with the note only.`

// summaryPrefix opens the summary in the compacted history, so that the
// model reads it as the record of earlier work and not as a new request.
const summaryPrefix = "The earlier part of this conversation was compacted to save context. This note, written at that point, records what happened and what is left to do:"

// keptUserBytes bounds the recent user messages a compacted history keeps
// word for word (about 20,000 tokens at four bytes a token, the
// reference's budget); older ones live on only in the summary.
const keptUserBytes = 80_000

// RunCompact is the goroutine of a compaction turn.
func (r *Run) RunCompact() {
	defer close(r.at.Done)
	t := r.t
	t.BroadcastStatus()
	t.Emit("turn/started", api.TurnStartedNotification{ThreadID: r.threadID, Turn: r.apiTurn(api.TurnInProgress, nil, nil)})
	r.finish(r.compact())
}

// needsCompaction reports whether the context has reached the
// auto-compact limit, so that the next request must follow a compaction.
func (r *Run) needsCompaction() bool { return r.t.NeedsCompaction() }

// compact asks the model to summarize the history so far and replaces it
// with the summary after the most recent user messages. The turn's meta
// then holds the whole new history (history.replaces), stored with the
// contextCompaction item before item/completed goes out.
func (r *Run) compact() error {
	if err := r.settle(); err != nil {
		return err
	}
	t, at := r.t, r.at
	ms := r.d.Now().UnixMilli()
	item := api.ThreadItem{Body: &api.ContextCompactionItem{ID: newID()}, StartedAtMs: &ms}
	t.Emit("item/started", api.ItemStartedNotification{Item: item, ThreadID: r.threadID, TurnID: at.ID, StartedAtMs: ms})

	summary, usage, err := r.summarize()
	if err != nil {
		return err
	}
	all := slices.Concat(r.prior.Items, r.hist.Items)
	r.prior = transcript.History{}
	r.hist = transcript.History{Replaces: true, Root: r.hist.Root, Usage: r.hist.Usage}
	r.hist.Add(compactedHistory(all, summary)...)
	r.hist.AddUsage(breakdown(usage))

	now := r.d.Now()
	done := now.UnixMilli()
	item.CompletedAtMs = &done
	sit, err := transcript.StoreItem(r.threadID, at.ID, item, now)
	if err != nil {
		return err
	}
	b := &store.Batch{
		UpdateTurns: []store.TurnPatch{{ThreadID: r.threadID, ID: at.ID, Meta: r.metaJSON()}},
		AppendItems: []*store.Item{sit},
	}
	// The summary request is paid for like any other. As the reference
	// does, the last usage then reports an estimate of the compacted
	// context, so that a client's "context left" shows the room made; the
	// auto-compact count starts again from the next response.
	last := api.TokenUsageBreakdown{TotalTokens: r.contextEstimate()}
	total, err := t.WriteUsage(r.persistCtx(), b, at.ID, breakdown(usage), last, 0)
	if err != nil {
		return fmt.Errorf("persist compaction: %w", err)
	}
	t.Emit("thread/tokenUsage/updated", api.ThreadTokenUsageUpdatedNotification{
		ThreadID: r.threadID, TurnID: at.ID, TokenUsage: api.TokenUsage{Total: total, Last: last, ModelContextWindow: r.d.contextWindow()},
	})
	// Like the reference's app-server, only the item marks the
	// compaction: the deprecated thread/compacted is not sent.
	t.Emit("item/completed", api.ItemCompletedNotification{Item: item, ThreadID: r.threadID, TurnID: at.ID, CompletedAtMs: done})
	return nil
}

// contextEstimate is about how many tokens the next request carries:
// four bytes a token of its instructions and input.
func (r *Run) contextEstimate() int64 {
	n := len(r.at.Settings.Instructions) + len(r.at.Settings.Developer)
	r.hist.EnsureWire()
	for _, w := range r.hist.Wire {
		n += len(w)
	}
	return int64(n+3) / 4
}

// summarize sends the history with the compaction prompt and returns the text of
// the model's last message. A history too long for the window even to be
// summarized loses its oldest items until it fits, as the reference does.
func (r *Run) summarize() (string, model.Usage, error) {
	at := r.at
	client, err := r.d.Models.Client(at.Settings.Provider)
	if err != nil {
		return "", model.Usage{}, err
	}
	input, wire := r.requestInput()
	// The developer message, when there is one, stays first.
	keep := 0
	if at.Settings.Developer != "" {
		keep = 1
	}
	prompt := model.UserMessage(r.d.CompactPrompt)
	promptWire, _ := model.WireJSON(prompt)
	for {
		req := model.Request{
			Model:            at.Settings.Model,
			Instructions:     at.Settings.Instructions,
			Input:            append(input[:len(input):len(input)], prompt),
			ReasoningEffort:  at.Settings.Effort,
			ReasoningSummary: at.Settings.Summary,
		}
		if wire != nil {
			req.InputWire = append(wire[:len(wire):len(wire)], promptWire)
		}
		var text string
		res, err := client.Stream(r.obs, req, func(ev model.Event) error {
			if e, ok := ev.(model.OutputItemDone); ok && e.Item.Type == model.ItemMessage && e.Item.Role == model.RoleAssistant {
				text = e.Item.Text()
			}
			return nil
		})
		if overflowed(err) && len(input) > keep+1 {
			input = slices.Delete(slices.Clone(input), keep, keep+1)
			if wire != nil {
				wire = slices.Delete(slices.Clone(wire), keep, keep+1)
			}
			continue
		}
		if err != nil {
			if at.Ctx.Err() != nil {
				return "", model.Usage{}, context.Cause(at.Ctx)
			}
			return "", model.Usage{}, err
		}
		if strings.TrimSpace(text) == "" {
			return "", res.Usage, errors.New("compaction: the model answered without a summary")
		}
		return text, res.Usage, nil
	}
}

// compactedHistory is the history that replaces items after a
// compaction: the most recent user messages, within keptUserBytes and in
// their order, then the summary as a user message. Summaries of earlier
// compactions are not kept: the new one covers them.
func compactedHistory(items []model.InputItem, summary string) []model.InputItem {
	var kept []model.InputItem
	budget := keptUserBytes
	for i := len(items) - 1; i >= 0 && budget > 0; i-- {
		it := items[i]
		if it.Type != model.ItemMessage || it.Role != model.RoleUser {
			continue
		}
		text := it.Text()
		if text == "" || strings.HasPrefix(text, summaryPrefix) {
			continue
		}
		if len(text) > budget {
			// Keep the message's start, cut on a character boundary.
			cut := budget
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			text = text[:cut]
		}
		budget -= len(text)
		kept = append(kept, model.UserMessage(text))
	}
	slices.Reverse(kept)
	return append(kept, model.UserMessage(summaryPrefix+"\n"+strings.TrimSpace(summary)))
}
