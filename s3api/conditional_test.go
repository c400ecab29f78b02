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

// FuzzConditions: no input panics; If-Match with the exact ETag in any
// quoting never fails; a parsed date round-trips through the header format.
func FuzzConditions(f *testing.F) {
	f.Add(`"e"`, `*`, "Mon, 02 Jan 2006 15:04:05 GMT", "garbage", "e")
	f.Add(`W/"e", "f"`, ``, "Monday, 02-Jan-06 15:04:05 GMT", "Mon Jan  2 15:04:05 2006", "f")
	f.Add(``, `"x"`, ``, ``, `x`)
	f.Fuzz(func(t *testing.T, im, inm, ims, ius, etag string) {
		c := conditions{ifMatch: im, ifNoneMatch: inm, ifModifiedSince: ims, ifUnmodifiedSince: ius}
		mod := time.Unix(1136214245, 0)
		_ = c.evaluate(etag, mod)
		for _, d := range []string{ims, ius} {
			if tm, ok := parseHTTPDate(d); ok {
				if tm.Location() != time.UTC {
					t.Fatalf("parseHTTPDate(%q) not UTC", d)
				}
			}
		}
		// Real ETags (hex, hex-N, sha256-hex) never contain commas or spaces.
		if etag != "" && !strings.ContainsAny(etag, ", \t") && normalizeETag(etag) == etag && normalizeETag(`"`+etag+`"`) == etag {
			ok := conditions{ifMatch: `"` + etag + `"`}.evaluate(etag, mod)
			if ok != condProceed {
				t.Fatalf("If-Match of the exact ETag %q failed", etag)
			}
		}
	})
}
