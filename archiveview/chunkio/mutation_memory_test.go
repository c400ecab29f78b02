package chunkio

// Written for mutants that survived scripts/mutation.sh (TESTING.md): the
// memory budget at exactly its limit and its peak, buffer rounding and the
// buffer pool's size classes, a frame of exactly the cache budget, the
// cache's option defaults, the planner's sub-range split without a
// minimum, and tar header checks one field at a time.

import (
	"archive/tar"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestBufSizeRounding(t *testing.T) {
	for _, c := range []struct{ n, want int64 }{
		{0, 0}, {1, 1}, {poolStep - 1, poolStep - 1}, {poolStep, poolStep},
		{poolStep + 1, 2 * poolStep}, {3 * poolStep, 3 * poolStep}, {3*poolStep + 7, 4 * poolStep},
	} {
		if got := bufSize(c.n); got != c.want {
			t.Errorf("bufSize(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestMemoryChargeAtTheLimit: the budget can be used to the last byte and
// not one byte more; the peak follows the highest use.
func TestMemoryChargeAtTheLimit(t *testing.T) {
	m := newReadLimits(cacheConfig{memory: 1000, maxParts: 1})
	charge := func(n int64) bool { _, _, _, ok := m.tryTake("", n, 0); return ok }
	if !charge(600) || !charge(400) {
		t.Fatal("charges up to exactly the limit refused")
	}
	if charge(1) {
		t.Fatal("a charge past the limit accepted")
	}
	m.unreserve(nil, 1000)
	if !charge(300) {
		t.Fatal("charge after release refused")
	}
	if _, p := m.MemoryInUse(); p != 1000 {
		t.Errorf("peak %d, want 1000", p)
	}
	m.unreserve(nil, 300)
}

// TestReserveWholeBudget: one reservation of exactly the budget succeeds;
// one byte more is refused at once with ErrBusy.
func TestReserveWholeBudget(t *testing.T) {
	c := NewFrameCache(0, WithMemory(1<<20))
	ctx := context.Background()
	if _, err := c.lim.reserve(ctx, 1<<20, demand); err != nil {
		t.Fatalf("reserving the whole budget: %v", err)
	}
	c.lim.unreserve(nil, 1<<20)
	if _, err := c.lim.reserve(ctx, 1<<20+1, demand); !errors.Is(err, ErrBusy) {
		t.Fatalf("reserving one byte more than the budget: %v, want ErrBusy", err)
	}
}

// TestSplitSubsWithoutMinimum: minSub 0 means no minimum sub-range size.
func TestSplitSubsWithoutMinimum(t *testing.T) {
	got := splitSubs(0, 100, 4, 0)
	if len(got) != 5 || got[0] != 0 || got[2] != 50 || got[4] != 100 {
		t.Fatalf("splitSubs(0, 100, 4, 0) = %v, want [0 25 50 75 100]", got)
	}
}

// TestCheckTarHeaderChecksumAlone: a changed byte that only the header
// checksum covers (the mtime field) is refused as not a tar header.
func TestCheckTarHeaderChecksumAlone(t *testing.T) {
	b := tarHeaderBlock(t, &tar.Header{Name: "/src/a.txt", Size: 10, Mode: 0o644, Typeflag: tar.TypeReg})
	if err := checkTarHeader(b, "/src/a.txt", 10); err != nil {
		t.Fatalf("test setup: %v", err)
	}
	b[136] ^= 1 // first byte of the mtime field
	if err := checkTarHeader(b, "/src/a.txt", 10); !errors.Is(err, ErrWrongMember) || !strings.Contains(err.Error(), "not a tar header") {
		t.Fatalf("header with a wrong checksum: %v", err)
	}
}

// TestCheckTarHeaderZeroSizeField: a size field of 0 stands for "too large
// for the octal field" only past 077777777777 bytes.
func TestCheckTarHeaderZeroSizeField(t *testing.T) {
	b := tarHeaderBlock(t, &tar.Header{Name: "/src/e", Size: 0, Mode: 0o644, Typeflag: tar.TypeReg})
	if err := checkTarHeader(b, "/src/e", 077777777777); err == nil {
		t.Error("size 0 accepted for a member of 077777777777 bytes (the octal field holds that)")
	}
	if err := checkTarHeader(b, "/src/e", 077777777777+1); err != nil {
		t.Errorf("size 0 for a member too large for the octal field: %v", err)
	}
}

// TestTarNameMatchesEdges: a name field of 99 bytes (and its NUL) may be
// a cut name; U+0080 is not ASCII.
func TestTarNameMatchesEdges(t *testing.T) {
	want := "/src/" + strings.Repeat("d", 120) + ".txt"
	if !tarNameMatches(want[:99], 99, want) {
		t.Error("a 99-byte cut of the name refused")
	}
	if !tarNameMatches("/src/ab", len("/src/ab"), "/src/a\u0080b") {
		t.Error("the name without U+0080 (as Go's PAX writer puts it in the ustar field) refused")
	}
}

// TestMemoryPeakFollowsEachCharge: the peak is raised by the charge that
// reaches it, the first one included, and a release does not lower it.
func TestMemoryPeakFollowsEachCharge(t *testing.T) {
	m := newReadLimits(cacheConfig{memory: 1000, maxParts: 1})
	for _, s := range []struct{ charge, release, peak int64 }{
		{600, 600, 600}, // the first charge sets the peak
		{100, 0, 600},   // below the peak: unchanged
		{600, 700, 700}, // 100 + 600 raises it
	} {
		if _, _, _, ok := m.tryTake("", s.charge, 0); !ok {
			t.Fatalf("charge of %d refused", s.charge)
		}
		if _, p := m.MemoryInUse(); p != s.peak {
			t.Fatalf("after charging %d: peak %d, want %d", s.charge, p, s.peak)
		}
		m.unreserve(nil, s.release)
	}
}

// TestBufPoolClassesFitTheirSizes: every buffer the pool hands out, new or
// reused, has the length asked for and the capacity bufSize charges for,
// whatever sizes were returned to the pool before (sizes in neighbouring
// 64 KiB classes, exact multiples and not).
func TestBufPoolClassesFitTheirSizes(t *testing.T) {
	var p bufPool
	for round := 0; round < 4; round++ {
		for _, n := range []int64{1000, poolStep, 2 * poolStep, 100 << 10, 150 << 10, 3 * poolStep} {
			b := p.getBuf(n, nil, nil)
			if int64(len(b.b)) != n || int64(cap(b.b)) != bufSize(n) {
				t.Fatalf("round %d: getBuf(%d) has len %d cap %d, want len %d cap %d", round, n, len(b.b), cap(b.b), n, bufSize(n))
			}
			p.put(b.b)
		}
	}
}

// TestFrameCacheKeepsFrameOfExactlyTheBudget: a frame whose buffer is
// exactly the cache budget is kept (the budget is "at most", not "less
// than").
func TestFrameCacheKeepsFrameOfExactlyTheBudget(t *testing.T) {
	const sz = 64 << 10
	c := NewFrameCache(sz)
	var calls atomic.Int32
	for i := 0; i < 2; i++ {
		b, err := c.get(context.Background(), fcKey(0), nil, fcFill(c, sz, 7, &calls))
		if err != nil {
			t.Fatal(err)
		}
		if len(b.b) != sz || b.b[sz-1] != 7 {
			t.Fatalf("get %d: %d bytes", i, len(b.b))
		}
		b.Release()
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("a frame of exactly the budget was filled %d times, want 1 (kept after the first)", n)
	}
}

// TestNewFrameCacheDefaults: options left out, zero or negative take their
// defaults; positive ones are kept.
func TestNewFrameCacheDefaults(t *testing.T) {
	type cfg struct {
		partSize           int64
		streamParts, slots int
		wait               time.Duration
	}
	got := func(c *FrameCache) cfg { return cfg{c.lim.partSize, c.lim.streamParts, c.lim.maxGets, c.lim.wait} }
	defaults := cfg{DefaultPartSize, DefaultStreamParts, DefaultMaxParts, DefaultMemoryWait}
	if g := got(NewFrameCache(1 << 20)); g != defaults {
		t.Errorf("no options: %+v, want %+v", g, defaults)
	}
	for _, n := range []int{0, -1} {
		c := NewFrameCache(1<<20, WithPartSize(int64(n)), WithStreamParts(n), WithMaxParts(n), WithMemoryWait(time.Duration(n)))
		if g := got(c); g != defaults {
			t.Errorf("options %d: %+v, want %+v", n, g, defaults)
		}
	}
	want := cfg{3 << 20, 3, 5, 7 * time.Second}
	c := NewFrameCache(1<<20, WithPartSize(want.partSize), WithStreamParts(want.streamParts), WithMaxParts(want.slots), WithMemoryWait(want.wait))
	if g := got(c); g != want {
		t.Errorf("positive options: %+v, want %+v", g, want)
	}
}
