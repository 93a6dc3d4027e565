// Package webhook posts signed notices of thread events to the receivers
// of the [[webhooks]] configuration entries: a turn's end (turn.completed,
// turn.failed, turn.interrupted), an approval request
// (approval.requested), a thread's archiving and unarchiving. Each entry
// is an eventlog.Consumer of its own (a durable cursor and a lease, so
// one daemon of a database delivers, each thread's notices in order, and
// a restart resumes where the cursor was saved); a notice is signed per
// the Standard Webhooks scheme (webhook-id, webhook-timestamp,
// webhook-signature), its id stable (the thread and the event's sequence
// number) so that receivers de-duplicate what is sent again, and retried
// with exponential backoff and jitter until the entry's retry_for. The
// receiver's address is checked as it is dialled, at each attempt:
// loopback, private, link-local and unspecified addresses are refused
// unless the entry sets allow_private.
//
// Subscriptions made over the HTTP API live in the store
// (store.Webhook): a Sender reads them at Start and every SyncEvery (and
// when the HTTP API calls Sync after a change), starting a consumer for
// each new one and stopping those deleted, so that every daemon of a
// database runs them. A principal's subscription takes only the events
// of threads that principal created (Config.OwnerOf), whatever thread it
// names. Every attempt of every webhook is logged in the store, the
// newest DeliveryLog (default 100) per webhook kept.
//
// It imports the event log, the hub and the store's interface; it must
// not import the transports (internal/server, internal/httpapi), the
// daemon or cmd.
package webhook
