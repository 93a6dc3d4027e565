package sqlite

import "context"

// IndexBatch runs one batch of the message indexer (indexBatch).
func (s *Store) IndexBatch(ctx context.Context) (n int, more bool, err error) {
	return s.indexBatch(ctx)
}

// ExtractBatch runs one extraction batch of the message indexer
// (extractBatch).
func (s *Store) ExtractBatch(ctx context.Context) (n int, more bool, err error) {
	return s.extractBatch(ctx)
}

// WALWrites returns how many writes SQLite has asked of write-ahead logs
// opened through the store's VFS, and how many the VFS made (walvfs.go).
func WALWrites() (asked, made int64) {
	return walWrites.asked.Load(), walWrites.made.Load()
}

// WALVFSName is the name of the store's VFS, for a test's own connection.
const WALVFSName = walVFSName

// SetWALFlushFault makes every write-out of a log's gathered writes fail
// while on: a failing disk, for the tests.
func SetWALFlushFault(on bool) { walFlushFault.Store(on) }

// WriterSynchronous returns PRAGMA synchronous on the writer connection.
func (s *Store) WriterSynchronous(ctx context.Context) (mode int, err error) {
	err = s.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&mode)
	return mode, err
}

// MaxEventRow is maxEventRow.
const MaxEventRow = maxEventRow
