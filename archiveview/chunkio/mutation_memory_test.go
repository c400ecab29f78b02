package chunkio

// Written for mutants that survived scripts/mutation.sh (TESTING.md): the
// memory budget at exactly its limit, buffer rounding, the planner's
// sub-range split without a minimum, and tar header checks one field at a
// time.

import (
	"archive/tar"
	"context"
	"errors"
	"strings"
	"testing"
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
	m := newMemory(1000, 0)
	if !m.tryCharge(600) || !m.tryCharge(400) {
		t.Fatal("charges up to exactly the limit refused")
	}
	if m.tryCharge(1) {
		t.Fatal("a charge past the limit accepted")
	}
	m.release(1000)
	if !m.tryCharge(300) {
		t.Fatal("charge after release refused")
	}
	if p := m.peak.Load(); p != 1000 {
		t.Errorf("peak %d, want 1000", p)
	}
	m.release(300)
}

// TestReserveWholeBudget: one reservation of exactly the budget succeeds;
// one byte more is refused at once with ErrBusy.
func TestReserveWholeBudget(t *testing.T) {
	c := NewFrameCache(0, WithMemory(1<<20))
	ctx := context.Background()
	if err := c.reserve(ctx, 1<<20, demand); err != nil {
		t.Fatalf("reserving the whole budget: %v", err)
	}
	c.unreserve(1 << 20)
	if err := c.reserve(ctx, 1<<20+1, demand); !errors.Is(err, ErrBusy) {
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
