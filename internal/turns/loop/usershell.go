package loop

import (
	"context"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// RunUserShell is the goroutine of a user shell command's turn: run runs
// the command under the turn's context (announcing its item itself) and
// returns what the model reads of it, which joins the turn's history.
func (r *Run) RunUserShell(run func(ctx context.Context) (modelText string, err error)) {
	defer close(r.at.Done)
	t := r.t
	t.BroadcastStatus()
	t.Emit("turn/started", api.TurnStartedNotification{ThreadID: r.threadID, Turn: r.apiTurn(api.TurnInProgress, nil, nil)})
	// The turn was stored before thread/shellCommand answered.
	text, err := run(r.at.Ctx)
	if err == nil {
		r.hist.Add(transcript.UserInputToModel([]api.UserInput{{Type: api.UserInputText, Text: text}}))
		err = r.persistHistory(nil)
	}
	r.finish(err)
}
