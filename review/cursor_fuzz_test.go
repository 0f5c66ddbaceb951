package review

import "testing"

// FuzzCursor: any client-supplied cursor either decodes to a position that
// encodes back to the same cursor, or is ErrBadCursor; never a panic.
func FuzzCursor(f *testing.F) {
	f.Add(encodeCursor(1764000000000000000, "req_0123456789abcdef01234567"))
	f.Add("")
	f.Add("!!")
	f.Add("MTc2NDAwMDAwMDAwMDAwMDAwMDpyZXE")
	f.Fuzz(func(t *testing.T, c string) {
		ns, id, err := decodeCursor(c)
		if err != nil {
			if err != ErrBadCursor {
				t.Fatalf("error %v", err)
			}
			return
		}
		if ns2, id2, err := decodeCursor(encodeCursor(ns, id)); err != nil || ns2 != ns || id2 != id {
			t.Fatalf("round trip %d %q -> %d %q %v", ns, id, ns2, id2, err)
		}
	})
}
