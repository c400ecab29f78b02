package manifest

import (
	"errors"
	"testing"
)

func TestKeyRootConfined(t *testing.T) {
	for _, tc := range []struct{ manifestKey, root string }{
		{"p/q/uploads/u1/manifest.json.gz", "p/q"},
		{"uploads/u1/manifest.json", "uploads"}, // not the whole bucket (issue 22)
		{"uploads/u1/manifest.json.gz", "uploads"},
		{"/uploads/u1/manifest.json.gz", "uploads"}, // CargoShip's empty-prefix key: not the whole bucket
		{"p//uploads/u1/manifest.json.gz", "p"},     // a prefix with a trailing slash: keys resolve under p/
		{"/p/uploads/u1/manifest.json.gz", "p"},
		{"x/uploads/u1/manifest.json.gz", "x"},
		{"writers/w1/uploads/u1/manifest.json.gz", "writers/w1"},
		{"dir/manifest.partial.json.gz", "dir"},
		{"manifest.json.gz", ""},
	} {
		if got := KeyRoot(tc.manifestKey); got != tc.root {
			t.Errorf("KeyRoot(%q) = %q, want %q", tc.manifestKey, got, tc.root)
		}
	}
	allow := []string{"", "shared/"}
	for _, tc := range []struct {
		root, key string
		ok        bool
	}{
		{"p", "p/uploads/u1/c.tar.zst", true},
		{"p", "p", false},
		{"p", "pq/uploads/u1/c.tar.zst", false},
		{"p", "q/uploads/u1/c.tar.zst", false},
		{"p", "shared/x", true},
		{"p", "sharedx", false},
		{"", "anything/at/all", true},
	} {
		if got := Confined(tc.root, allow, tc.key); got != tc.ok {
			t.Errorf("Confined(%q, %q) = %v, want %v", tc.root, tc.key, got, tc.ok)
		}
	}
}

func TestCheckVirtualKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"a.txt", true},
		{"dir/sub/é ü.txt", true},
		{"../../etc/passwd", false},
		{"a/../b", false},
		{"/abs", false},
		{"a//b", false},
		{"a/./b", false},
		{"C:/x", false},
		{`a\b`, false},
		{"a\x00b", false},
		{"", false},
		{"\xff", false},
	} {
		err := CheckVirtualKey(tc.key)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrUnsafePath) {
			t.Errorf("CheckVirtualKey(%q) = %v, want ok %v", tc.key, err, tc.ok)
		}
	}
}
