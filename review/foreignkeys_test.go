package review

import (
	"context"
	"database/sql"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
)

// TestSQLiteForeignKeysMatchTheSchema: foreign key enforcement is on
// exactly when a table has a foreign key. Migration 0010 removed the last
// one (review_rules' cascade from reviews), and the store kept
// foreign_keys(1) on every connection: a pragma for nothing, which read as
// if deletes still cascaded. A future foreign key must turn it back on.
func TestSQLiteForeignKeysMatchTheSchema(t *testing.T) {
	s := freshSQLite(t)
	ctx := context.Background()
	tables := testkit.QueryColumn[string](t, s.db, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if len(tables) == 0 {
		t.Fatal("no tables")
	}
	var fks []string
	for _, tbl := range tables {
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_list(?)`, tbl).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			fks = append(fks, tbl)
		}
	}
	for name, db := range map[string]*sql.DB{"reader": s.db, "writer": s.w} {
		var on int
		if err := db.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&on); err != nil {
			t.Fatal(err)
		}
		if (on == 1) != (len(fks) > 0) {
			t.Errorf("%s connection: foreign_keys %d with foreign keys in %v (of %v)", name, on, fks, tables)
		}
	}
}
