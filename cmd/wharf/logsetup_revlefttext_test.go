package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
)

// TestServeLoggerOutsideText: the serve logger is the backstop for
// outside text that reaches a log without backend.PrintableText (a
// package that logs a key or a peer's or net/http's text as is).
//
//   - json: zerolog escapes ASCII controls but writes every other rune as
//     is, so a C1 control (U+009B, a terminal's CSI), a line separator or
//     a bidi override in a field or a message reached a terminal reading
//     the log (tail -f, docker logs). They are written as JSON \u
//     escapes: the line holds no unprintable rune, and decodes to the
//     same values.
//   - console: fields are quoted (strconv.Quote), but a message is
//     written as is, so an ESC sequence or a CR in it acted on the
//     operator's terminal. A message is escaped (backend.PrintableText).
func TestServeLoggerOutsideText(t *testing.T) {
	const hostile = "a\x1b[2Jb\rforged\u009b31m\u2028c\u202ed"
	t.Run("json", func(t *testing.T) {
		var b bytes.Buffer
		log, err := newServeLogger("json", &b)
		if err != nil {
			t.Fatal(err)
		}
		log.Info().Str("key", hostile).Str("tag", "x\U000E0001y").Msg("read " + hostile)
		line := strings.TrimSuffix(b.String(), "\n")
		for _, r := range line {
			if !unicode.IsPrint(r) {
				t.Errorf("the line holds the unprintable %U:\n%q", r, line)
				break
			}
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if m["key"] != hostile || m["message"] != "read "+hostile || m["tag"] != "x\U000E0001y" {
			t.Errorf("the line decodes to key %q, message %q, tag %q; want the values logged", m["key"], m["message"], m["tag"])
		}
	})
	t.Run("console", func(t *testing.T) {
		var b bytes.Buffer
		log, err := newServeLogger("console", &b)
		if err != nil {
			t.Fatal(err)
		}
		log.Info().Str("key", hostile).Msg("read " + hostile)
		out := b.String()
		for _, bad := range []string{"\x1b[2J", "\r", "\u009b", "\u2028", "\u202e"} {
			if strings.Contains(out, bad) {
				t.Errorf("the console line holds %q of the logged text:\n%q", bad, out)
			}
		}
		if !strings.Contains(out, `read a\x1b[2Jb\x0dforged\u009b31m\u2028c\u202ed`) {
			t.Errorf("the console line does not show the message escaped:\n%q", out)
		}
	})
}
