package backend

import "github.com/appserver/appserver/internal/store"

// Cursor is a keyset position (store.Cursor), which the backends decode
// and the turns layer may mint for a turn (store.TurnCursor).
type Cursor = store.Cursor

// DecodeCursor parses a cursor of the given scope (store.DecodeCursor).
func DecodeCursor(s, scope string) (Cursor, error) { return store.DecodeCursor(s, scope) }
