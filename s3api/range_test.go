package s3api

import (
	"fmt"
	"testing"
)

// Checklist 17-20: the AWS range table (s3-compat-notes §2.4).
func TestParseRange(t *testing.T) {
	tests := []struct {
		name   string
		h      string
		size   int64
		kind   rangeKind
		start  int64
		length int64
	}{
		{"absent", "", 100, rangeNone, 0, 0},
		{"a-b", "bytes=10-19", 100, rangeSatisfiable, 10, 10},
		{"a-b whole still 206", "bytes=0-99", 100, rangeSatisfiable, 0, 100},
		{"a-b end clamped", "bytes=90-1000", 100, rangeSatisfiable, 90, 10},
		{"a-b end == size clamped", "bytes=90-100", 100, rangeSatisfiable, 90, 10},
		{"a-b end == size, whole", "bytes=0-100", 100, rangeSatisfiable, 0, 100},
		{"a-b end == size, one byte", "bytes=0-1", 1, rangeSatisfiable, 0, 1},
		{"single byte", "bytes=0-0", 100, rangeSatisfiable, 0, 1},
		{"last byte", "bytes=99-99", 100, rangeSatisfiable, 99, 1},
		{"a-", "bytes=93-", 100, rangeSatisfiable, 93, 7},
		{"-k", "bytes=-7", 100, rangeSatisfiable, 93, 7},
		{"-k == n", "bytes=-100", 100, rangeSatisfiable, 0, 100},
		{"-k > n whole", "bytes=-500", 100, rangeSatisfiable, 0, 100},
		{"-k huge", "bytes=-99999999999999999999999", 100, rangeSatisfiable, 0, 100},
		{"end huge clamped", "bytes=5-99999999999999999999999", 100, rangeSatisfiable, 5, 95},
		{"a == n", "bytes=100-", 100, rangeUnsatisfiable, 0, 0},
		{"a > n", "bytes=200-300", 100, rangeUnsatisfiable, 0, 0},
		{"empty object a-b", "bytes=0-0", 0, rangeUnsatisfiable, 0, 0},
		{"empty object a-", "bytes=0-", 0, rangeUnsatisfiable, 0, 0},
		{"empty object -k", "bytes=-5", 0, rangeUnsatisfiable, 0, 0},
		{"-0", "bytes=-0", 100, rangeUnsatisfiable, 0, 0},
		{"multi", "bytes=0-1,5-6", 100, rangeNone, 0, 0},
		{"b < a malformed", "bytes=10-5", 100, rangeNone, 0, 0},
		{"no unit", "10-20", 100, rangeNone, 0, 0},
		{"other unit", "items=1-2", 100, rangeNone, 0, 0},
		{"no dash", "bytes=10", 100, rangeNone, 0, 0},
		{"only dash", "bytes=-", 100, rangeNone, 0, 0},
		{"negative", "bytes=--5", 100, rangeNone, 0, 0},
		{"plus sign", "bytes=+5-10", 100, rangeNone, 0, 0},
		{"letters", "bytes=a-b", 100, rangeNone, 0, 0},
		{"empty spec", "bytes=", 100, rangeNone, 0, 0},
		{"case-insensitive unit", "Bytes=1-2", 100, rangeSatisfiable, 1, 2},
		{"spaces", " bytes= 1 - 2 ", 100, rangeSatisfiable, 1, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := parseRange(tc.h, tc.size)
			if got.kind != tc.kind {
				t.Fatalf("parseRange(%q, %d) kind = %d, want %d", tc.h, tc.size, got.kind, tc.kind)
			}
			if tc.kind == rangeSatisfiable && (got.start != tc.start || got.length != tc.length) {
				t.Fatalf("parseRange(%q, %d) = [%d,+%d), want [%d,+%d)", tc.h, tc.size, got.start, got.length, tc.start, tc.length)
			}
		})
	}
}

// FuzzParseRange checks the invariants of any answer: a satisfiable range
// lies inside the object and is non-empty; nothing panics.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"", "bytes=0-0", "bytes=-1", "bytes=5-", "bytes=1-2,3-4", "bytes=9-1", "bytes=-0", "bytes= 3 - 4", "bytes=99999999999999999999-", "bytes=5-10"} {
		f.Add(s, int64(10))
		f.Add(s, int64(0))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -(size + 1)
		}
		r := parseRange(h, size)
		switch r.kind {
		case rangeSatisfiable:
			if r.length <= 0 || r.start < 0 || r.start >= size || r.start+r.length > size {
				t.Fatalf("parseRange(%q, %d) = bad satisfiable range %+v", h, size, r)
			}
		case rangeNone, rangeUnsatisfiable:
		default:
			t.Fatalf("unknown kind %d", r.kind)
		}
		// A canonical a-b form must round-trip.
		if r.kind == rangeSatisfiable {
			again := parseRange(fmt.Sprintf("bytes=%d-%d", r.start, r.end()), size)
			if again != r {
				t.Fatalf("round trip of %+v gave %+v", r, again)
			}
		}
	})
}
