package s3api

// Internal tests written for mutants that survived scripts/mutation.sh
// (TESTING.md lists them).

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

// TestXMLTextEscapesLikeEncodingXML: the listing writer's text is byte for
// byte what xml.EscapeText writes, also for strings made of one kind of
// character only (the fast path decides per string).
func TestXMLTextEscapesLikeEncodingXML(t *testing.T) {
	for _, s := range []string{"&", "&&", "<", ">", `"`, "'", "\x01", "\x1f", " ", "\x7f", "~", "a&b", "plain"} {
		var w xmlWriter
		w.text(s)
		var want bytes.Buffer
		if err := xml.EscapeText(&want, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Bytes(), want.Bytes()) {
			t.Errorf("text(%q) = %q, encoding/xml writes %q", s, w.Bytes(), want.Bytes())
		}
	}
}

// TestTokenLengthLimit: a continuation token carrying an After of up to
// maxTokenAfter bytes (longer than any key a manifest may hold) is decoded;
// a longer one is refused even when it is well formed.
func TestTokenLengthLimit(t *testing.T) {
	at := encodeToken(strings.Repeat("k", maxTokenAfter))
	if len(at) != maxTokenLen {
		t.Fatalf("test setup: token of %d characters, maxTokenLen %d", len(at), maxTokenLen)
	}
	if got, err := decodeToken(at); err != nil || got != strings.Repeat("k", maxTokenAfter) {
		t.Errorf("%d-character token: %.20q, %v", len(at), got, err)
	}
	over := encodeToken(strings.Repeat("k", maxTokenAfter+1))
	if len(over) <= maxTokenLen {
		t.Fatalf("test setup: token of %d characters", len(over))
	}
	if _, err := decodeToken(over); err == nil {
		t.Errorf("%d-character token accepted", len(over))
	}
}
