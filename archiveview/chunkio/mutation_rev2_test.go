package chunkio

// Tests written for the mutants of the Stop 32 follow-up (rev-mutation2,
// scripts/hand-mutants.py row K) that no test noticed.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// blockSumsFixture is one Direct object of n bytes in a file store, behind
// a fault hook that only acts once armed.
type blockSumsFixture struct {
	good  []byte
	dir   string
	mu    sync.Mutex
	hook  func(faults.Request) faults.Fault // nil: no fault
	store backend.Store
}

func newBlockSumsFixture(t *testing.T, n int) *blockSumsFixture {
	t.Helper()
	f := &blockSumsFixture{good: make([]byte, n), dir: t.TempDir()}
	for i := range f.good {
		f.good[i] = byte(i*13 + i>>11)
	}
	p := filepath.Join(f.dir, "bkt", filepath.FromSlash(blockSumsKey))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, f.good, 0o644); err != nil {
		t.Fatal(err)
	}
	f.store = faults.NewFaulty(backend.NewFileStore(f.dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.hook == nil || r.Op != "range" {
			return faults.Fault{}
		}
		return f.hook(r)
	}})
	return f
}

const blockSumsKey = "s/uploads/u/files/d"

// arm makes every later GET of a range get fault.
func (f *blockSumsFixture) arm(fault faults.Fault) {
	f.armWith(func(faults.Request) faults.Fault { return fault })
}

func (f *blockSumsFixture) armWith(hook func(faults.Request) faults.Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = hook
}

func (f *blockSumsFixture) chunk() Chunk {
	return Chunk{Key: blockSumsKey, Kind: Direct, Size: int64(len(f.good)), Sum: sha256.Sum256(f.good), HasSum: true}
}

// check runs the whole-object check (the first ranged read of the object)
// and returns its error.
func check(set *Set, size int64) error {
	src, err := set.OpenExtent(context.Background(), Extent{Chunk: 0, Off: 0, Length: size}, 1000, 100)
	if err != nil {
		return err
	}
	sr := &segReader{src: src}
	defer sr.Close()
	_, err = io.ReadAll(sr)
	return err
}

// TestBlockSumsNoByteOfUncheckedBlock: a partReader hands out no byte of a
// block before that block matched its sum, even when more of its part has
// arrived than the block being checked. Mutant K02 (head's avail not cut
// at the checked bytes) served a block damaged in transit, unchecked.
func TestBlockSumsNoByteOfUncheckedBlock(t *testing.T) {
	const part = 1 << 20 // four blocks per part
	f := newBlockSumsFixture(t, 2*part+555)
	set := NewSet(f.store, "bkt", []Chunk{f.chunk()}, Options{SmallVerifyBytes: -1,
		Cache: NewFrameCache(64<<20, WithPartSize(part), WithStreamParts(2))})
	defer set.Close()
	if err := check(set, int64(len(f.good))); err != nil {
		t.Fatalf("the check: %v", err)
	}
	if set.sumsFor(0, 0, int64(len(f.good))) == nil {
		t.Fatal("the check kept no block sums (the test needs them)")
	}
	flip := int64(sumBlockBytes + 5) // in the part's second block
	f.arm(faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{flip}})
	const start, end = 10, 700 << 10
	src, err := set.Range(context.Background(), 0, start, end)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r := src.(*rangeSource).r
	if err := r.fill(); err != nil {
		t.Fatal(err)
	}
	// The first part arrives whole before the first Read.
	p := r.queue[0]
	if _, err := p.wait(context.Background(), p.end-p.off); err != nil {
		t.Fatal(err)
	}
	f.armWith(nil) // the re-read is clean
	got := make([]byte, end-start)
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatalf("read after a block was damaged once in transit: %v, want the right bytes", err)
	}
	if !bytes.Equal(got, f.good[start:end]) {
		i := 0
		for i < len(got) && got[i] == f.good[start+int64(i)] {
			i++
		}
		t.Fatalf("wrong bytes served from object byte %d (the damaged byte is %d): a block was handed out before its sum matched", start+int64(i), flip)
	}
}

