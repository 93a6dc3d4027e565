// Package loop is the agent loop of one turn: it streams a model
// response, dispatches the tool calls through the turn's registry and
// repeats until the model stops calling tools; it commits each round
// (the turn's history, the thread's usage, the round's last tool item)
// overlapped with the next request, under the ordering rule stated once
// in roundCommitter (commit.go); it compacts the context when it reaches
// its limit or overflows the window, and runs a compaction, review or
// user shell turn; it is its tools' sink (their items, deltas, diff,
// events) and asks the thread's clients for them (server requests with
// their status flags and serverRequest/resolved); it charges each
// response to the turn's budget and stops the turn at a limit.
//
// It owns the running turn's own state (Turn: identity, settings, context,
// the input and settings updates queued for its next request) and the
// loop's working state (Run). It sees its thread only through the Thread
// interface it declares, which the thread table (internal/turns)
// implements for each turn with the thread's locks; the table keeps the
// thread's state, its life cycle and the commit of a turn's end, which
// the loop hands it as an End.
//
// It must not import internal/turns or its other subpackages but the read
// side (internal/turns/transcript), the transports, the tool packages,
// internal/dynamic, internal/skills, internal/sandbox, internal/config,
// internal/auth, internal/principal, any store backend or cmd.
package loop
