package review

import (
	"context"
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
