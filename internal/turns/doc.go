// Package turns owns threads and turns: the loaded-thread table, one active
// turn per thread and its life cycle (reserving it, storing its start,
// committing its end with the thread's meta, releasing the thread),
// thread list and archive, the threads' queues of user messages
// (thread/queue/*, each entry one turn: queue.go), and durability (every
// item is committed before its item/completed is sent).
//
// The agent loop that runs a turn (streaming a model response,
// dispatching tool calls and repeating, the round commits and the order
// of a turn's notifications, compaction, the turn's server requests and
// budget) is internal/turns/loop: it sees its thread only through the
// loop.Thread interface, which the table implements for each turn
// (turnThread, turn.go) with the thread's own locks, and hands the table
// the turn's end (loop.End) to commit (thread.commitEnd). What a thread's records
// hold and how they are read (thread/read's turns, turn and item pages,
// the streamed reply, the single turns and item pages of the HTTP API) is
// its read side, internal/turns/transcript; the Manager says which store
// holds a thread and adds what only memory knows (a loaded thread's
// status, a turn end the store missed). Ephemeral threads live in the
// memory store the composition root gives it (Config.Ephemeral), read and
// written through the same Store interface as durable ones.
//
// A loaded thread costs its settings, not its transcript:
// loading it reads only its record and last turn; its model history (the
// turns since the last compaction) is read by the next turn that needs it
// and dropped again once the thread has been idle for Config.TrimAfter;
// reads page through the store.
//
// It knows nothing about websockets or HTTP: it emits every notification
// and server request of its threads, typed, to one Sink (the hub), which
// also owns who hears which thread; the Manager subscribes the callers of
// its methods there and asks it whether a thread is heard before
// unloading it. The transports call the Manager's methods. Tools come from
// a ToolsFactory and models from a ModelRouter, both given by the
// composition root.
//
// When several daemons share one database, a turn runs under its thread's
// lease (Config.Ownership, implemented by internal/cluster): taken before
// the turn's record is stored, given back once its end is, and requests
// about a turn running on another daemon (steer, interrupt, turn/start
// while busy) are forwarded to it and run there by Manager.Command.
//
// The sub-agents of threads (spawned children, driving them from the
// parent's turn, what a parent hears of a child's end) are
// internal/turns/subagents: the Manager implements the thread table it
// declares (children.go), gives each turn's tools their thread's
// Children (ToolContext.Children) and calls its hooks at a turn's end.
//
// Every request that can change a thread's settings (thread/start, resume,
// fork, turn/start, thread/settings/update) comes with its Caller's
// principal: the settings it leaves the thread with (cwd, sandbox,
// approval policy, a permission profile's sandbox) are bounded by
// principal.Bound before they are stored or a turn runs, whichever door
// the request came through; a turn forwarded to another daemon carries the
// bounded settings. ListThreads and SearchThreads list what the principal
// sees; thread broadcasts carry their thread's originator
// (Sink.BroadcastThread), so that transports keep them from other
// principals.
//
// It must not import the transports (internal/hub, internal/server,
// internal/httpapi), the tool packages (internal/tools/..., internal/dynamic,
// internal/skills), internal/sandbox, internal/config, internal/auth, any
// store backend (it sees only store.Store; the memory store of ephemeral
// threads comes from the composition root) or cmd.
package turns
