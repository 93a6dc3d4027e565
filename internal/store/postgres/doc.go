// Package postgres is the production store.Store: Postgres through a pgx/v5
// connection pool. Several daemons may share one database.
//
// It must not import the other backends (internal/store/sqlite,
// internal/store/memory): what they share is in internal/store/internal/backend.
// Nor may it import anything above the store.
package postgres
