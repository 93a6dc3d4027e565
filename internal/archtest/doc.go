// Package archtest holds the architecture tests of the module: the
// dependency rules between our packages, written as data (which packages
// must not import which), checked against the import graph that `go list`
// reports, and the rule that every package states its place in a doc.go.
//
// It has no code outside its tests. It imports no package of the module:
// it reads the graph from the go command, so it sees what the compiler
// sees, test files included.
package archtest
