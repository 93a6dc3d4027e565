// Package clientfs serves the host's file system to clients: the fs/*
// methods (read, write, create directories, describe, list, remove, copy,
// watch), the fuzzy file search with its sessions, and the migration of
// the other agent's CLAUDE.md files (externalAgentConfig/*), as the
// reference app-server does (docs/protocol.md §4.34, §4.35, §4.38),
// through the daemon's one path rule.
//
// Every path a client names goes through internal/fsguard with the
// caller's Access (AccessOf): the operator (local trust, or the operator's
// credential) reaches the whole file system as the reference does, except
// the daemon's masked paths and its own /proc entries, which are refused
// to everyone; a principal reaches its workspace roots only. Refusals are
// apperr.Forbidden errors naming the path and the reason; operating
// system errors are apperr.Unavailable errors worded as the reference
// words them ("No such file or directory (os error 2)").
//
// What it holds is bounded: file contents read or written (Config.
// MaxFileBytes), directory listings, watches per connection and in all,
// entries a search walks, sessions per connection and searches walking at
// once. Watches share one inotify instance (fsnotify), started with the
// first watch and stopped by Stop; each watch batches its changes for
// 200 ms as the reference does. A search session walks its roots once, on
// a goroutine the Service owns, and answers each query from that index.
// CloseConn ends a connection's watches, sessions and searches.
//
// It imports api, apperr, fsguard (and policy, for its access), fuzzy
// and principal of ours, nothing else; the JSON-RPC edge
// (internal/server) calls it.
package clientfs
