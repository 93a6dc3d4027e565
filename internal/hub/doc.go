// Package hub is the transport-neutral meeting point of a thread's clients:
// it owns the subscribers (websocket sessions and the HTTP API's event logs
// alike, behind Subscriber), the fan-out of typed notifications to them
// (each encoded once, for every transport) and the one router of
// server→client requests: approvals and user-input requests, which go to
// every subscriber of the thread, and dynamic tool calls, which go to one
// live client (through the dynamic.Broker the hub owns).
//
// It is the one owner of who hears which thread (the turns layer keeps no
// copy: it subscribes the callers of its methods here and asks Watched
// before it unloads a thread), and the turns layer's only sink: it
// implements turns.Sink, so every notification and server request of a
// thread comes here typed and is encoded once. The rule by which a spawned
// child's notifications and requests reach its ancestors' subscribers is
// stated once, above Hub.audience. The hub never calls back into turns.
// Transports attach their clients (Attach, Detach; Follow for a client of
// one thread), deliver the answers (Request.Answer) and say when a client
// went away before answering (Request.Lost).
//
// The hub writes its server requests and a thread's archiving as entries
// of the thread's event log, for the event consumers (webhooks). With
// several daemons on one database (Config.Remote set) it also presents the
// requests other daemons published, which reach it through Deliver, to its
// own subscribers; the answers go back through Remote, which the
// composition root implements with the cluster's command table. Without a
// Remote that presenting and forwarding is off.
//
// It must not import internal/server or internal/httpapi: both are its
// adapters. Nor may it import the tool packages (internal/tools/...), the
// durable store backends or cmd.
package hub
