// Package migrations embeds the SQL schema migrations of every store backend,
// one goose-format directory per dialect, so the binary carries its schema.
//
// It must not import any package of the module; internal/store runs the
// migrations.
package migrations
