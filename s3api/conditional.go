package s3api

import (
	"net/http"
	"strings"
	"time"
)

// condResult is the outcome of evaluating conditional request headers.
type condResult uint8

const (
	condProceed            condResult = iota // serve normally
	condNotModified                          // 304, no body
	condPreconditionFailed                   // 412 PreconditionFailed
)

// conditions are the four conditional headers of a GET or HEAD.
type conditions struct {
	ifMatch, ifNoneMatch               string // raw header values ("" = absent)
	ifModifiedSince, ifUnmodifiedSince string
}

// conditionsFrom reads the conditional headers of h. An ETag list may be
// split over several header lines (RFC 9110 §5.3): the lines are one list.
// A date on several lines is a list of dates, which is ignored (singleLine).
func conditionsFrom(h http.Header) conditions {
	return conditions{
		ifMatch:           etagLines(h.Values("If-Match")),
		ifNoneMatch:       etagLines(h.Values("If-None-Match")),
		ifModifiedSince:   singleLine(h.Values("If-Modified-Since")),
		ifUnmodifiedSince: singleLine(h.Values("If-Unmodified-Since")),
	}
}

// singleLine is the value of a header that holds one value (a date, a
// Range): its one non-blank line, or "" (absent) when it has none or more
// than one. Several lines are one comma-separated list (RFC 9110 §5.3),
// which is no valid date (§13.1.3, §13.1.4: ignored) and no single range
// (S3 answers a list of ranges with the whole object); the first line is
// never taken alone.
func singleLine(lines []string) string {
	out := ""
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if out != "" {
			return ""
		}
		out = l
	}
	return out
}

// etagLines joins the non-blank lines of an ETag list header into one
// list ("" when there is none: the header is absent, as with one empty line).
func etagLines(lines []string) string {
	var out string
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if out != "" {
			out += ","
		}
		out += l
	}
	return out
}

// evaluate applies AWS S3's precedence (s3-compat-notes §2.5) for an object
// whose unquoted ETag is etag and whose Last-Modified (whole seconds) is mod:
//
//  1. If-Match present: false → 412. If-Unmodified-Since is then ignored.
//     Otherwise If-Unmodified-Since present and the object was modified
//     after it → 412.
//  2. If-None-Match present: matches → 304. If-Modified-Since is then
//     ignored. Otherwise If-Modified-Since present and the object was not
//     modified after it → 304.
//
// Unparseable dates are ignored, as HTTP requires. ETag lists and "*" are
// supported; quotes and a W/ prefix are ignored when comparing.
func (c conditions) evaluate(etag string, mod time.Time) condResult {
	mod = mod.UTC().Truncate(time.Second)
	if c.ifMatch != "" {
		if !etagListMatches(c.ifMatch, etag) {
			return condPreconditionFailed
		}
	} else if c.ifUnmodifiedSince != "" {
		if t, ok := parseHTTPDate(c.ifUnmodifiedSince); ok && mod.After(t) {
			return condPreconditionFailed
		}
	}
	if c.ifNoneMatch != "" {
		if etagListMatches(c.ifNoneMatch, etag) {
			return condNotModified
		}
	} else if c.ifModifiedSince != "" {
		if t, ok := parseHTTPDate(c.ifModifiedSince); ok && !mod.After(t) {
			return condNotModified
		}
	}
	return condProceed
}

// etagListMatches reports whether the comma-separated ETag list in header
// contains etag (unquoted) or "*".
func etagListMatches(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		p := normalizeETag(part)
		if p == "*" || (p != "" && p == etag) {
			return true
		}
	}
	return false
}

// normalizeETag trims spaces, a weak W/ prefix and surrounding quotes.
// Clients send listing ETags with or without quotes (s3fs, DuckDB).
func normalizeETag(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[0] == 'W' || s[0] == 'w') && s[1] == '/' {
		s = s[2:]
	}
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	// DuckDB-style entity-encoded quotes from a listing.
	s = strings.TrimPrefix(s, "&quot;")
	s = strings.TrimSuffix(s, "&quot;")
	s = strings.TrimPrefix(s, "&#34;")
	s = strings.TrimSuffix(s, "&#34;")
	return s
}

// parseHTTPDate parses the three date formats HTTP/1.1 allows (RFC 1123,
// RFC 850, ANSI C asctime), returning UTC.
func parseHTTPDate(s string) (time.Time, bool) {
	t, err := http.ParseTime(strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// ifRangeHolds evaluates If-Range (RFC 9110 §13.1.5) for an object whose
// unquoted ETag is etag and whose Last-Modified (whole seconds) is mod. No
// header holds. An entity tag holds when it is strong and equal to the
// object's (a weak tag never holds); a date holds when it is exactly the
// object's Last-Modified. Anything else, an unparseable value or a
// repeated header, does not hold: the Range is ignored and the whole
// object is sent, which is always a correct answer.
func ifRangeHolds(values []string, etag string, mod time.Time) bool {
	switch len(values) {
	case 0:
		return true
	case 1:
	default:
		return false
	}
	v := strings.TrimSpace(values[0])
	switch {
	case v == "":
		return false
	case strings.HasPrefix(v, "W/") || strings.HasPrefix(v, "w/"):
		return false
	case v[0] == '"':
		return len(v) >= 2 && v[len(v)-1] == '"' && v[1:len(v)-1] == etag
	}
	t, ok := parseHTTPDate(v)
	return ok && t.Equal(mod.UTC().Truncate(time.Second))
}
