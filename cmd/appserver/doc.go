// Command appserver is the daemon that runs coding-agent conversations for
// remote clients over websocket JSON-RPC (Codex app-server protocol v2).
//
// It is the composition root and nothing more: it reads flags and the
// configuration, builds every service complete, starts and stops them in one
// order, and runs the subcommands serve, migrate, exec, mockmodel and
// version. Product logic belongs in the internal packages, where it can be
// tested without starting the daemon.
//
// It may import every package of the module; no package may import it, test
// files included.
package main
