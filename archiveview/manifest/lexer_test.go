package manifest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// lexString reads doc as one JSON string value with the lexer, as a string
// member's value is read (null leaves it empty), and then requires the end
// of input.
func lexString(doc []byte) (string, error) {
	l := newLexer(bytes.NewReader(doc), 64)
	var s string
	if err := l.str(&s); err != nil {
		return "", err
	}
	return s, l.finish()
}

// TestStringTokensMatchEncodingJSON: every rule of appendUnescaped's doc
// comment, each against encoding/json's reading of the same token.
func TestStringTokensMatchEncodingJSON(t *testing.T) {
	tests := []struct {
		name, doc string
		want      string // "" with wantErr
		wantErr   bool
	}{
		{"plain", `"abc"`, "abc", false},
		{"empty", `""`, "", false},
		{"short escapes", `"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t", false},
		{"u escape lower and upper hex", `"\u00e9\u00E9\u0041"`, "ééA", false},
		{"u escape of NUL", `"a\u0000b"`, "a\x00b", false},
		{"surrogate pair", `"\ud83d\ude00"`, "😀", false},
		{"surrogate pair, upper hex", `"\uD83D\uDE00"`, "😀", false},
		{"highest pair", `"\udbff\udfff"`, "\U0010FFFF", false},
		{"lone high at end", `"a\ud800"`, "a\uFFFD", false},
		{"lone high then text", `"\ud800b"`, "\uFFFDb", false},
		{"lone low", `"\udc00"`, "\uFFFD", false},
		{"high then BMP escape", `"\ud800\u0041"`, "\uFFFDA", false},
		{"high then high then low", `"\ud800\ud83d\ude00"`, "\uFFFD😀", false},
		{"low then high", `"\udc00\ud800"`, "\uFFFD\uFFFD", false},
		{"high then short escape", `"\ud800\n"`, "\uFFFD\n", false},
		{"invalid UTF-8 byte", "\"a\xffb\"", "a\uFFFDb", false},
		{"truncated UTF-8 sequence", "\"\xc3\"", "\uFFFD", false},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", "\uFFFD\uFFFD\uFFFD", false},
		{"real U+FFFD kept", "\"\xef\xbf\xbd\"", "\uFFFD", false},
		{"invalid UTF-8 next to an escape", "\"\xff\\n\xfe\"", "\uFFFD\n\uFFFD", false},
		{"unknown escape", `"\x"`, "", true},
		{"u with three hex digits", `"\u00e"`, "", true},
		{"u with a non-hex digit", `"\u00eg"`, "", true},
		{"invalid second escape after a high surrogate", `"\ud800\uzzzz"`, "", true},
		{"backslash before the closing quote", `"\"`, "", true},
		{"control character", "\"a\x01\"", "", true},
		{"unterminated", `"abc`, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ref string
			refErr := json.Unmarshal([]byte(tc.doc), &ref)
			got, err := lexString([]byte(tc.doc))
			if tc.wantErr {
				if err == nil || refErr == nil {
					t.Fatalf("accepted: ours %q (err %v), encoding/json %q (err %v)", got, err, ref, refErr)
				}
				return
			}
			if err != nil || refErr != nil {
				t.Fatalf("rejected: ours %v, encoding/json %v", err, refErr)
			}
			if got != tc.want || ref != tc.want {
				t.Fatalf("ours %+q, encoding/json %+q, want %+q", got, ref, tc.want)
			}
		})
	}
}

// TestSkipStringAgrees: a string skipped as an unknown member's value is
// accepted or refused exactly when reading it is.
func TestSkipStringAgrees(t *testing.T) {
	for _, doc := range []string{`"\u00e9"`, `"\ud800"`, `"\x"`, `"\u00eg"`, `"\u00e"`, "\"\xff\"", `"\/\b"`, "\"\x1f\""} {
		_, readErr := lexString([]byte(doc))
		l := newLexer(strings.NewReader(doc), 64)
		skipErr := l.skipValue()
		if skipErr == nil {
			skipErr = l.finish()
		}
		if (readErr == nil) != (skipErr == nil) {
			t.Errorf("%q: read error %v, skip error %v", doc, readErr, skipErr)
		}
	}
}