// TestBlockSumsWholeBlockBeforeCheck: the block a ranged read checks is
// waited for whole before its sum is taken. With blocks the part size
// (300 KiB: not a multiple of 256 KiB) a part arrives in 256 KiB steps,
// and over a slow link a block's tail lands later than its head; mutant
// K03 (waiting for the byte at pos only) took the sum of a block partly
// arrived, mismatched twice and failed a sound read.
func TestBlockSumsWholeBlockBeforeCheck(t *testing.T) {
	const part = 300 << 10
	f := newBlockSumsFixture(t, 3*part+123)
	// One stream part: each part is one GET (not split in sub-ranges
	// that arrive together).
	var slow atomic.Bool
	set := NewSet(&pausingStore{Store: f.store, on: &slow}, "bkt", []Chunk{f.chunk()}, Options{SmallVerifyBytes: -1,
		Cache: NewFrameCache(64<<20, WithPartSize(part), WithStreamParts(1))})
	defer set.Close()
	if err := check(set, int64(len(f.good))); err != nil {
		t.Fatalf("the check: %v", err)
	}
	if set.sumBlock() != part || set.sumsFor(0, 0, int64(len(f.good))) == nil {
		t.Fatalf("block %d, sums kept %v: the test needs %d-byte blocks with sums", set.sumBlock(), set.sumsFor(0, 0, int64(len(f.good))) != nil, part)
	}
	// Every GET now pauses before its bytes past the first 256 KiB (a
	// slow link: a block's tail lands in the part's buffer 50 ms after its
	// head); the first one also damages a byte of the first block's tail,
	// which a sound reader reads once more.
	var flipped atomic.Bool
	f.armWith(func(r faults.Request) faults.Fault {
		if r.Off == 0 && flipped.CompareAndSwap(false, true) {
			return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{280 << 10}}
		}
		return faults.Fault{}
	})
	slow.Store(true)
	src, err := set.OpenExtent(context.Background(), Extent{Chunk: 0, Off: 0, Length: int64(len(f.good))}, 20, 2*part)
	if err != nil {
		t.Fatal(err)
	}
	sr := &segReader{src: src}
	defer sr.Close()
	got, err := io.ReadAll(sr)
	if err != nil {
		t.Fatalf("a sound ranged read over a slow link: %v", err)
	}
	if !bytes.Equal(got, f.good[20:20+2*part]) {
		t.Fatal("wrong bytes served")
	}
}

// pausingStore's bodies (when on) pause 50 ms before the bytes past their
// first 256 KiB are read.
type pausingStore struct {
	backend.Store
	on *atomic.Bool
}

func (s *pausingStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	rc, info, err := s.Store.ReadRange(ctx, bucket, key, off, length, ifMatch)
	if err != nil || !s.on.Load() {
		return rc, info, err
	}
	return &pausingBody{ReadCloser: rc, ctx: ctx}, info, nil
}

type pausingBody struct {
	io.ReadCloser
	ctx    context.Context
	n      int64
	paused bool
}

func (b *pausingBody) Read(p []byte) (int, error) {
	const head = 256 << 10
	if b.n < head && int64(len(p)) > head-b.n {
		p = p[:head-b.n]
	}
	if b.n >= head && !b.paused {
		b.paused = true
		select {
		case <-time.After(50 * time.Millisecond):
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// TestBlockSumsCapAndFailedCheck: the block sums are charged to a bound
// (a thirty-second of the cache budget, at least 64 KiB): a check that
// would need more keeps none; and a check that fails (its sha256, or its
// GET) gives its charge back at once, not at Close. Mutants K05 (no
// bound), K06 (the bound the whole budget), K08 and K09 (no release on
// the mismatch or the read error) kept or leaked the charge.
func TestBlockSumsCapAndFailedCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int
		part     int64
		budget   int64
		wrongSum bool
		fault    faults.Fault
		wantErr  error // nil: the check succeeds
		wantKept bool
	}{
		// 5 MB in 1000-byte blocks: 81 920 bytes of 16-byte tags, over
		// the 64 KiB bound of a 1 MiB cache (under the budget itself).
		{"over the bound", 5000 << 10, 1000, 1 << 20, false, faults.Fault{}, nil, false},
		{"within the bound", 1000 << 10, 1000, 1 << 20, false, faults.Fault{}, nil, true},
		{"sha256 mismatch", 1 << 20, 256 << 10, 64 << 20, true, faults.Fault{}, ErrChecksum, false},
		{"GET fails", 1 << 20, 256 << 10, 64 << 20, false, faults.Fault{Kind: faults.FaultError, Err: backend.ErrAccessDenied}, backend.ErrAccessDenied, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newBlockSumsFixture(t, tc.size)
			c := f.chunk()
			if tc.wrongSum {
				c.Sum[0] ^= 1
			}
			if tc.fault.Kind != faults.NoFault {
				f.arm(tc.fault)
			}
			cache := NewFrameCache(tc.budget, WithPartSize(tc.part), WithMemory(256<<20))
			set := NewSet(f.store, "bkt", []Chunk{c}, Options{SmallVerifyBytes: -1, Cache: cache})
			defer set.Close()
			err := check(set, int64(tc.size))
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("the check: %v", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("the check: %v, want %v", err, tc.wantErr)
			}
			kept := set.sumsFor(0, 0, int64(tc.size)) != nil
			used := cache.sumBytes.Load()
			if kept != tc.wantKept || (used != 0) != tc.wantKept {
				t.Fatalf("sums kept %v, %d bytes charged to the cache's bound (limit %d) before Close; want kept %v", kept, used, max(cache.budget/32, 64<<10), tc.wantKept)
			}
		})
	}
}

