// Package store owns the persistence of transcripts: threads, their turns and
// the items of those turns. Store is the only persistence interface of
// appserver; the postgres and sqlite subpackages implement it durably and
// the memory subpackage in process memory (for ephemeral threads), all with
// the same semantics, which the storetest contract suite checks.
//
// The store family (this package and the packages below it) must not
// import any package of the module outside the family but internal/apperr
// and migrations: records reach it as opaque JSON payloads, so it needs
// neither api nor the layers above it. This package must not import its
// subpackages either; they import it.
package store
