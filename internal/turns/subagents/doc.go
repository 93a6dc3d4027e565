// Package subagents owns the sub-agents of threads: the child threads a
// turn's collaboration tools spawn (what a child inherits from its parent,
// its sub-agent record and its parent's spawn edge), driving them from the
// parent's turn (input, messages, waits, interrupts, closing), the record
// of a child's turn end, and what a parent hears of that end (a note in
// its model history, and for a child named by a task path a
// subAgentActivity item on its running turn), the interruption of a
// parent's children with it, and the walk over a thread's descendants.
//
// It sees the thread table only through the Table interface it declares,
// which internal/turns implements; internal/turns builds a Service, hands
// each turn's tools the Children of their thread, and calls the Service's
// hooks at a turn's end. It must not import internal/turns, the
// transports, the tool packages, any store backend or cmd.
package subagents
