// Package api holds the wire types of the Codex app-server protocol v2 as
// codex-cli 0.171.0 defines it (ProtocolVersion; 0.169.0 clients speak a
// subset of it): JSON-RPC params and results, notifications,
// server→client requests and the ThreadItem union, plus the bodies of the
// HTTP/JSON API under /v1 (http.go, described by openapi.yaml). It has no
// logic and depends on the standard library only.
//
// Conventions, following the shape of the reference schema:
//
//   - A field the protocol always writes uses a plain type; if it may be
//     null it is a pointer (or nil slice/map/RawMessage) WITHOUT omitempty,
//     so nil is written as null.
//   - A field the sender may omit ("opt") is a pointer, slice or map with
//     omitempty, so nil is left out.
//   - List[T] and Map[V] are for arrays and objects that must never be null:
//     a nil value is written as [] or {}.
//   - Nullable[T] is for params that distinguish absent, null and a value
//     (e.g. serviceTier: absent = keep, null = reset).
//   - Tagged unions are structs with a Type field plus the union of the
//     variants' fields, with MarshalJSON writing exactly the keys of the
//     selected variant. ThreadItem is the exception: it wraps one of the
//     per-variant structs (see ThreadItemBody).
//
// The types are written by hand and held to the reference schema
// (api/schema, which says why they are not generated) by the tests:
// api/wiretypes_test.go maps each served method to its types, and
// Unserved (unserved.go) lists what is not served and why. The method
// tables (protocol_gen.go, and protocol_methods.json for generators in
// other languages) and docs/protocol-methods.md are generated from the
// schema and Unserved by go generate.
//
// Decoding never rejects a missing required param (Go has no such notion);
// callers validate those and answer like codex does, e.g. -32600
// "Invalid request: missing field `threadId`".
package api

//go:generate go run ./internal/gen
