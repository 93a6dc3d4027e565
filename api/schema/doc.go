// Package schema holds the reference JSON schema of the Codex app-server
// protocol that package api targets (codex-cli TargetVersion, committed
// under v<version>/ with how to regenerate it), and reads it: the methods
// of each family with their params and result definitions, the
// experimental ones (those only the --experimental bundle has), and the
// definitions themselves.
//
// It serves three checks and one generator, all outside the daemon:
//
//   - GoTables, MethodsDoc and MethodsJSON are what `go generate ./api`
//     writes (api/protocol_gen.go, docs/protocol-methods.md,
//     api/protocol_methods.json); api's tests fail when the committed
//     files are stale.
//   - Drift, with the method table of internal/server and Named (which
//     methods the daemon's code names), fails when a method of the schema
//     is neither served nor listed in api.Unserved with a reason.
//   - Checker holds the hand-written Go types of every served method to
//     their definitions (api/wiretypes_test.go lists the roots).
//
// Why the wire types are checked rather than generated: the api package's
// types carry choices the schema cannot express and the golden transcripts
// depend on byte for byte: which optional fields are written as null and
// which left out (0.169.0's own habits, not the schema's), List and Map
// for arrays and objects that must never be null, Nullable for params
// that tell absent from null, hand-written marshalers for the tagged
// unions (ThreadItem's pooled encoder is a hot path), and a few fields of
// our own. A generator would have to be told all of that per field, and
// would rewrite what is tuned; a checker lets the types stay as they are
// and says, per field, where they and the schema part. The method tables,
// which carry no such choices, are generated. A new method's types are
// written in api by hand and checked at once: the check names every
// property they lack.
//
// It imports nothing of ours. Only tests and api/internal/gen import it:
// the daemon does not carry the schema.
package schema
