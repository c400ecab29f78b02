package s3api

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Checklist 15-16: conditionals with AWS precedence (s3-compat-notes §2.5).
func TestConditionsEvaluate(t *testing.T) {
	mod := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	const etag = "abc123-7"
	before := mod.Add(-time.Hour).Format(http.TimeFormat)
	same := mod.Format(http.TimeFormat)
	after := mod.Add(time.Hour).Format(http.TimeFormat)
	tests := []struct {
		name string
		c    conditions
		want condResult
	}{
		{"none", conditions{}, condProceed},
		{"if-match quoted", conditions{ifMatch: `"abc123-7"`}, condProceed},
		{"if-match unquoted", conditions{ifMatch: `abc123-7`}, condProceed},
		{"if-match weak", conditions{ifMatch: `W/"abc123-7"`}, condProceed},
		{"if-match entity quoted", conditions{ifMatch: `&quot;abc123-7&quot;`}, condProceed},
		{"if-match list", conditions{ifMatch: `"x", "abc123-7"`}, condProceed},
		{"if-match star", conditions{ifMatch: `*`}, condProceed},
		{"if-match wrong", conditions{ifMatch: `"nope"`}, condPreconditionFailed},
		{"if-match empty quotes", conditions{ifMatch: `""`}, condPreconditionFailed},
		{"if-unmodified-since before", conditions{ifUnmodifiedSince: before}, condPreconditionFailed},
		{"if-unmodified-since same", conditions{ifUnmodifiedSince: same}, condProceed},
		{"if-unmodified-since after", conditions{ifUnmodifiedSince: after}, condProceed},
		{"if-unmodified-since garbage ignored", conditions{ifUnmodifiedSince: "yesterday"}, condProceed},
		{"AWS: if-match true + if-unmodified-since false → 200", conditions{ifMatch: etag, ifUnmodifiedSince: before}, condProceed},
		{"if-none-match match", conditions{ifNoneMatch: `"abc123-7"`}, condNotModified},
		{"if-none-match star", conditions{ifNoneMatch: `*`}, condNotModified},
		{"if-none-match other", conditions{ifNoneMatch: `"zzz"`}, condProceed},
		{"if-modified-since same", conditions{ifModifiedSince: same}, condNotModified},
		{"if-modified-since after", conditions{ifModifiedSince: after}, condNotModified},
		{"if-modified-since before", conditions{ifModifiedSince: before}, condProceed},
		{"if-modified-since garbage ignored", conditions{ifModifiedSince: "soon"}, condProceed},
		{"if-none-match differs + modified since: 200", conditions{ifNoneMatch: `"zzz"`, ifModifiedSince: before}, condProceed},
		{"if-none-match differs wins over if-modified-since unmodified: 200", conditions{ifNoneMatch: `"zzz"`, ifModifiedSince: after}, condProceed},
		{"AWS: if-none-match matches (false) + if-modified-since modified (true) → 304", conditions{ifNoneMatch: etag, ifModifiedSince: before}, condNotModified},
		{"412 beats 304", conditions{ifMatch: `"nope"`, ifNoneMatch: etag}, condPreconditionFailed},
		{"asctime format", conditions{ifModifiedSince: mod.Format(time.ANSIC)}, condNotModified},
		{"rfc850 format", conditions{ifModifiedSince: mod.Format(time.RFC850)}, condNotModified},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Sub-second mtimes are compared at whole seconds, like the header.
			if got := tc.c.evaluate(etag, mod.Add(700*time.Millisecond)); got != tc.want {
				t.Fatalf("evaluate(%+v) = %d, want %d", tc.c, got, tc.want)
			}
		})
	}
}

