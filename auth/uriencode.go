package auth

// URIEncode percent-encodes s the way AWS does: it is the "UriEncode" of
// the SigV4 canonical request and the encoding S3 applies to keys, prefixes
// and markers in a listing asked for with encoding-type=url. The contract:
//
//   - the unreserved bytes A-Z a-z 0-9 '-' '_' '.' '~' are kept as they are;
//   - '/' is kept when keepSlash is true (paths, listed keys) and is %2F
//     otherwise (query keys and values);
//   - every other byte, one at a time, becomes '%' and two upper-case hex
//     digits: space is %20 (never '+'), '+' is %2B, '%' is %25, and each
//     byte of a multi-byte UTF-8 sequence (or of invalid UTF-8) is encoded
//     on its own;
//   - a string that needs no encoding is returned unchanged, without a copy.
//
// So the result contains only unreserved bytes, '%XX' triples and (with
// keepSlash) '/', and both url.PathUnescape and url.QueryUnescape (Python's
// unquote_plus, which botocore uses for encoding-type=url) turn it back into
// s exactly. URIEncode is a pure function and never panics.
func URIEncode(s string, keepSlash bool) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !keepURIByte(s[i], keepSlash) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hexUpper = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keepURIByte(c, keepSlash) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexUpper[c>>4], hexUpper[c&15])
	}
	return string(b)
}

// keepURIByte reports whether URIEncode leaves c as it is.
func keepURIByte(c byte, keepSlash bool) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	case c == '-' || c == '_' || c == '.' || c == '~':
		return true
	case c == '/':
		return keepSlash
	}
	return false
}
