package review

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/panics"
)

// A panic in a group commit fails the batch's items with a *panics.Error
// (their callers spool them) instead of ending the process with the
// items unanswered: the others of the batch are stored alone, and the
// writer goes on storing. (Before: the panic ended the process.)
func TestBatcherCommitPanic(t *testing.T) {
	stored := map[string]bool{}
	b := newBatcher(1, time.Second, func(_ context.Context, batch []createReq) ([]bool, error) {
		for _, r := range batch {
			if r.it.ID == "boom" {
				panic("the item's text: sk-secret")
			}
		}
		out := make([]bool, len(batch))
		for i, r := range batch {
			stored[r.it.ID], out[i] = true, true
		}
		return out, nil
	})
	defer b.close()
	_, err := b.create(context.Background(), &Item{ID: "boom"}, false)
	var pe *panics.Error
	if !errors.As(err, &pe) || pe.Type != "string" || len(pe.Stack) == 0 {
		t.Fatalf("create of the panicking item: %v, want a *panics.Error with a stack", err)
	}
	for _, id := range []string{"a", "b"} {
		if created, err := b.create(context.Background(), &Item{ID: id}, false); err != nil || !created {
			t.Fatalf("create %s after the panic: %v %v", id, created, err)
		}
	}
	if !stored["a"] || !stored["b"] {
		t.Errorf("stored %v", stored)
	}
}
