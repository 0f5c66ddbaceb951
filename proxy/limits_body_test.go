package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// chunky reads from b at most n bytes per Read, as a chunked body does.
type chunky struct {
	b []byte
	n int
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.b))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}

// budget.read: a body of known or unknown size is read whole up to its
// limit (the limit itself included), one byte more is errTooLarge, and
// every hold is given back by drop.
func TestBudgetRead(t *testing.T) {
	const limit = 100 << 10
	for _, size := range []int{0, 1, 4095, 4096, 40 << 10, limit - 1, limit, limit + 1, 3 * limit} {
		for _, known := range []bool{true, false} {
			for _, step := range []int{1 << 20, 1000, 7} {
				if step == 7 && size > 50<<10 {
					continue
				}
				data := bytes.Repeat([]byte("ab"), size/2+1)[:size]
				bg := &budget{}
				n := int64(-1)
				if known {
					n = int64(size)
				}
				b, err := bg.read(context.Background(), &chunky{b: data, n: step}, n, limit, 1<<30)
				switch {
				case size > limit:
					if !errors.Is(err, errTooLarge) {
						t.Fatalf("size %d known %v step %d: %v, want errTooLarge", size, known, step, err)
					}
				case err != nil:
					t.Fatalf("size %d known %v step %d: %v", size, known, step, err)
				case !bytes.Equal(b.buf, data):
					t.Fatalf("size %d known %v step %d: read %d bytes, not the body", size, known, step, len(b.buf))
				case b.held < int64(size) || b.held > limit:
					t.Fatalf("size %d: held %d", size, b.held)
				}
				bg.drop(b)
				if bg.held.Load() != 0 {
					t.Fatalf("size %d known %v: %d still held", size, known, bg.held.Load())
				}
			}
		}
	}
	// A body shorter than its Content-Length, or a read error, fails and
	// holds nothing.
	bg := &budget{}
	if _, err := bg.read(context.Background(), bytes.NewReader([]byte("abc")), 10, limit, 1<<30); err == nil {
		t.Error("short body read whole")
	}
	if _, err := bg.read(context.Background(), iotest.ErrReader(io.ErrClosedPipe), -1, limit, 1<<30); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("read error: %v", err)
	}
	if bg.held.Load() != 0 {
		t.Errorf("%d held after failures", bg.held.Load())
	}
}

// The budget: holds up to the limit, the small-body reserve, the lone
// oversized hold, and refusal after busyWait.
func TestBudgetAcquire(t *testing.T) {
	bg := &budget{}
	ctx := context.Background()
	const limit = 16 << 20
	if err := bg.acquire(ctx, limit-limit/16, limit); err != nil {
		t.Fatal(err)
	}
	// Large holds stop at 15/16; small ones may use the rest.
	if err := bg.acquire(ctx, 32<<10, limit); err != nil {
		t.Fatalf("small hold refused: %v", err)
	}
	if err := bg.acquire(ctx, smallHold+1, limit); !errors.Is(err, errBusy) {
		t.Fatalf("large hold past 15/16: %v", err)
	}
	if bg.refused.Load() != 1 {
		t.Errorf("refused %d", bg.refused.Load())
	}
	bg.release(limit - limit/16)
	bg.release(32 << 10)
	if bg.held.Load() != 0 {
		t.Fatalf("held %d", bg.held.Load())
	}
	// Alone, a hold larger than the budget goes through.
	if err := bg.acquire(ctx, 2*limit, limit); err != nil {
		t.Fatal(err)
	}
	// A cancelled wait is the context's error, not busy.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := bg.acquire(cctx, 1, limit); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
	bg.release(2 * limit)
}

// FuzzParseArray: any bytes split into elements that alias the input, or
// an error; the elements joined back are the array.
func FuzzParseArray(f *testing.F) {
	for _, s := range []string{`[]`, `[1,"a",{"b":[2]}]`, ` [ null , true ] `, `[1,]`, `{}`, `[1] 2`, `["\u00e9"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		vs, err := parseArray(b)
		if err != nil {
			return
		}
		for _, v := range vs {
			if len(v) == 0 || !bytes.Contains(b, v) {
				t.Fatalf("element %q not from the input", v)
			}
		}
	})
}
