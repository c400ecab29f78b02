package s3api

import "strings"

// urlEncode percent-encodes s the way AWS does for encoding-type=url:
// unreserved characters (A-Z a-z 0-9 - _ . ~) and '/' stay, every other
// byte becomes %XX (so space is %20 and '+' is %2B, never '+'). botocore
// decodes with unquote_plus, so a literal '+' must never be left as is.
func urlEncode(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !keepByte(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keepByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func keepByte(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	case c == '-' || c == '_' || c == '.' || c == '~' || c == '/':
		return true
	}
	return false
}
