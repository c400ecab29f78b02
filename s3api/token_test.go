package s3api

import (
	"strings"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	for _, after := range []string{"", "a", "dir/", "a+b", "a b", "ü", "x\ty", strings.Repeat("k", 1024), "\x00\xff"} {
		tok := encodeToken(after)
		if strings.ContainsAny(tok, "+/=&<>\"'% ") {
			t.Errorf("token %q for %q is not URL/XML-inert", tok, after)
		}
		got, err := decodeToken(tok)
		if err != nil || got != after {
			t.Errorf("decodeToken(encodeToken(%q)) = %q, %v", after, got, err)
		}
	}
}

// Checklist 10: garbage tokens are rejected.
func TestTokenGarbage(t *testing.T) {
	good := encodeToken("some/key")
	for _, tok := range []string{"", "garbage", "!!!!", "AAAA", good[:len(good)-1] + "A", "AQ", good + "==", strings.Repeat("A", 5000)} {
		if tok == good {
			continue
		}
		if after, err := decodeToken(tok); err == nil {
			t.Errorf("decodeToken(%q) accepted garbage → %q", tok, after)
		}
	}
}

// FuzzDecodeToken: never panics; anything accepted re-encodes to itself.
func FuzzDecodeToken(f *testing.F) {
	f.Add(encodeToken("a/b"))
	f.Add(encodeToken(""))
	f.Add("AQAAAAA")
	f.Add("not-a-token")
	f.Fuzz(func(t *testing.T, tok string) {
		after, err := decodeToken(tok)
		if err != nil {
			return
		}
		if encodeToken(after) != tok {
			t.Fatalf("accepted token %q does not re-encode to itself", tok)
		}
	})
}
