package sqlite

import "context"

// IndexBatch runs one batch of the message indexer (indexBatch).
func (s *Store) IndexBatch(ctx context.Context) (int, error) { return s.indexBatch(ctx) }
