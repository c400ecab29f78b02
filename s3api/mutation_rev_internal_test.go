package s3api

// Internal tests written for the hand mutants of the rev-mutation audit
// that no test killed (TESTING.md, "Mutation audit (rev-mutation)").

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/auth"
)

// TestOwnerMismatchRepeated: x-amz-expected-bucket-owner given more than
// once (twice in the headers, or in the headers and the query) never
// matches, even when every value names the owner; once, it matches only
// the owner.
func TestOwnerMismatchRepeated(t *testing.T) {
	const owner = "0123456789ab"
	tests := []struct {
		name   string
		header []string
		query  []string
		want   bool
	}{
		{"absent", nil, nil, false},
		{"header, owner", []string{owner}, nil, false},
		{"header, other", []string{"111122223333"}, nil, true},
		{"query, owner", nil, []string{owner}, false},
		{"query, other", nil, []string{"111122223333"}, true},
		{"header twice, owner both", []string{owner, owner}, nil, true},
		{"header twice, owner first", []string{owner, "111122223333"}, nil, true},
		{"query twice, owner both", nil, []string{owner, owner}, true},
		{"header and query, owner both", []string{owner}, []string{owner}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tc.header {
				h.Add("X-Amz-Expected-Bucket-Owner", v)
			}
			var q auth.Query
			for _, v := range tc.query {
				q = append(q, auth.Param{Key: "x-amz-expected-bucket-owner", Value: v})
			}
			if got := ownerMismatch(h, q, owner); got != tc.want {
				t.Fatalf("ownerMismatch(header %q, query %q) = %v, want %v", tc.header, tc.query, got, tc.want)
			}
		})
	}
}

// TestParseRangeSuffixJustPastSize: a suffix range one byte longer than
// the object (bytes=-(size+1)) is the whole object, as any longer one is;
// TestParseRange has only suffixes far past the size.
func TestParseRangeSuffixJustPastSize(t *testing.T) {
	for _, size := range []int64{1, 2, 100} {
		for _, k := range []int64{size, size + 1, size + 2} {
			h := "bytes=-" + strconv.FormatInt(k, 10)
			r := parseRange(h, size)
			if r.kind != rangeSatisfiable || r.start != 0 || r.length != size {
				t.Fatalf("parseRange(%q, %d) = %+v, want the whole object (start 0, length %d)", h, size, r, size)
			}
		}
	}
}

// TestReadErrorNoRestorer: a restore behind a store that has archive
// classes but cannot restore (chunkio.ErrNoRestorer, which wraps no
// backend sentinel) is 501 NotImplemented saying so, not a 500;
// TestReadErrorCode covers only backend.ErrNotImplemented.
func TestReadErrorNoRestorer(t *testing.T) {
	err := fmt.Errorf("archive a: key k: %w", fmt.Errorf("object c: %w", chunkio.ErrNoRestorer))
	code, msg := readError(err)
	if e := (&apiError{Code: code}); code != errNotImplemented || e.status() != http.StatusNotImplemented {
		t.Fatalf("%v: %s %d, want NotImplemented 501", err, code, e.status())
	}
	if !strings.Contains(msg, "cannot restore objects") {
		t.Fatalf("message %q does not say the store cannot restore", msg)
	}
}
