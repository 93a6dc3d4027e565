// Package fsguard owns the one rule of what the daemon touches on a
// model's or a client's behalf: whether a caller may read or change a
// path, and the race-free way to open it once it may.
//
// # The rule
//
// A Guard holds what is refused to everyone: the daemon's masked paths
// (its data directory, configuration file, token, secret and key files:
// Config.Masked, the same list the command sandbox hides) and anything
// below them or reached through a symlink into them, and the daemon's own
// /proc entries (/proc/self, /proc/thread-self, /proc/<pid> of the daemon
// and of each of its threads). Nothing below a masked path is looked up,
// so a refusal does not tell whether a file exists there.
//
// An Access is what one caller may reach: the roots it may read below,
// the roots it may change below with the subpaths that stay read-only
// (.git, .codex, .agents, as internal/policy computes them for the
// sandbox), and whether it may read the host's /proc. ForThread derives a
// thread's Access from its sandbox policy (see its doc: full access reads
// and writes everywhere; workspace-write its writable roots; read-only
// its cwd; sandboxed threads never the host's /proc); Dirs is a plain list
// of directories, as a principal's roots will be.
//
// A path must be inside a root as named and, once every symlink is
// resolved, both its directory entry and its final target must be too;
// writes must not land in a read-only subpath. Refusals are *Error values
// (errors.Is(err, ErrDenied)) whose text names the path and the reason,
// for a model or a client to read.
//
// # Opening race-free
//
// A checked path is never re-resolved by name: it is opened below a
// descriptor of "/" with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)
// (or, on kernels without openat2, a walk opening one component at a time
// with O_NOFOLLOW), so what is opened is exactly the path that was
// checked, and a symlink swapped in after the check fails the operation
// (ErrSymlinkAppeared) instead of redirecting it. A path is first opened
// as named; that succeeds only when no component is a symlink, and then
// the checks by name were the checks of the real path. Otherwise it is
// resolved, the result checked, and that opened. Writes go to a new file
// renamed over the target, so they never go through a symlink or a hard
// link.
//
// # Entry points
//
// Single steps, for tools and client methods: Guard.OpenRead, Stat,
// ReadDir (which leaves refused entries out), OpenWrite, Mkdir, Remove,
// Rename, each taking the caller's Access. Multi-step work on paths
// checked once (apply_patch's verify, write and roll back) uses a Tree:
// Resolve, then Lstat, ReadFile, Readlink, WriteFile, RestoreFile,
// Symlink, Remove, Rename and MkdirAll on the resolved paths.
//
// # Dependencies
//
// It imports internal/policy (writable roots and their read-only
// subpaths) and nothing else of ours; every tool the daemon runs in its
// own process, and the client methods that touch files, go through it.
package fsguard
