package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestArchiveShapes checks that the packed test archives really have the
// shapes the client tests rely on, as `wharf serve` reports them at start
// (one JSON log line per archive with its shapes).
func TestArchiveShapes(t *testing.T) {
	want := map[string][]string{
		"main":   {"framed-zstd", "sub-frames", "dedup"},
		"media":  {"plain-tar"},
		"split":  {"split"},
		"direct": {"direct"},
		"inc":    {"chain", "tombstones"},
	}
	got := map[string][]string{}
	for _, line := range strings.Split(suite.keyed.Logs(), "\n") {
		if !strings.Contains(line, `"serving archive"`) {
			continue
		}
		var l struct {
			Archive string
			Shapes  []string
			Files   int
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("wharf serve log line is not JSON: %v: %s", err, line)
		}
		got[l.Archive] = l.Shapes
		if n := len(suite.archives[l.Archive].keys); l.Files != n {
			t.Errorf("archive %s: wharf reports %d files, the source tree has %d", l.Archive, l.Files, n)
		}
	}
	for name, shapes := range want {
		for _, s := range shapes {
			if !strings.Contains(" "+strings.Join(got[name], " ")+" ", " "+s+" ") {
				t.Errorf("archive %s: shapes %q lack %q (the test tree does not exercise what it claims)", name, got[name], s)
			}
		}
		t.Logf("archive %s (%s): shapes %v", name, suite.archives[name].shapes, got[name])
	}
}