func TestCodeUnitAndHexDigit(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := rune(-1)
		switch {
		case c >= '0' && c <= '9':
			want = rune(c - '0')
		case c >= 'a' && c <= 'f':
			want = rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			want = rune(c-'A') + 10
		}
		if got := hexDigit(byte(c)); got != want {
			t.Errorf("hexDigit(%q) = %d, want %d", byte(c), got, want)
		}
	}
	tests := []struct {
		in   string
		unit rune
		ok   bool
	}{
		{`\u0000`, 0, true}, {`\uffff`, 0xFFFF, true}, {`\uFfFf`, 0xFFFF, true}, {`\u12aB`, 0x12AB, true},
		{`\ud800rest`, 0xD800, true}, {`\u123`, 0, false}, {`\U1234`, 0, false}, {`/u1234`, 0, false},
		{`\u-123`, 0, false}, {`\u 123`, 0, false}, {``, 0, false},
	}
	for _, tc := range tests {
		unit, ok := codeUnit([]byte(tc.in))
		if ok != tc.ok || unit != tc.unit {
			t.Errorf("codeUnit(%q) = %#x, %v; want %#x, %v", tc.in, unit, ok, tc.unit, tc.ok)
		}
	}
}

func TestJoinSurrogates(t *testing.T) {
	// Every high surrogate with the first and last low one, and the
	// boundaries just outside both ranges.
	for hi := rune(0xD7FF); hi <= 0xDC00; hi++ {
		for _, lo := range []rune{0xDBFF, 0xDC00, 0xDFFF, 0xE000} {
			r, ok := joinSurrogates(hi, lo)
			wantOK := hi >= 0xD800 && hi <= 0xDBFF && lo >= 0xDC00 && lo <= 0xDFFF
			if ok != wantOK {
				t.Fatalf("joinSurrogates(%#x, %#x) ok = %v", hi, lo, ok)
			}
			if !ok {
				continue
			}
			// The UTF-16 encoding of r, computed the other way round.
			v := r - 0x10000
			if r < 0x10000 || r > utf8.MaxRune || 0xD800+v>>10 != hi || 0xDC00+v&0x3FF != lo {
				t.Fatalf("joinSurrogates(%#x, %#x) = %#x", hi, lo, r)
			}
		}
	}
}

// TestValidNumberExhaustive compares validNumber with encoding/json's
// grammar check on every string of up to 5 bytes over the bytes a number
// can hold (and one that it cannot).
func TestValidNumberExhaustive(t *testing.T) {
	alphabet := []byte("019-+.eEx")
	var walk func(prefix []byte)
	n := 0
	walk = func(prefix []byte) {
		n++
		// json.Valid takes a whole document: a bare number is one, and the
		// empty string is not, as validNumber requires.
		if got, want := validNumber(prefix), json.Valid(prefix) && len(prefix) > 0; got != want {
			t.Errorf("validNumber(%q) = %v, encoding/json says %v", prefix, got, want)
		}
		if len(prefix) == 5 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(make([]byte, 0, 5))
	if n < 60000 {
		t.Fatalf("only %d strings checked", n)
	}
	for _, s := range []string{"-0", "0.5e-10", "123456789", "1E+2", "-9.99e99", "00", "1.", ".1", "-", "1e", "1e+", "+1", "0x1", "1.2.3", "--1"} {
		if validNumber([]byte(s)) != json.Valid([]byte(s)) {
			t.Errorf("validNumber(%q) disagrees with encoding/json", s)
		}
	}
}

// FuzzStringToken: for any string token, the lexer and encoding/json agree
// on whether it is valid and on its decoded value.
func FuzzStringToken(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud83d\ude00"`, `"\ud800\u0041"`, "\"\xff\\u00e9\"", `"\u00eg"`, `"\"\\\/\b\f\n\r\t"`, `"\udc00\ud800\udc00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var ref string
		refErr := json.Unmarshal(doc, &ref)
		got, err := lexString(doc)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("%q: ours %q (err %v), encoding/json %q (err %v)", doc, got, err, ref, refErr)
		}
		if err == nil && got != ref {
			t.Fatalf("%q: ours %+q, encoding/json %+q", doc, got, ref)
		}
	})
}