// TestForgetCorruptAfterBound: a remembered data failure is forgotten once
// older than ForgetCorruptAfter, not before. Mutant F01 (twice the bound)
// kept it, and the chunk refused, for twice as long.
func TestForgetCorruptAfterBound(t *testing.T) {
	now := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	set := NewSet(backend.NewFileStore(t.TempDir()), "bkt", []Chunk{{Key: "k", Kind: Direct, Size: 10}},
		Options{ForgetCorruptAfter: time.Minute, Now: func() time.Time { return now }})
	defer set.Close()
	rs := set.state(0)
	rs.markFailed(now)
	for _, tc := range []struct {
		after      time.Duration
		remembered bool
	}{
		{59 * time.Second, true},
		{61 * time.Second, false},
	} {
		now = time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC).Add(tc.after)
		set.state(0) // forgets expired failures
		if got := rs.failedAt.Load() != 0; got != tc.remembered {
			t.Fatalf("%v after a data failure (ForgetCorruptAfter 1m): remembered %v, want %v", tc.after, got, tc.remembered)
		}
	}
}

// TestRepinOnlyCorruptChunk: a response with another ETag starts a chunk's
// state afresh only when it holds a remembered data failure; a sound
// chunk stays pinned to the object it was opened over (its reads answer
// ErrChanged: parts of two objects are never served as one). Mutant F06
// (no corrupt test) started any chunk afresh.
func TestRepinOnlyCorruptChunk(t *testing.T) {
	now := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	set := NewSet(backend.NewFileStore(t.TempDir()), "bkt", []Chunk{{Key: "k", Kind: Direct, Size: 10}},
		Options{ForgetCorruptAfter: time.Minute, Now: func() time.Time { return now }})
	defer set.Close()
	rs := set.state(0)
	set.repinChanged(0, rs)
	if set.states[0].Load() != rs {
		t.Fatal("a chunk with no remembered failure was started afresh (unpinned) on another ETag")
	}
	rs.markFailed(now)
	set.repinChanged(0, rs)
	if set.states[0].Load() == rs {
		t.Fatal("a corrupt chunk whose object was replaced was not started afresh")
	}
}

// TestClassesRestoreIntelligentTieringListed: an Intelligent-Tiering
// object known from a listing (which has no access tier) is HEADed before
// a restore is decided: in an archive tier it needs one. Mutant N07 (no
// HEAD) took the listing's empty tier for the frequent tier and refused
// the restore as not archived, without asking the store.
func TestClassesRestoreIntelligentTieringListed(t *testing.T) {
	key := "a/uploads/u1/chunks/c0"
	cs, g, ck := classesFixture(t, key)
	g.SetClass("bkt", key, backend.ClassIntelligentTiering, backend.TierArchiveAccess)
	c := NewClasses(cs, "bkt", ClassOptions{RestoreTTL: time.Minute, Now: ck.Now})
	ctx := context.Background()
	if err := c.Load(ctx, []string{key}); err != nil {
		t.Fatal(err)
	}
	if oc := c.Cached(key); oc.Class != backend.ClassIntelligentTiering || oc.TierKnown {
		t.Fatalf("after the listing: %+v, want Intelligent-Tiering with its tier unknown (the test's premise)", oc)
	}
	if _, err := c.Restore(ctx, key, backend.RestoreRequest{}); err != nil {
		t.Fatalf("restore of an Intelligent-Tiering object in %s known from a listing: %v, want it sent", backend.TierArchiveAccess, err)
	}
	if n := cs.n("restore"); n != 1 {
		t.Fatalf("%d RestoreObject requests, want 1", n)
	}
}

// TestForgetCorruptDefaultFiveMinutes: without Options.ForgetCorruptAfter
// a remembered data failure is forgotten after the documented five
// minutes. Mutant F02 (DefaultForgetCorrupt 50 minutes) kept a corrupt
// chunk refused ten times as long; no test asked for the default.
func TestForgetCorruptDefaultFiveMinutes(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	now := t0
	set := NewSet(backend.NewFileStore(t.TempDir()), "bkt", []Chunk{{Key: "k", Kind: Direct, Size: 10}},
		Options{Now: func() time.Time { return now }})
	defer set.Close()
	rs := set.state(0)
	rs.markFailed(t0)
	for _, tc := range []struct {
		after      time.Duration
		remembered bool
	}{
		{5*time.Minute - time.Second, true},
		{5*time.Minute + time.Second, false},
	} {
		now = t0.Add(tc.after)
		set.state(0)
		if got := rs.failedAt.Load() != 0; got != tc.remembered {
			t.Fatalf("%v after a data failure (default ForgetCorruptAfter): remembered %v, want %v", tc.after, got, tc.remembered)
		}
	}
}
