// Command gen writes the files generated from the protocol schema: the
// method tables of package api (api/protocol_gen.go), the table of every
// method, served or not, as a document (docs/protocol-methods.md) and as
// data for generators in other languages (api/protocol_methods.json, read
// by sdk/typescript's generator). It runs as
// `go generate ./api`, from the api folder.
//
// It imports api (for api.Unserved) and api/schema, nothing else of ours;
// nothing imports it.
package main
