package auth

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Param is one decoded query parameter.
type Param struct {
	Key, Value string
}

// Query is a request's query string, decoded but kept in request order and
// with repeats, because the canonical query signs every pair. It is what
// the s3api router parses once per request and what both the signature
// check and the handlers read.
type Query []Param

// ParseQuery splits a raw query on '&' and decodes each key and value with
// form rules ('+' is a space), like the signers do. Empty parts ("a&&b")
// are skipped; a part without '=' is a key with an empty value. Unlike
// url.ParseQuery it keeps ';' as data and fails on a bad escape instead of
// dropping the pair, so that a pair we could not decode never silently
// falls out of what is signed: the error is an *Error (400
// InvalidArgument) naming the parameter, and the Query is then nil.
func ParseQuery(raw string) (Query, error) {
	if raw == "" {
		return nil, nil
	}
	var q Query
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, val, _ := strings.Cut(part, "=")
		dk, err := url.QueryUnescape(k)
		if err != nil {
			return nil, &Error{Code: "InvalidArgument", Status: http.StatusBadRequest,
				Message: "malformed query string: bad escape in parameter name " + strconv.Quote(k)}
		}
		dv, err := url.QueryUnescape(val)
		if err != nil {
			return nil, &Error{Code: "InvalidArgument", Status: http.StatusBadRequest,
				Message: "malformed query string: bad escape in value of " + strconv.Quote(dk)}
		}
		q = append(q, Param{dk, dv})
	}
	return q, nil
}

// Has reports whether key occurs in q (with any value, also an empty one).
func (q Query) Has(key string) bool {
	for _, p := range q {
		if p.Key == key {
			return true
		}
	}
	return false
}

// Get returns the first value of key, "" when key is absent.
func (q Query) Get(key string) string {
	v, _ := q.first(key)
	return v
}

// first returns the first value of key and how many times key occurs.
func (q Query) first(key string) (string, int) {
	var v string
	n := 0
	for _, p := range q {
		if p.Key == key {
			if n == 0 {
				v = p.Value
			}
			n++
		}
	}
	return v, n
}

// canonicalURI is the SigV4 canonical path for S3: the request path decoded
// once and encoded once, keeping '/'. It does not clean "//", "." or "..":
// S3 keys may contain them and S3 signers do not normalise.
func canonicalURI(u *url.URL) string {
	// u.Path is the wire path decoded once (net/http keeps RawPath only as
	// a hint for re-escaping, and only when it decodes to Path).
	p := u.Path
	if p == "" {
		p = "/"
	}
	return URIEncode(p, true)
}

// canonicalQuery is the SigV4 canonical query string: every pair except the
// one named skip, keys and values AWS-encoded, sorted by key then value,
// joined with '&'. An absent value is written as "key=".
func canonicalQuery(q Query, skip string) string {
	pairs := make([][2]string, 0, len(q))
	for _, p := range q {
		if skip != "" && p.Key == skip {
			continue
		}
		pairs = append(pairs, [2]string{URIEncode(p.Key, false), URIEncode(p.Value, false)})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i][0] != pairs[j][0] {
			return pairs[i][0] < pairs[j][0]
		}
		return pairs[i][1] < pairs[j][1]
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p[0])
		b.WriteByte('=')
		b.WriteString(p[1])
	}
	return b.String()
}

// headerValues returns the values of a signed header as the client sent
// them, reconstructing the ones net/http moves out of r.Header: Host (into
// r.Host), Transfer-Encoding (into r.TransferEncoding) and, for chunked
// requests, Content-Length (into r.ContentLength).
func headerValues(r *http.Request, name, host string) []string {
	switch name {
	case "host":
		return []string{host}
	case "transfer-encoding":
		if len(r.TransferEncoding) > 0 {
			return []string{strings.Join(r.TransferEncoding, ",")}
		}
	case "content-length":
		if vs := r.Header.Values("Content-Length"); len(vs) > 0 {
			return vs
		}
		if r.ContentLength >= 0 {
			return []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	}
	return r.Header.Values(name)
}

// canonicalHeaderValue trims a header value and collapses runs of spaces and
// tabs to a single space.
func canonicalHeaderValue(v string) string {
	v = strings.Trim(v, " \t")
	if !strings.Contains(v, "  ") && !strings.ContainsRune(v, '\t') {
		return v
	}
	var b strings.Builder
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' || c == '\t' {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteByte(c)
	}
	return b.String()
}

// canonicalHeaders writes "name:value\n" for each signed header, in the order
// of the SignedHeaders list; repeated headers are joined with ','.
func canonicalHeaders(r *http.Request, signed []string, host string) string {
	var b strings.Builder
	for _, name := range signed {
		b.WriteString(name)
		b.WriteByte(':')
		for i, v := range headerValues(r, name, host) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(canonicalHeaderValue(v))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// canonicalRequest assembles the SigV4 canonical request.
func canonicalRequest(method, uri, query, headers string, signed []string, payloadHash string) string {
	return method + "\n" + uri + "\n" + query + "\n" + headers + "\n" + strings.Join(signed, ";") + "\n" + payloadHash
}

// hostCandidates returns the Host values to try as the signed "host": the
// value sent and, when it carries a default port (:80 or :443), the value
// without it, because SDKs strip default ports before signing while some
// HTTP stacks still send them. The port is not security-relevant.
func hostCandidates(host string) []string {
	if h, ok := strings.CutSuffix(host, ":80"); ok && h != "" {
		return []string{host, h}
	}
	if h, ok := strings.CutSuffix(host, ":443"); ok && h != "" {
		return []string{host, h}
	}
	return []string{host}
}
