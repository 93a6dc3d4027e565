// Package registry is the tool layer's core: the handler contract, the tool
// specs sent to the model, the JSON Schema subset and its sanitizer, the
// builder that collects registrations, and the dispatcher that runs the tool
// calls of one turn (parallel lock, readiness gate, after-tool-use hooks) and
// shapes their results into the output items sent back to the model.
//
// It follows the Codex tool contract restated in docs/tools.md §1. Handlers
// live elsewhere (internal/tools, internal/mcp, internal/dynamic, ...); they
// receive an Invocation and return an Output, and know nothing about threads,
// transports or storage.
//
// It must not import internal/turns, the store, internal/model, any tool
// package (internal/tools/..., internal/registry/planning, internal/dynamic,
// internal/skills), the transports (internal/hub, internal/server,
// internal/httpapi) or cmd: they all depend on it.
package registry
