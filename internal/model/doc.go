// Package model talks to language models. It offers one provider-neutral
// streaming interface, [Client], with two implementations over net/http and
// server-sent events: the OpenAI Responses API (wire API "responses") and
// Chat Completions (wire API "chat"), for OpenAI itself and for
// OpenAI-compatible servers.
//
// History and output share one item shape, [InputItem], which is the
// Responses API's input item: what the model produced in one response is
// appended to the history verbatim (same call ids, same outputs) and sent back
// on the next request. The Chat Completions client converts that history to
// chat messages on the way out and converts streamed chunks back into items on
// the way in, so callers never see the difference.
//
// [Client.Stream] reports every failure as an [*Error] whose [ErrorKind]
// classifies it (errors returned by the caller's event function pass through
// unchanged); [*Error.CodexErrorInfo] and [*Error.TurnErrorMessage] map it to
// the app-server protocol's TurnError.
//
// The subpackage fakemodel is a scripted model server speaking both wire APIs
// over real HTTP and SSE, for tests and for `appserver mockmodel`.
//
// A Router builds one client per configured provider on first use, reading
// the provider's secrets from the environment then; the turns layer asks it
// for the client of each turn's provider (turns.ModelRouter).
//
// The package knows nothing of the client protocol, threads, tools or
// storage: it must not import any package of the module but internal/apperr
// and internal/jsonscan (so neither api, internal/turns nor
// internal/registry).
package model
