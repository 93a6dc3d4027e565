// Package storetest is the store contract suite: every store.Store backend
// runs it, so that all of them behave alike.
//
// It must not import the backends (they import it from their tests) nor
// anything above the store, and only test files may import it.
package storetest
