// Package sqlite is the embedded default store.Store: one SQLite file in WAL
// mode through modernc.org/sqlite (no cgo), so appserver runs with zero setup
// on one machine. It keeps the semantics of the postgres package.
//
// It must not import the other backends (internal/store/postgres,
// internal/store/memory): what they share is in internal/store/internal/backend.
// Nor may it import anything above the store.
package sqlite
