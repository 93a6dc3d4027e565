// Package agents is the multi-agent collaboration tools of a turn: the
// multi_agent_v1 namespace (spawn_agent, send_input, wait_agent,
// close_agent, resume_agent), offered when a thread's config sets
// features.multi_agent, and the v2 collaboration namespace (spawn_agent,
// wait_agent, list_agents, send_message, followup_task, interrupt_agent,
// children named by task paths), offered instead
// under features.multi_agent_v2 (docs/tools.md §2.14). It also words a
// child's end for its parent's model (EndNote). A spawned agent is a child
// thread of the calling thread; this package decides what the model may do
// (the depth and count limits, which agents are open) and answers in the
// model's words, while the thread table it reaches through the small
// Threads interface creates, runs, waits for and stops the children, and
// records which of them are open, so that a parent counts and reaches its
// open children again after a restart.
//
// It knows nothing about threads, storage or transports: it must not import
// internal/turns, internal/tools/orchestrate, the stores, the model clients
// or the transports.
package agents
