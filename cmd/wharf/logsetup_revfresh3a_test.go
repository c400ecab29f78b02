package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode"
)

// TestServeLoggerConsoleListFields: under --log-format console a field
// that is a list or an object (Strs, Interface: a chain of upload ids, a
// restore's objects) is written by zerolog's ConsoleWriter as
// json.Marshal makes it, which escapes the ASCII controls but writes a C1
// control or a bidi override as is; the backstop escaped a message only
// (string fields are quoted, which escapes them). Such a field's outside
// text reached the terminal reading the log. Every rune of the line is
// printable now, the values shown as \u escapes.
func TestServeLoggerConsoleListFields(t *testing.T) {
	const hostile = "k\u009b2J\u202ex"
	var b bytes.Buffer
	log, err := newServeLogger("console", &b)
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Strs("chain", []string{"u1", hostile}).Interface("objects", []map[string]string{{"key": hostile}}).Msg("restore")
	out := strings.TrimSuffix(b.String(), "\n")
	for _, r := range out {
		if !unicode.IsPrint(r) && r != '\x1b' { // the console format's own colours
			t.Errorf("the console line holds the unprintable %U:\n%q", r, out)
			break
		}
	}
	if strings.Count(out, `k\u009b2J\u202ex`) != 2 {
		t.Errorf("the console line does not show the list's and the object's value escaped (twice):\n%q", out)
	}
}
