// Package migrations embeds the SQL schema migrations of every store backend,
// one goose-format directory per dialect, so the binary carries its schema.
package migrations

import "embed"

// FS holds postgres/*.sql and sqlite/*.sql.
//
//go:embed postgres/*.sql sqlite/*.sql
var FS embed.FS
