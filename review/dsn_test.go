package review

import (
	"context"
	"strings"
	"testing"
)

// A DSN that does not parse must not come back, password included, in
// the error serve logs (every retry) and replay --reviews prints. pgx
// quotes the DSN in its parse errors with the password masked only where
// it finds one: key=value pairs spaced around "=" (which libpq and pgx
// accept) kept it.
func TestPostgresDSNErrorHoldsNoPassword(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"host=localhost password = s3cretpw sslmode=bogus", "sslmode is invalid"},
		{"host=localhost password= s3cretpw sslmode=bogus", "sslmode is invalid"},
		{"host=localhost password=s3cretpw port=abc", "invalid port"},
		{"postgres://u:s3cretpw@localhost:abc/db", "invalid port"},
		{"postgres://u:s3cretpw@localhost/db?sslmode=bogus", "sslmode is invalid"},
	} {
		_, err := OpenPostgres(context.Background(), tc.dsn, PostgresOptions{})
		if err == nil {
			t.Fatalf("%s: opened", tc.dsn)
		}
		if msg := err.Error(); strings.Contains(msg, "s3cretpw") || !strings.Contains(msg, tc.want) {
			t.Errorf("DSN %q: error %q (want the reason %q, no password)", tc.dsn, msg, tc.want)
		}
	}
}
