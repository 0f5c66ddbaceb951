package review

import (
	"context"
	"time"
)

// OpenSQLiteCheckpointEvery opens a store whose checkpointer runs every d.
func OpenSQLiteCheckpointEvery(ctx context.Context, file string, d time.Duration) (*SQLite, error) {
	return openSQLite(ctx, file, d)
}
