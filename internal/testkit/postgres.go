package testkit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresDSNEnv names a PostgreSQL the tests may use (any database the
// DSN's user can create schemas in). Unset, the test binary starts its own
// through scripts/postgres.sh and stops it at the end.
const PostgresDSNEnv = "CONTRACTD_TEST_PG_DSN"

var pg struct {
	main    bool // PostgresMain is running the tests: it will stop what starts
	server  sharedServer
	dir     string // started by us: scripts/postgres.sh stop dir
	started bool
}

// PostgresMain runs the tests of a package that uses Postgres and stops
// the server it started, if any: call it from TestMain,
//
//	func TestMain(m *testing.M) { os.Exit(testkit.PostgresMain(m)) }
//
// The server starts on the first Postgres call, so tests that need none
// (e.g. -run limited to others) never pay for it.
func PostgresMain(m *testing.M) int {
	pg.main = true
	code := m.Run()
	if err := StopPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "testkit: stopping postgres:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// StopPostgres stops the server this process started (no-op otherwise).
// PostgresMain calls it; a TestMain with more to do may call it itself.
func StopPostgres() error {
	if !pg.started {
		return nil
	}
	pg.started = false
	script, err := repoFile("scripts/postgres.sh")
	if err != nil {
		return err
	}
	out, err := exec.Command(script, "stop", pg.dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// PostgresServer returns the DSN of the test server, starting it on first
// use. It fails the test (never skips) when no server can be had.
func PostgresServer(t testing.TB) string {
	t.Helper()
	return pg.server.get(t, "postgres", PostgresDSNEnv, func() (string, error) {
		if !pg.main {
			return "", errors.New("the package's TestMain must call testkit.PostgresMain, which stops the server the tests start")
		}
		dsn, dir, err := startPostgres()
		if err != nil {
			return "", err
		}
		pg.dir, pg.started = dir, true
		// Child processes (the e2e binaries' helpers) see the same server.
		os.Setenv(PostgresDSNEnv, dsn)
		return dsn, nil
	})
}

func startPostgres() (dsn, dir string, err error) {
	script, err := repoFile("scripts/postgres.sh")
	if err != nil {
		return "", "", err
	}
	// The first run may install the package (apt-get); later ones take ~1 s.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, "start")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("%s start: %v\n%s", script, err, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "CONTRACTD_TEST_PG_DSN":
			dsn = v
		case "CONTRACTD_TEST_PG_DIR":
			dir = v
		}
	}
	if dsn == "" || dir == "" {
		return "", "", fmt.Errorf("%s start printed no DSN:\n%s\n%s", script, out, stderr.Bytes())
	}
	// A test binary that panics or is killed never reaches its teardown:
	// a watcher in its own session stops the server once this process is
	// gone (and exits by itself when the teardown removed the directory).
	w := exec.Command(script, "watch", dir, strconv.Itoa(os.Getpid()))
	w.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := w.Start(); err == nil {
		go w.Wait()
	}
	return dsn, dir, nil
}

// PostgresDSN returns the DSN of a fresh, empty schema on the test server
// (its search_path), dropped when the test ends: each store under test
// starts from nothing without paying for a database per test.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	base := PostgresServer(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pgExec(ctx, base, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("postgres for tests: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pgExec(ctx, base, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("postgres for tests: dropping %s: %v", schema, err)
		}
	})
	return WithSearchPath(base, schema)
}

// WithSearchPath returns dsn (URL or keyword/value form) with search_path
// set to schema.
func WithSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

func pgExec(ctx context.Context, dsn, sql string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql)
	return err
}

// OwnPostgres is a throwaway PostgreSQL one test owns, for tests that
// stop and restart it (an outage) without disturbing the shared one.
type OwnPostgres struct {
	DSN    string
	dir    string
	script string
}

// StartPostgres starts a server of the test's own through
// scripts/postgres.sh; it is removed when the test ends.
func StartPostgres(t testing.TB) *OwnPostgres {
	t.Helper()
	script, err := repoFile("scripts/postgres.sh")
	if err != nil {
		t.Fatalf("postgres for tests: %v", err)
	}
	dsn, dir, err := startPostgres()
	if err != nil {
		t.Fatalf("postgres for tests: %v", err)
	}
	p := &OwnPostgres{DSN: dsn, dir: dir, script: script}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("postgres for tests: stop: %v: %s", err, out)
		}
	})
	return p
}

// Pause stops the server and keeps its data: clients see it down.
func (p *OwnPostgres) Pause(t testing.TB) { p.run(t, "pause") }

// Resume starts it again on the same port.
func (p *OwnPostgres) Resume(t testing.TB) { p.run(t, "resume") }

func (p *OwnPostgres) run(t testing.TB, what string) {
	t.Helper()
	if out, err := exec.Command(p.script, what, p.dir).CombinedOutput(); err != nil {
		t.Fatalf("postgres %s: %v: %s", what, err, out)
	}
}