func TestNormalizeETag(t *testing.T) {
	for in, want := range map[string]string{
		`"abc"`: "abc", `abc`: "abc", ` "abc" `: "abc", `W/"abc"`: "abc", `w/abc`: "abc",
		`&#34;abc&#34;`: "abc", `"`: `"`, ``: ``, `*`: `*`,
	} {
		if got := normalizeETag(in); got != want {
			t.Errorf("normalizeETag(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzConditions checks evaluate against the rules its doc states, for any
// header values: the answer is one of the three; it is the If-Match half
// (If-Match, If-Unmodified-Since: proceed or 412) unless that half
// proceeds, then the If-None-Match half (If-None-Match, If-Modified-Since:
// proceed or 304); a present If-Match (If-None-Match) alone decides its
// half and makes the date beside it ignored; a valid date alone decides by
// comparing whole seconds; If-Match with the exact ETag in any quoting
// never fails; sub-second parts of the mtime change nothing; parsed dates
// are UTC.
func FuzzConditions(f *testing.F) {
	f.Add(`"e"`, `*`, "Mon, 02 Jan 2006 15:04:05 GMT", "garbage", "e")
	f.Add(`W/"e", "f"`, ``, "Monday, 02-Jan-06 15:04:05 GMT", "Mon Jan  2 15:04:05 2006", "f")
	f.Add(``, `"x"`, ``, ``, `x`)
	f.Add(``, ``, "Mon, 02 Jan 2006 15:04:04 GMT", "Mon, 02 Jan 2006 15:04:06 GMT", "e")
	f.Add(`"nope"`, `"e"`, ``, ``, `e`)
	f.Add(`"e"`, ``, ``, "Mon, 02 Jan 2006 15:04:04 GMT", "e")
	f.Add(``, `"f"`, "Mon, 02 Jan 2006 15:04:06 GMT", ``, "e")
	f.Fuzz(func(t *testing.T, im, inm, ims, ius, etag string) {
		c := conditions{ifMatch: im, ifNoneMatch: inm, ifModifiedSince: ims, ifUnmodifiedSince: ius}
		mod := time.Unix(1136214245, 0).UTC()
		got := c.evaluate(etag, mod)
		if got != condProceed && got != condNotModified && got != condPreconditionFailed {
			t.Fatalf("evaluate = %d, not a result", got)
		}
		if again := c.evaluate(etag, mod.Add(999*time.Millisecond)); again != got {
			t.Fatalf("a sub-second mtime changed %d into %d", got, again)
		}
		pre := conditions{ifMatch: im, ifUnmodifiedSince: ius}.evaluate(etag, mod)
		post := conditions{ifNoneMatch: inm, ifModifiedSince: ims}.evaluate(etag, mod)
		if pre == condNotModified || post == condPreconditionFailed {
			t.Fatalf("halves out of range: If-Match half %d, If-None-Match half %d", pre, post)
		}
		want := post
		if pre == condPreconditionFailed {
			want = condPreconditionFailed
		}
		if got != want {
			t.Fatalf("evaluate = %d; halves %d and %d make %d", got, pre, post, want)
		}
		if im != "" {
			want := condPreconditionFailed
			if etagListMatches(im, etag) {
				want = condProceed
			}
			if pre != want {
				t.Fatalf("If-Match %q on %q: %d, want %d whatever If-Unmodified-Since says", im, etag, pre, want)
			}
		} else if d, ok := parseHTTPDate(ius); ok {
			if (pre == condPreconditionFailed) != mod.After(d) {
				t.Fatalf("If-Unmodified-Since %q (%v), mtime %v: %d", ius, d, mod, pre)
			}
		} else if pre != condProceed {
			t.Fatalf("no If-Match and an unusable If-Unmodified-Since %q: %d", ius, pre)
		}
		if inm != "" {
			want := condProceed
			if etagListMatches(inm, etag) {
				want = condNotModified
			}
			if post != want {
				t.Fatalf("If-None-Match %q on %q: %d, want %d whatever If-Modified-Since says", inm, etag, post, want)
			}
		} else if d, ok := parseHTTPDate(ims); ok {
			if (post == condNotModified) != !mod.After(d) {
				t.Fatalf("If-Modified-Since %q (%v), mtime %v: %d", ims, d, mod, post)
			}
		} else if post != condProceed {
			t.Fatalf("no If-None-Match and an unusable If-Modified-Since %q: %d", ims, post)
		}
		for _, d := range []string{ims, ius} {
			if tm, ok := parseHTTPDate(d); ok && tm.Location() != time.UTC {
				t.Fatalf("parseHTTPDate(%q) not UTC", d)
			}
		}
		// Real ETags (hex, hex-N, sha256-hex) never contain commas or spaces.
		if etag != "" && !strings.ContainsAny(etag, ", \t") && normalizeETag(etag) == etag && normalizeETag(`"`+etag+`"`) == etag {
			for _, q := range []string{`"` + etag + `"`, etag, `W/"` + etag + `"`} {
				if r := (conditions{ifMatch: q, ifUnmodifiedSince: ius}).evaluate(etag, mod); r != condProceed {
					t.Fatalf("If-Match %s of the exact ETag failed: %d", q, r)
				}
			}
		}
	})
}

// An ETag list split over several If-Match / If-None-Match lines is one
// list (RFC 9110 §5.3): a later line's matching ETag counts. The old code
// read the first line only, so a matching If-Match on the second line was
// a false 412 (a download that fails) and a matching If-None-Match on the
// second line a 200 where 304 is due.
func TestConditionsFromRepeatedLines(t *testing.T) {
	mod := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	const etag = "abc123-7"
	for _, tc := range []struct {
		name string
		h    http.Header
		want condResult
	}{
		{"if-match second line", http.Header{"If-Match": {`"other"`, `"abc123-7"`}}, condProceed},
		{"if-match no line matches", http.Header{"If-Match": {`"other"`, `"more"`}}, condPreconditionFailed},
		{"if-none-match second line", http.Header{"If-None-Match": {`"other"`, `"abc123-7"`}}, condNotModified},
		{"if-none-match no line matches", http.Header{"If-None-Match": {`"other"`, `"more"`}}, condProceed},
		{"if-match empty lines are absent", http.Header{"If-Match": {"", " "}}, condProceed},
		{"if-match empty line and a match", http.Header{"If-Match": {"", `"abc123-7"`}}, condProceed},
	} {
		if got := conditionsFrom(tc.h).evaluate(etag, mod); got != tc.want {
			t.Errorf("%s: evaluate = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// A date condition on several header lines is a list of dates, which
// RFC 9110 (§13.1.3, §13.1.4) says to ignore, whatever the lines' order;
// blank lines count as absent, as for the ETag lists.
func TestDateConditionsOnRepeatedLines(t *testing.T) {
	mod := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	const etag = "abc123-7"
	before := mod.Add(-time.Hour).Format(http.TimeFormat)
	after := mod.Add(time.Hour).Format(http.TimeFormat)
	for _, tc := range []struct {
		name string
		h    http.Header
		want condResult
	}{
		{"if-modified-since not modified first", http.Header{"If-Modified-Since": {after, before}}, condProceed},
		{"if-modified-since not modified second", http.Header{"If-Modified-Since": {before, after}}, condProceed},
		{"if-modified-since twice the same", http.Header{"If-Modified-Since": {after, after}}, condProceed},
		{"if-unmodified-since failing first", http.Header{"If-Unmodified-Since": {before, after}}, condProceed},
		{"if-unmodified-since failing second", http.Header{"If-Unmodified-Since": {after, before}}, condProceed},
		{"if-modified-since and a blank line", http.Header{"If-Modified-Since": {"", after}}, condNotModified},
		{"if-unmodified-since and a blank line", http.Header{"If-Unmodified-Since": {before, " "}}, condPreconditionFailed},
	} {
		if got := conditionsFrom(tc.h).evaluate(etag, mod); got != tc.want {
			t.Errorf("%s: evaluate = %d, want %d", tc.name, got, tc.want)
		}
	}
}
