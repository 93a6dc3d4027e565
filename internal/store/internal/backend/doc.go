// Package backend holds what the store backends share beyond the Store
// contract itself: cursors, query defaults, the normalised write plan, the
// SQL dialect of each backend with the keyset query builder that takes it,
// and the reads, written once over a small DB interface each backend adapts
// its driver to.
//
// It sits between the store interface and the backends: it must not import
// internal/store/memory, internal/store/postgres or internal/store/sqlite,
// nor anything above the store.
package backend
