// Package goals is the model's goal tools: get_goal, create_goal and
// update_goal, offered to a thread that can keep a goal (not an ephemeral
// one) unless its config turns features.goals off. The goal itself is the
// thread's (thread/goal/set|get|clear); this package decides what the model
// may do with it (create only when there is none, set only complete or
// blocked) and answers in the model's words, while the small Goals
// interface reaches the thread.
//
// It knows nothing about threads, storage or transports: it must not import
// internal/turns, internal/tools/orchestrate, the stores or the transports.
package goals
