package main

import (
	"strings"
	"testing"
)

// TestLocalPathWindowsNames: a key whose segment Windows would not keep
// as it is (a stream "a:b" of file "a", "x." stored as "x", a device name
// that writes nowhere, a backslash that splits it) is refused when get
// runs on Windows, naming the segment; on other systems such keys are
// ordinary names. ".." and absolute keys are refused everywhere. Before,
// every one of them went to os.Root as it was.
func TestLocalPathWindowsNames(t *testing.T) {
	for _, c := range []struct {
		key     string
		windows string // "" = accepted on Windows; else in the error
		unix    bool   // refused on Linux too
	}{
		{"a/b.txt", "", false},
		{"dir.d/naïve .csv", "", false},
		{"COM10.txt", "", false},
		{"consolation.txt", "", false},
		{"a:b", "reserved", false},
		{"d/C:/x", "reserved", false},
		{`a\..\..\x`, "separator", false},
		{"x.", "trailing dot", false},
		{"d/x /y", "trailing dot or space", false},
		{"NUL", "device", false},
		{"d/con.txt", "device", false},
		{"LPT1", "device", false},
		{"com\u00b9.log", "device", false},
		{"a?b", "reserved", false},
		{"../x", "outside", true},
		{"/etc/x", "outside", true},
		{"a//b", "outside", true},
	} {
		_, err := localPathOn("windows", c.key)
		if (err != nil) != (c.windows != "") || err != nil && !strings.Contains(err.Error(), c.windows) {
			t.Errorf("windows %q: %v, want an error with %q", c.key, err, c.windows)
		}
		if _, err := localPathOn("linux", c.key); (err != nil) != c.unix {
			t.Errorf("linux %q: %v, want refused %v", c.key, err, c.unix)
		}
	}
}
