package s3api

import (
	"strconv"
	"strings"
)

// rangeKind is the outcome of interpreting a Range header against an object
// of a known size, following AWS S3 (not RFC 9110) where they differ.
type rangeKind uint8

const (
	rangeNone          rangeKind = iota // no usable range: serve 200 with the whole object
	rangeSatisfiable                    // serve 206 with [start, start+length)
	rangeUnsatisfiable                  // serve 416 InvalidRange with Content-Range: bytes */size
)

// byteRange is a resolved single byte range.
type byteRange struct {
	kind   rangeKind
	start  int64
	length int64
}

// end returns the inclusive last byte offset of a satisfiable range.
func (r byteRange) end() int64 { return r.start + r.length - 1 }

// parseRange interprets a Range header value for an object of size bytes.
//
// The rules are AWS S3's (s3-compat-notes §2.4):
//   - "" → rangeNone.
//   - "bytes=a-b" with a < size → 206, b clamped to size-1; b < a is malformed.
//   - "bytes=a-" with a < size → 206 to the end.
//   - "bytes=-k", k > 0 → 206 of the last min(k, size) bytes (a suffix longer
//     than the object yields the whole object, still 206).
//   - a ≥ size, or any well-formed range on an empty object, or "bytes=-0"
//     → rangeUnsatisfiable.
//   - several ranges ("a-b,c-d") or anything malformed → rangeNone (the whole
//     object with 200, as AWS does).
//
// It is a pure function; it never panics on any input.
func parseRange(h string, size int64) byteRange {
	none := byteRange{kind: rangeNone}
	if h == "" {
		return none
	}
	h = strings.TrimSpace(h)
	const unit = "bytes="
	if len(h) < len(unit) || !strings.EqualFold(h[:len(unit)], unit) {
		return none
	}
	spec := strings.TrimSpace(h[len(unit):])
	if spec == "" || strings.Contains(spec, ",") {
		return none
	}
	dash := strings.IndexByte(spec, '-')
	if dash < 0 {
		return none
	}
	first, last := strings.TrimSpace(spec[:dash]), strings.TrimSpace(spec[dash+1:])
	if first == "" {
		// Suffix range: the last k bytes.
		k, ok := parseDigits(last)
		if !ok {
			return none
		}
		if k == 0 || size == 0 {
			return byteRange{kind: rangeUnsatisfiable}
		}
		if k > size {
			k = size
		}
		return byteRange{kind: rangeSatisfiable, start: size - k, length: k}
	}
	a, ok := parseDigits(first)
	if !ok {
		return none
	}
	var b int64 = -1
	if last != "" {
		b, ok = parseDigits(last)
		if !ok || b < a {
			return none
		}
	}
	if a >= size {
		return byteRange{kind: rangeUnsatisfiable}
	}
	if b < 0 || b >= size {
		b = size - 1
	}
	return byteRange{kind: rangeSatisfiable, start: a, length: b - a + 1}
}

// parseDigits parses a non-empty run of ASCII digits as a non-negative int64.
// Signs, spaces inside and overflow are rejected. A value too large for int64
// is clamped to MaxInt64 (it is "beyond the end" for any real object).
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Only a range error is possible here: all digits.
		return 1<<63 - 1, true
	}
	return v, true
}
