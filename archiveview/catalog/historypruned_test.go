package catalog

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetHistoryPrunedAfterBuild: older versions pruned after the
// history was built (cargoship prune, the served version unchanged): a
// versionId= read of a pruned version is no such version (404
// NoSuchVersion), as it is once the history is built again, not a server
// failure; a version still there whose bytes the history reads from a
// newer version of the same run, now pruned, is read from itself. The
// old code failed both with the open's not-found error (500
// InternalError) for as long as the version was served.
func TestDatasetHistoryPrunedAfterBuild(t *testing.T) {
	d := publishHistory(t)
	cm := datasetManager(backend.NewFileStore(d.dir), Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a := bucketArchive(t, cm, "ocean")
	h, _, err := cm.History(ctx, "ocean", a, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} { // V1 and V3 pruned
		if err := os.Remove(filepath.Join(d.dir, dsBucket, d.mans[i])); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		key  string
		v    int    // 1-based
		want string // "" = no such version
	}{
		{"a.txt", 1, ""},       // pruned
		{"a.txt", 3, ""},       // pruned
		{"a.txt", 2, "a2 two"}, // the run V2-V3 read from V3, pruned: from V2
		{"e.txt", 2, "e"},      // the same
		{"d.txt", 1, "d"},      // its run V1-V2 read from V2, still there: the same bytes
		{"b.txt", 1, "b"},      // read from the served version
		{"a.txt", 4, "a4 four!"},
	} {
		data, v, ok := readVersion(t, h, a, c.key, histIDs[c.v-1])
		switch {
		case c.want == "" && ok:
			t.Errorf("%s as of pruned V%d: found %q (%+v), want no such version", c.key, c.v, data, v)
		case c.want != "" && (!ok || v.DeleteMarker || string(data) != c.want):
			t.Errorf("%s as of V%d: %q (found %v, marker %v), want %q", c.key, c.v, data, ok, v.DeleteMarker, c.want)
		}
	}
}
