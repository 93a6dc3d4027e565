// Package dynamic implements client-registered ("dynamic") tools
// (docs/protocol.md §7.4–§7.5, docs/tools.md §5): a client registers its own tools with
// thread/start.dynamicTools, the model calls them, and the daemon forwards each
// call to a connected client as an item/tool/call server request and waits for
// the answer.
//
// The package is transport-agnostic. It has three parts:
//
//   - Registration: Validate checks a thread's []api.DynamicToolSpec (names,
//     sizes, schemas, clashes with built-in tools) and returns a Tools value
//     that is persisted with the thread (it encodes to JSON) and restored on
//     resume (Restore, or json.Unmarshal). Tools.AddTo registers every tool on a
//     registry.Builder; Tools.OfferedSpecs hides deferLoading tools from the
//     model's tool list while keeping them callable.
//
//   - Forwarding: a Broker, shared by the daemon, keeps one pending call per
//     (thread id, call id). Broker.Call registers the call, asks the Router
//     (implemented by the transport) to deliver it to one connection subscribed
//     to the thread, and waits until the answer arrives (Broker.Resolve,
//     Pending.Resolve), the turn is interrupted (ctx), or no connection could
//     take the call for ReconnectTimeout (default 5 minutes). Exactly one
//     answer is used; the Router is told once the call is settled so it can
//     tell every connection that still holds the request.
//
//   - Handler: one Handler per thread serves every dynamic tool of the thread
//     in the registry. It validates the arguments against the registered
//     schema (invalid arguments are answered to the model, the client is not
//     asked), emits the dynamicToolCall item (item/started, item/completed)
//     through an ItemSink, forwards the call through the Broker and turns
//     the client's contentItems into the model output.
//
// # Disconnects and reconnects
//
// A pending call is always either outstanding on a live connection (Offer
// succeeded) or waiting for one. The transport calls Broker.Reoffer(threadID)
// whenever the set of connections that can serve a thread changes: when a
// subscribed connection disconnects or unsubscribes (the call moves to another
// subscriber if there is one) and when a connection subscribes to the thread
// (thread/start, thread/resume), so that a client that reconnects and resumes
// the thread gets the pending calls again. While no connection can take a
// call, it waits up to ReconnectTimeout; then it fails with a model-readable
// error and the turn goes on. The turn never waits forever unless the
// timeout is disabled.
//
// # Dependencies
//
// It must not import internal/turns, internal/tools/orchestrate, the store,
// internal/model, the transports (internal/hub, internal/server,
// internal/httpapi) or cmd: the hub implements its Router and owns the
// Broker, and the tools layer registers its Handler.
package dynamic
