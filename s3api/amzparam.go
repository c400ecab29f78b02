package s3api

import (
	"net/http"
	"strings"

	"github.com/wharf-s3/wharf/auth"
)

// amzValues returns the values of the x-amz-* request parameter name: its
// header lines, then the query parameters of that name (matched without
// regard to case). SDK presigners move the x-amz-* headers that need not
// stay headers into the presigned URL's query (aws-sdk-go-v2 hoists every
// X-Amz-* header outside its list of required signed headers, lower-cased:
// x-amz-checksum-mode, x-amz-object-attributes,
// x-amz-optional-object-attributes, x-amz-expected-bucket-owner, ...), and
// S3 applies them from there as if sent as headers. The one place every
// such parameter is read from.
func amzValues(h http.Header, q auth.Query, name string) []string {
	vals := h.Values(name)
	for _, p := range q {
		if strings.EqualFold(p.Key, name) {
			vals = append(vals[:len(vals):len(vals)], p.Value)
		}
	}
	return vals
}

// amzValue is the first of amzValues ("" for none).
func amzValue(h http.Header, q auth.Query, name string) string {
	if v := amzValues(h, q, name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// amzHeader is a header whose lines of name are amzValues, for the
// parsers that read a header (of that name only). Without the parameter
// in the query (every request but a presigned URL carrying it) that is
// h itself: a listing request reads x-amz-optional-object-attributes
// with no allocation, where a one-entry header was built per request.
func amzHeader(h http.Header, q auth.Query, name string) http.Header {
	for _, p := range q {
		if strings.EqualFold(p.Key, name) {
			return http.Header{http.CanonicalHeaderKey(name): amzValues(h, q, name)}
		}
	}
	return h
}
