package review

import (
	"context"
	"fmt"
	"time"
)

// OpenSQLiteCheckpointEvery opens a store whose checkpointer runs every d.
func OpenSQLiteCheckpointEvery(ctx context.Context, file string, d time.Duration) (*SQLite, error) {
	return openSQLite(ctx, file, d, walRestartAt)
}

// OpenSQLiteWAL opens a store whose checkpointer runs every d and whose
// WAL starts over past restartAt bytes.
func OpenSQLiteWAL(ctx context.Context, file string, d time.Duration, restartAt int64) (*SQLite, error) {
	return openSQLite(ctx, file, d, restartAt)
}

// SetRetentionBatch sets how many items one retention transaction deletes,
// so the store suite deletes in several batches.
func SetRetentionBatch(s Store, n int) {
	switch s := s.(type) {
	case *SQLite:
		s.retentionBatch = n
	case *Postgres:
		s.retentionBatch = n
	default:
		panic(fmt.Sprintf("SetRetentionBatch: %T", s))
	}
}

// SetExportPage sets how many items one export query reads, so the store
// suite's exports take several pages.
func SetExportPage(s Store, n int) {
	switch s := s.(type) {
	case *SQLite:
		s.exportPage = n
	case *Postgres:
		s.exportPage = n
	default:
		panic(fmt.Sprintf("SetExportPage: %T", s))
	}
}
