package auth

import (
	"net/url"
	"strings"
	"testing"
)

// TestURIEncode is the AWS encoding table: SigV4's UriEncode (keepSlash
// false for query keys and values, true for the path) and S3's
// encoding-type=url (keepSlash true; s3-tests
// test_bucket_listv2_encoding_basic).
func TestURIEncode(t *testing.T) {
	tests := []struct {
		in             string
		slash, noSlash string
	}{
		{"", "", ""},
		{"a-b_c.d~", "a-b_c.d~", "a-b_c.d~"},
		{"AZaz09", "AZaz09", "AZaz09"},
		{"quux ab/", "quux%20ab/", "quux%20ab%2F"},
		{"foo+1/", "foo%2B1/", "foo%2B1%2F"},
		{"a%41", "a%2541", "a%2541"},
		{"ü", "%C3%BC", "%C3%BC"},
		{"\xff\xfe", "%FF%FE", "%FF%FE"}, // invalid UTF-8: byte by byte
		{"x\ty\x00", "x%09y%00", "x%09y%00"},
		{"a//b", "a//b", "a%2F%2Fb"},
		{"&<>\"'", "%26%3C%3E%22%27", "%26%3C%3E%22%27"},
		{"=?#;:@!$*(),", "%3D%3F%23%3B%3A%40%21%24%2A%28%29%2C", "%3D%3F%23%3B%3A%40%21%24%2A%28%29%2C"},
		{"\x7f", "%7F", "%7F"},
	}
	for _, tc := range tests {
		if got := URIEncode(tc.in, true); got != tc.slash {
			t.Errorf("URIEncode(%q, true) = %q, want %q", tc.in, got, tc.slash)
		}
		if got := URIEncode(tc.in, false); got != tc.noSlash {
			t.Errorf("URIEncode(%q, false) = %q, want %q", tc.in, got, tc.noSlash)
		}
	}
}

// FuzzURIEncode checks the contract for any input: only unreserved bytes,
// %XX triples with upper-case hex and (with keepSlash) '/' come out; the
// output length is len(s) plus two per encoded byte; both Go unescapers
// give s back; an input that needs no encoding is returned as is; and the
// two modes differ only in how '/' is written.
func FuzzURIEncode(f *testing.F) {
	for _, s := range []string{"", "plain/key.txt", "a b+c%41", "ü", "x\ty\r\n", "\x7f\xff", "//", "~-_.", "%2F"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, keepSlash := range []bool{true, false} {
			enc := URIEncode(s, keepSlash)
			encoded := 0
			for i := 0; i < len(s); i++ {
				c := s[i]
				if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
					strings.IndexByte("-_.~", c) >= 0 || keepSlash && c == '/') {
					encoded++
				}
			}
			if len(enc) != len(s)+2*encoded {
				t.Fatalf("URIEncode(%q, %v) = %q: length %d, want %d", s, keepSlash, enc, len(enc), len(s)+2*encoded)
			}
			if encoded == 0 && enc != s {
				t.Fatalf("URIEncode(%q, %v) = %q: changed a string needing no encoding", s, keepSlash, enc)
			}
			for i := 0; i < len(enc); i++ {
				c := enc[i]
				switch {
				case c == '%':
					if i+2 >= len(enc) || !isUpperHex(enc[i+1]) || !isUpperHex(enc[i+2]) {
						t.Fatalf("URIEncode(%q, %v) = %q: bad escape at %d", s, keepSlash, enc, i)
					}
					i += 2
				case c == '/':
					if !keepSlash {
						t.Fatalf("URIEncode(%q, false) = %q: kept a '/'", s, enc)
					}
				case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~", c) >= 0:
				default:
					t.Fatalf("URIEncode(%q, %v) = %q: byte %q left unencoded", s, keepSlash, enc, c)
				}
			}
			if back, err := url.PathUnescape(enc); err != nil || back != s {
				t.Fatalf("PathUnescape(URIEncode(%q, %v)) = %q, %v", s, keepSlash, back, err)
			}
			if back, err := url.QueryUnescape(enc); err != nil || back != s {
				t.Fatalf("QueryUnescape(URIEncode(%q, %v)) = %q, %v", s, keepSlash, back, err)
			}
		}
		if strings.ReplaceAll(URIEncode(s, true), "/", "%2F") != URIEncode(s, false) {
			t.Fatalf("URIEncode(%q): the modes differ in more than '/'", s)
		}
	})
}

func isUpperHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' }
