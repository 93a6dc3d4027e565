// Package planning provides the update_plan tool (docs/tools.md §2.9): the model
// records its plan, the client is told through a turn/plan/updated event, and
// the model gets "Plan updated" back.
//
// Like every tool handler it knows nothing about threads, storage or
// transports: it must not import internal/turns, internal/tools/orchestrate,
// internal/store, internal/model, internal/hub, internal/server,
// internal/httpapi or cmd.
package planning
