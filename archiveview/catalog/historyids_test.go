package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetHistoryLookupIDs: versionId= of every form against a built
// history and a history of one version: a published version reads, an id
// of the right form that is no version of the history is not found (404
// NoSuchVersion), and an id that can be no version by its form (a path,
// a control character, too long: dataset.ValidVersionID) is an error
// wrapping ErrBadVersionID naming the key (400 InvalidArgument, as AWS
// answers a malformed id).
func TestDatasetHistoryLookupIDs(t *testing.T) {
	d := publishHistory(t)
	cases := []struct {
		name, id string
		found    bool
		bad      bool
	}{
		{"a version", histIDs[3], true, false},
		{"unknown, well formed", "20990101T000000Z-ffffff", false, false},
		{"pruned-looking", "20250101T000000Z-000000", false, false},
		{"slash", histIDs[3] + "/x", false, true},
		{"traversal", "../" + histIDs[3], false, true},
		{"dot-dot", "..", false, true},
		{"dot", ".", false, true},
		{"newline", histIDs[3] + "\n", false, true},
		{"nul", "a\x00b", false, true},
		{"space", "a b", false, true},
		{"backslash", `a\b`, false, true},
		{"non-ASCII", "ü", false, true},
		{"too long", strings.Repeat("a", 256), false, true},
		{"longest", strings.Repeat("a", 255), false, false},
	}
	for _, one := range []bool{false, true} {
		ctx := context.Background()
		alias := Alias{Name: "ocean", Target: "s3://lake/ocean@current"}
		if one {
			alias.Target = "s3://lake/ocean@" + histIDs[3] // pinned: a history of one version
		}
		cm := datasetManager(backend.NewFileStore(d.dir), alias)
		if err := cm.Scan(ctx, true); err != nil {
			t.Fatal(err)
		}
		a := bucketArchive(t, cm, "ocean")
		h, _, err := cm.History(ctx, "ocean", a, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			v, found, err := h.Lookup(ctx, "b.txt", c.id)
			switch {
			case c.bad && (!errors.Is(err, archiveview.ErrBadVersionID) || !strings.Contains(err.Error(), `"b.txt"`)):
				t.Errorf("one %v %s: %v, want ErrBadVersionID naming the key", one, c.name, err)
			case !c.bad && err != nil:
				t.Errorf("one %v %s: %v", one, c.name, err)
			case found != c.found:
				t.Errorf("one %v %s: found %v, want %v", one, c.name, found, c.found)
			case found && v.DeleteMarker:
				t.Errorf("one %v %s: a delete marker", one, c.name)
			}
		}
		cm.CloseAll()
	}
}
