package orchestrate

import (
	"context"
	"fmt"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/lossy"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/tools/shell"
	"github.com/appserver/appserver/internal/turns"
)

// RunUserShell implements turns.UserShellRunner: the command runs as the
// reference runs a user's `!cmd`, through the user's login shell in the
// thread's cwd, unsandboxed and without approval (the user typed it), its
// output streamed on a commandExecution item with source userShell. The
// model reads the command and its result as a <user_shell_command> user
// message, the output truncated as a shell tool's is.
func (s *Service) RunUserShell(ctx context.Context, tc turns.ToolContext, req turns.UserShellRequest) (turns.UserShellResult, error) {
	argv := s.userShell.Argv(req.Command, true)
	it := commandItem(req.ItemID, argv, tc.Cwd, api.CommandSourceUserShell)
	startedMs := s.nowMs()
	tc.Sink.ItemStarted(api.ThreadItem{Body: it, StartedAtMs: &startedMs})
	res, err := shell.Exec(ctx, shell.ExecRequest{
		Argv: argv, Snapshot: s.snapshots.Get(tc.Originator, shell.SnapshotUserShell), Cwd: tc.Cwd, Env: s.commandEnv(), Timeout: req.Timeout,
		Policy: policy.SandboxPolicy{Kind: policy.DangerFullAccess}, Sandbox: s.sandbox,
		OnOutput: func(d shell.OutputDelta) { tc.Sink.CommandOutputDelta(req.ItemID, string(d.Data)) },
	})
	it.Status = api.StatusFailed
	if err == nil {
		code := int32(res.ExitCode)
		it.ExitCode = &code
		if res.ExitCode == 0 {
			it.Status = api.StatusCompleted
		}
	}
	out := lossy.String(res.Aggregated)
	dur := res.Duration.Milliseconds()
	it.AggregatedOutput, it.DurationMs = &out, &dur
	s.completeItem(tc.Sink, it, startedMs)
	if err != nil && ctx.Err() != nil {
		// Interrupted: the turn ends as interrupted, and the model is
		// told nothing of a command the user stopped.
		return turns.UserShellResult{}, context.Cause(ctx)
	}
	if err != nil {
		out = err.Error()
		res.ExitCode = -1
	}
	text := fmt.Sprintf("<user_shell_command>\n<command>\n%s\n</command>\n<result>\nExit code: %d\nDuration: %.4f seconds\nOutput:\n%s\n</result>\n</user_shell_command>",
		req.Command, res.ExitCode, res.Duration.Seconds(), shell.FormattedTruncateText(out, shell.DefaultTruncationPolicy))
	return turns.UserShellResult{ModelText: text}, nil
}
