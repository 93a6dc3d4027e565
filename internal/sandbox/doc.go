// Package sandbox runs a command under the operating-system rules of a
// sandbox policy (docs/tools.md §4.2, §4.10).
//
// Two backends enforce the file-system rules; the network rules are the
// same for both:
//
//   - Landlock, applied without a helper process. Landlock domains, seccomp
//     filters, no_new_privs and namespaces are per-thread attributes in
//     Linux, inherited by a process forked from the thread. A launcher
//     (launcher_linux.go) is a daemon thread, locked to one goroutine for
//     good, that applies one rule set to itself once and then forks every
//     command needing that rule set: read everywhere, write only under the
//     writable roots plus a few device files. Rule sets are keyed by the
//     writable roots' identities (path, device, inode), so a recreated
//     directory gets a fresh launcher. Protected subpaths (.git, .codex,
//     .agents) under a writable root stay writable: Landlock cannot take a
//     subtree out of an allowed one (the reference's "legacy" gap). Before
//     restricting itself the launcher hides the daemon (isolate_linux.go):
//     a mount namespace of its own with the hidden paths masked, a minimal
//     /dev and a /proc of a new PID namespace, whose init is the helper;
//     then it drops every capability. That needs CAP_SYS_ADMIN: without it
//     the Landlock backend refuses to run commands. From Landlock ABI 6,
//     signals and abstract Unix sockets are scoped to the domain.
//   - bubblewrap (`bwrap` on PATH, as Codex does), which execs the command
//     itself: a read-only bind of /, writable roots bound on top, protected
//     subpaths re-bound read-only, the hidden paths masked, a new PID
//     namespace with its own /proc (an empty one where none can be
//     mounted), no capabilities.
//     bwrap runs outside the sandbox, so loader variables (LD_*,
//     GLIBC_TUNABLES, GCONV_PATH) are kept out of its environment and set for
//     the command with --setenv.
//
// With the network off, the command also gets a seccomp filter answering
// EPERM to every socket family but AF_UNIX and to connect, bind, listen,
// accept, sendto, ..., ptrace and io_uring (the reference's list), Landlock
// TCP rules (ABI ≥ 4, Landlock backend), and an empty network namespace:
// one per Sandbox, created by a launcher thread that unshares it, and
// entered by starting the command (or bwrap) from a thread inside it;
// without CAP_SYS_ADMIN, a user+network namespace per command where the
// kernel allows it.
//
// danger-full-access and external-sandbox policies run the command directly.
//
// Commands come back as *Cmd and must be started through Cmd.Start (or Run,
// Output, CombinedOutput), which hands the fork to the right thread; the
// embedded exec.Cmd refuses to start on its own (ErrStartDirectly).
//
// The daemon's main still calls MaybeRunHelper first thing: re-executing
// the binary is how the user-namespace probe tests the kernel, and the
// helper is the init of each Landlock launcher's PID namespace.
//
// Options.Hidden names the daemon's own state (data directory, config,
// token and secret files): under both backends a sandboxed command can
// neither read nor change it. Sandbox.Hide adds paths the daemon creates
// later, such as a Unix socket it listens on: connecting to a socket file
// needs no write access, so only a mask keeps commands from it.
// Options.ReadOnly names paths commands may read but never change,
// bound read-only over every other rule (a writable root, a hidden
// directory): the daemon's login-shell snapshots, which live in its hidden
// data directory and are sourced by commands.
//
// The daemon's own listener: a command with network access shares the
// host's network namespace (nothing else would give it the outside world
// without a user-space network stack such as slirp4netns or pasta), so it
// can connect to the daemon's loopback address. Landlock's TCP rules only
// allow ports, so excluding one would take a rule for every other port,
// and bubblewrap has no such rules at all. The daemon therefore sets
// Options.NetworkRefused while one of its listeners accepts requests
// without authentication on a TCP address: every sandboxed command whose
// policy has network access is then refused (ErrNetworkRefused) with the
// setting to change, whichever door its thread came through. Commands
// without network access cannot open an AF_INET socket at all (seccomp,
// an empty network namespace); Unix-socket listeners are hidden with Hide.
//
// Denials surface as the command's own failure ("Permission denied" from
// Landlock, "Read-only file system" from bubblewrap, "Operation not
// permitted" from seccomp), which policy.LooksLikeSandboxDenial recognises;
// the model sees the command's output formatted like any other run, as the
// reference does. A sandbox that cannot be set up fails the command before
// it starts, with an error naming the sandbox.
//
// It must not import any package of the module but internal/policy (and api,
// the wire contract policy builds on): it enforces a policy on a command and
// knows no tool, thread or transport.
package sandbox
