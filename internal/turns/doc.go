// Package turns owns threads and turns: the loaded-thread table, one active
// turn per thread, the agent loop that streams a model response, dispatches
// tool calls and repeats, the history each turn adds (its stored and wire
// encodings), the round commits and the order of a turn's notifications,
// thread read, list and archive, and durability (every item is committed
// before its item/completed is sent). Ephemeral threads live in an
// internal/store/memory store, so they are read and written through the
// same Store interface as durable ones.
//
// A loaded thread costs its settings and subscribers, not its transcript:
// loading it reads only its record and last turn; its model history (the
// turns since the last compaction) is read by the next turn that needs it
// and dropped again once the thread has been idle for Config.TrimAfter;
// reads page through the store.
//
// It knows nothing about websockets or HTTP: it publishes notifications to
// a Notifier, subscriber changes to a SubscriberObserver and server
// requests to a ServerRequester (the hub implements all three), and the
// transports call the Manager's methods. Tools come from a ToolsFactory
// and models from a ModelRouter, both given by the composition root.
//
// When several daemons share one database, a turn runs under its thread's
// lease (Config.Ownership, implemented by internal/cluster): taken before
// the turn's record is stored, given back once its end is, and requests
// about a turn running on another daemon (steer, interrupt, turn/start
// while busy) are forwarded to it and run there by Manager.Command.
//
// It must not import the transports (internal/hub, internal/server,
// internal/httpapi), the tool packages (internal/tools/..., internal/dynamic,
// internal/skills), internal/sandbox, internal/config, internal/auth, the
// durable store backends (it sees only store.Store) or cmd.
package turns
