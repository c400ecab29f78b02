package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// giantFixture is one giant frame (a 3 MiB zstd frame over MaxFrameBytes
// of 1 MiB) in a file store, behind a fault hook that flips byte flipAt of
// the object in every range GET covering it while armed (once, unless
// always).
type giantFixture struct {
	plain, obj []byte
	frame      Frame
	store      backend.Store
	armed      atomic.Bool
	always     bool
	flips      atomic.Int32
	flipAt     int64
}

const giantKey = "s/uploads/u/chunks/c0.tar.zst"

func newGiantFixture(t *testing.T) *giantFixture {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 24))
	f := &giantFixture{plain: make([]byte, 3<<20)}
	for i := range f.plain {
		f.plain[i] = byte('a' + rng.IntN(8)) // compresses, but not to nothing
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	f.obj = enc.EncodeAll(f.plain, nil)
	if len(f.obj) < 1<<20 {
		t.Fatalf("fixture: the frame is %d bytes, want it over a block grid of several blocks", len(f.obj))
	}
	f.flipAt = int64(len(f.obj)) / 2
	dir := t.TempDir()
	p := filepath.Join(dir, "bkt", filepath.FromSlash(giantKey))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, f.obj, 0o644); err != nil {
		t.Fatal(err)
	}
	f.frame = Frame{COff: 0, CSize: int64(len(f.obj)), USize: int64(len(f.plain)), Sum: sha256.Sum256(f.obj), HasSum: true}
	f.store = faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		covers := r.Op == "get" || r.Op == "range" && r.Off <= f.flipAt && f.flipAt < r.Off+r.Len
		if !f.armed.Load() || !covers {
			return faults.Fault{}
		}
		if n := f.flips.Add(1); !f.always && n > 1 {
			return faults.Fault{}
		}
		return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{f.flipAt}}
	}})
	return f
}

func (f *giantFixture) set(t *testing.T) *Set {
	chunks := []Chunk{{Key: giantKey, Kind: FramedZstd, Frames: []Frame{f.frame}, Size: int64(len(f.obj))}}
	set := NewSet(f.store, "bkt", chunks, Options{Readahead: -1, MaxFrameBytes: 1 << 20})
	t.Cleanup(set.Close)
	return set
}

func (f *giantFixture) unit() Unit {
	return Unit{Kind: UnitSpan, Off: f.frame.COff, N: f.frame.CSize, Sum: f.frame.Sum}
}

// TestGiantDecodeFlipAfterCheck: with no whole-stream sum in the decode
// pass, a byte of the giant frame flipped in transit on the decode's GET
// (after the span's check) is still caught before the decoder sees it:
// flipped once, its block is read again and the right bytes served;
// flipped on every GET, the read fails with ErrChecksum and serves
// nothing wrong. (Guard test: the block tags carry it; it passes on the
// old code too.)
func TestGiantDecodeFlipAfterCheck(t *testing.T) {
	for _, always := range []bool{false, true} {
		f := newGiantFixture(t)
		f.always = always
		set := f.set(t)
		ctx := context.Background()
		if err := ensureUnits(ctx, set, 0, []Unit{f.unit()}); err != nil {
			t.Fatal(err)
		}
		f.armed.Store(true)
		got, err := readChunk(ctx, set, 0, 0, f.frame.USize)
		switch {
		case f.flips.Load() == 0:
			t.Fatal("no GET was flipped")
		case always && !errors.Is(err, ErrChecksum):
			t.Fatalf("flipped on every GET: %v, want ErrChecksum", err)
		case always && len(got) > 0 && !bytes.Equal(got, f.plain[:len(got)]):
			t.Fatal("flipped on every GET: wrong bytes served before the failure")
		case !always && (err != nil || !bytes.Equal(got, f.plain)):
			t.Fatalf("flipped once: %v (%d bytes), want the right bytes read again", err, len(got))
		}
	}
}

// TestBlockTagsKeyed: the block sums are a MAC under a key of their own
// check, not a public hash of the bytes: two checks of the same object
// keep different tags for the same block, and neither is the block's
// sha256. (On the old code both were the block's sha256.)
func TestBlockTagsKeyed(t *testing.T) {
	f := newBlockSumsFixture(t, 1<<20)
	var tags [][]byte
	for range 2 {
		set := NewSet(f.store, "bkt", []Chunk{f.chunk()}, Options{SmallVerifyBytes: -1})
		if err := ensureUnits(context.Background(), set, 0, []Unit{{Kind: UnitObject, Sum: f.chunk().Sum}}); err != nil {
			t.Fatal(err)
		}
		b := set.sumsFor(0, 0, int64(len(f.good)))
		if b == nil || len(b.sums) == 0 {
			t.Fatal("fixture: no block sums kept")
		}
		tags = append(tags, bytes.Clone(b.sums[0][:]))
		lo, hi := b.bounds(0)
		if pub := sha256.Sum256(f.good[lo:hi]); bytes.HasPrefix(pub[:], tags[len(tags)-1]) {
			t.Fatalf("the tag of block %d-%d is its public sha256", lo, hi)
		}
		set.Close()
	}
	if bytes.Equal(tags[0], tags[1]) {
		t.Fatal("two checks of the same bytes keep the same tag: not keyed by the check")
	}
}
