package sqlite

import "context"

// IndexBatch runs one batch of the message indexer (indexBatch).
func (s *Store) IndexBatch(ctx context.Context) (n int, more bool, err error) {
	return s.indexBatch(ctx)
}
