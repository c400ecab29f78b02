package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"
)

// TestCheckedAs: a partReader skips its own whole-stream sha256 only when
// kept tags of a unit whose check matched that same sum cover every byte
// it hands out, all of them present. The product's readers find their
// tags by range (sumsFor) and the manifest keeps frames disjoint, so a
// tag set of another sum or range does not reach checkedAs today; this
// holds the rule itself.
func TestCheckedAs(t *testing.T) {
	sum := sha256.Sum256([]byte("unit"))
	other := sha256.Sum256([]byte("another unit"))
	whole := func(off, end int64, s [32]byte) *blockSums {
		b, err := newBlockSums(off, end, 4)
		if err != nil {
			t.Fatal(err)
		}
		for range blockCount(off, end, 4) {
			b.sums = append(b.sums, [blockTagBytes]byte{})
		}
		b.unitSum = s
		return b
	}
	partial := whole(0, 16, sum)
	partial.sums = partial.sums[:len(partial.sums)-1]
	for _, c := range []struct {
		name       string
		blocks     *blockSums
		start, end int64
		want       bool
	}{
		{"no tags", nil, 0, 16, false},
		{"tags of the same unit, whole", whole(0, 16, sum), 0, 16, true},
		{"inside the unit", whole(0, 16, sum), 4, 12, true},
		{"tags of a unit with another sum", whole(0, 16, other), 0, 16, false},
		{"reader starts before the tags", whole(4, 16, sum), 0, 16, false},
		{"reader ends past the tags", whole(0, 12, sum), 0, 16, false},
		{"a tag missing", partial, 0, 16, false},
	} {
		r := &partReader{blocks: c.blocks, start: c.start, end: c.end}
		if got := r.checkedAs(sum); got != c.want {
			t.Errorf("%s: checkedAs %v, want %v", c.name, got, c.want)
		}
	}
}

// TestStreamDecodeWholeSum: the decode pass of a whole zstd stream with a
// chunk sum and no kept tags over it hashes the whole stream against
// that sum (the one check its bytes get on this pass), and reads right.
func TestStreamDecodeWholeSum(t *testing.T) {
	f := newGiantFixture(t)
	ctx := context.Background()
	chunks := []Chunk{{Key: giantKey, Kind: StreamZstd, Size: int64(len(f.obj)), Sum: sha256.Sum256(f.obj), HasSum: true}}
	set := NewSet(f.store, "bkt", chunks, Options{Readahead: -1, MaxFrameBytes: 1 << 20})
	t.Cleanup(set.Close)
	z, err := set.newZstream(ctx, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	whole, want := z.src.h != nil, z.src.want
	z.discard(set.cache, true)
	if !whole || want != chunks[0].Sum {
		t.Fatalf("decode pass of the whole stream hashes it: %v (against the chunk's sum: %v), want true", whole, want == chunks[0].Sum)
	}
	got, err := readChunk(ctx, set, 0, 0, int64(len(f.plain)))
	if err != nil || !bytes.Equal(got, f.plain) {
		t.Fatalf("read of the whole stream: %v (%d bytes, equal %v)", err, len(got), bytes.Equal(got, f.plain))
	}
}
