package backend

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of a store server's own text in an error (classifyS3ErrIn): AWS
// codes are short names and its messages a sentence; anything longer is a
// broken or hostile server's, which would otherwise reach every log line
// and page that shows the error.
const (
	maxServerCode    = 128
	maxServerMessage = 1024
)

// PrintableText is s with every unprintable rune escaped ("\n", "\x1b",
// "\u202e", an invalid byte as "\xff"), cut past max bytes (max > 0) at a
// rune or escape boundary with "..." and the length it had. It is the one
// rule for text from outside (a store server's error message, a key in a
// log message) that reaches a log line or a page: zerolog's console
// format writes messages as is, so a newline forged a line and an escape
// sequence acted on the operator's terminal, and a long text made lines
// that pipelines split.
func PrintableText(s string, max int) string {
	clean := max <= 0 || len(s) <= max
	if clean {
		for _, r := range s {
			if r == utf8.RuneError || !unicode.IsPrint(r) {
				clean = false
				break
			}
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	limit := max - len("...")
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && n <= 1:
			piece = fmt.Sprintf("\\x%02x", s[i])
		case r == '\n':
			piece = "\\n"
		case unicode.IsPrint(r):
			piece = s[i : i+n]
		case r < 0x80:
			piece = fmt.Sprintf("\\x%02x", r)
		default:
			piece = fmt.Sprintf("\\u%04x", r)
		}
		if max > 0 && b.Len()+len(piece) > limit && (i+n < len(s) || b.Len()+len(piece) > max) {
			fmt.Fprintf(&b, "... (%d bytes)", len(s))
			return b.String()
		}
		b.WriteString(piece)
		i += n
	}
	return b.String()
}
