package testkit_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
)

// recordTB is a testing.TB that keeps what Errorf reports.
type recordTB struct {
	testing.TB
	errs []string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestGoroutineCheck(t *testing.T) {
	// A goroutine that ends in time is no leak.
	rt := &recordTB{TB: t}
	check := testkit.GoroutineCheck(rt)
	done := make(chan struct{})
	go func() { <-done }()
	close(done)
	check()
	if len(rt.errs) != 0 {
		t.Fatalf("ended goroutine reported: %v", rt.errs)
	}

	// One still blocked after the wait is reported with the stacks.
	rt = &recordTB{TB: t}
	check = testkit.GoroutineCheck(rt)
	stuck := make(chan struct{})
	go func() { <-stuck }()
	check()
	close(stuck)
	if len(rt.errs) != 1 || !strings.Contains(rt.errs[0], "goroutine leak") || !strings.Contains(rt.errs[0], "TestGoroutineCheck") {
		t.Fatalf("leak not reported: %v", rt.errs)
	}
}

// LeakCheck also waits for descriptors: one opened and closed in time is
// no leak; one left open is reported, with what it points to.
func TestLeakCheck(t *testing.T) {
	rt := &recordTB{TB: t}
	check := testkit.LeakCheck(rt)
	f, err := os.CreateTemp(t.TempDir(), "closed")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	check()
	if len(rt.errs) != 0 {
		t.Fatalf("closed file reported: %v", rt.errs)
	}

	rt = &recordTB{TB: t}
	check = testkit.LeakCheck(rt)
	f, err = os.CreateTemp(t.TempDir(), "left-open")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check()
	if len(rt.errs) != 1 || !strings.Contains(rt.errs[0], "descriptors") || !strings.Contains(rt.errs[0], filepath.Base(f.Name())) {
		t.Fatalf("open file not reported: %v", rt.errs)
	}
}
