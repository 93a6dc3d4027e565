// Package sandbox runs a command under the operating-system rules of a
// sandbox policy (tools.md §4.2, §4.10).
//
// The daemon re-executes itself as a small helper: Command builds an
// exec.Cmd that starts os.Executable() with the hidden subcommand
// HelperCommand. The helper (HelperMain) restricts itself and then replaces
// itself with the command (execve), so only the command is confined:
//
//   - PR_SET_NO_NEW_PRIVS whenever anything is restricted;
//   - with the network off: a seccomp filter answering EPERM to every socket
//     family but AF_UNIX and to connect, bind, listen, accept, sendto, ...,
//     ptrace and io_uring (the reference's list), Landlock TCP bind/connect
//     rules (ABI ≥ 4), and, when the kernel lets us, a fresh network
//     namespace (CLONE_NEWNET, in a user namespace when not privileged);
//   - the file system, by one of two backends: Landlock (go-landlock, best
//     effort up to ABI 7: read everywhere, write only under the writable
//     roots plus a few device files) or bubblewrap (`bwrap` on PATH, as Codex
//     does: a read-only bind of /, writable roots bound on top, protected
//     subpaths such as .git re-bound read-only, new PID namespace and /proc).
//
// danger-full-access and external-sandbox policies run the command directly.
//
// The daemon's main must hand control to the helper before doing anything
// else; MaybeRunHelper is the one-line hook for that.
//
// Denials surface as the command's own failure ("Permission denied" from
// Landlock, "Read-only file system" from bubblewrap, "Operation not
// permitted" from seccomp), which policy.LooksLikeSandboxDenial recognises;
// the model sees the command's output formatted like any other run, as the
// reference does. Helper setup failures are printed as
// "appserver sandbox: <reason>" with exit code 1, which the same heuristic
// classifies as a denial.
package sandbox
