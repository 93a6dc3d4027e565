// Package feedback writes the reports of feedback/save and keeps the
// daemon's recent log lines for them.
//
// A report is a zip file laid out as the reference's: report.json (the
// classification, the user's reason and tags, the thread and the daemon's
// version), the attachments under attachments/NNNN/<name>, and
// manifest.json listing them. Write writes one to any io.Writer; the
// caller (internal/server) decides where, through the daemon's path rule,
// and what a caller may attach.
//
// Logs is a slog handler wrapper that keeps the last lines the daemon
// logged (bounded in bytes), each with the thread ids its attributes name
// ("thread", "thread_id", "threadId"), so that a report attaches only the
// lines of the threads its caller may see; values of attributes whose
// names look like credentials are written as "[redacted]".
//
// It imports nothing of ours.
package feedback
