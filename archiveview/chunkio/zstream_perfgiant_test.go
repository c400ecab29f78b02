package chunkio

import (
	"bytes"
	"context"
	"testing"
)

// TestGiantDecodeNoWholeSumOverCheckedBlocks: the decode pass of a giant
// frame whose span was checked whole, with block sums kept over all of
// it, hashes no whole-stream sha256: every byte it hands the decoder was
// checked against a block tag taken by the check that matched the same
// sum, so a second sha256 of the whole frame vouched for nothing more.
// Without sums (another frame's unit, or none kept) it still does. On the
// old code the decode hashed the whole frame again (a fourth pass over
// the compressed bytes).
func TestGiantDecodeNoWholeSumOverCheckedBlocks(t *testing.T) {
	f := newGiantFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		check     bool
		wantWhole bool
	}{
		{"no unit checked", false, true},
		{"span checked whole, sums kept", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := f.set(t)
			if tc.check {
				if err := ensureUnits(ctx, set, 0, []Unit{f.unit()}); err != nil {
					t.Fatal(err)
				}
				if set.sumsFor(0, f.frame.COff, f.frame.COff+f.frame.CSize) == nil {
					t.Fatal("fixture: the check kept no block sums")
				}
			}
			z, err := set.newZstream(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			whole := z.src.h != nil
			z.discard(set.cache, true)
			if whole != tc.wantWhole {
				t.Fatalf("decode pass hashes the whole stream: %v, want %v", whole, tc.wantWhole)
			}
			got, err := readChunk(ctx, set, 0, 0, f.frame.USize)
			if err != nil || !bytes.Equal(got, f.plain) {
				t.Fatalf("read of the whole frame: %v (%d bytes, equal %v)", err, len(got), bytes.Equal(got, f.plain))
			}
		})
	}
}
