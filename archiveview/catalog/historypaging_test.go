package catalog

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetHistoryPaging: ListObjectVersions of a dataset history, a
// built one and one of a single version (a pinned bucket), paged as a
// demanding client pages it: every prefix and delimiter, max-keys 0, 1,
// 2, 3 and 1000, continuing from NextKeyMarker and NextVersionIdMarker.
// The pages joined are exactly the full listing rolled up (each common
// prefix once, in byte order with the keys), no page is longer than
// max-keys, every page but the last is truncated, and no truncated page
// is empty.
func TestDatasetHistoryPaging(t *testing.T) {
	dir := t.TempDir()
	ids := []string{"20260301T000001Z-aaaaaa", "20260302T000001Z-bbbbbb", "20260303T000001Z-cccccc"}
	versions := []map[string][]byte{
		{"a/1": []byte("1"), "a/2": []byte("2"), "a/b/3": []byte("3"), "c": []byte("c"), "d/x": []byte("x")},
		{"a/1": []byte("1 new"), "a/b/3": []byte("3"), "a/b/4": []byte("4"), "c": []byte("c"), "e": []byte("e")},
		{"a/1": []byte("1 newer"), "a/2": []byte("2 back"), "a/b/3": []byte("3"), "c": []byte("c!"), "d/y": []byte("y")},
	}
	var mans []string
	for i, id := range ids {
		mans = append(mans, packVersion(t, dir, dsPrefix, id, fmt.Sprintf("u%d", i+1), id, versions[i],
			time.Date(2026, 3, 1+i, 0, 0, 1, 0, time.UTC)))
	}
	writeObject(t, dir, dsPrefix+"/CURRENT", pointerJSON(dsPrefix, ids[2], mans[2], ids[1], len(versions[2])))
	cm := datasetManager(backend.NewFileStore(dir),
		Alias{Name: "built", Target: "s3://lake/ocean@current"}, Alias{Name: "single", Target: "s3://lake/ocean@" + ids[2]})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []string{"built", "single"} {
		h, _, err := cm.History(ctx, bucket, bucketArchive(t, cm, bucket), true)
		if err != nil {
			t.Fatal(err)
		}
		full, err := h.ListVersions(archiveview.VersionListParams{MaxKeys: 1000})
		if err != nil || full.Truncated {
			t.Fatalf("%s: %v truncated %v", bucket, err, full.Truncated)
		}
		if bucket == "built" && len(full.Entries) < 12 {
			t.Fatalf("built: %d versions, want a history of several versions per key", len(full.Entries))
		}
		for _, prefix := range []string{"", "a/", "a", "a/b/", "d", "z"} {
			for _, delim := range []string{"", "/", "b"} {
				want := rollUp(full.Entries, prefix, delim)
				if n, _ := h.ListVersions(archiveview.VersionListParams{Prefix: prefix, Delimiter: delim, MaxKeys: 0}); len(n.Entries) != 0 || n.Truncated {
					t.Errorf("%s %q %q max-keys 0: %d entries, truncated %v", bucket, prefix, delim, len(n.Entries), n.Truncated)
				}
				for _, mk := range []int{1, 2, 3, 1000} {
					var got []string
					p := archiveview.VersionListParams{Prefix: prefix, Delimiter: delim, MaxKeys: mk}
					for page := 0; ; page++ {
						res, err := h.ListVersions(p)
						if err != nil {
							t.Fatalf("%s %q %q max-keys %d page %d: %v", bucket, prefix, delim, mk, page, err)
						}
						if len(res.Entries) > mk || (res.Truncated && len(res.Entries) == 0) || page > len(want)+1 {
							t.Fatalf("%s %q %q max-keys %d page %d: %d entries, truncated %v", bucket, prefix, delim, mk, page, len(res.Entries), res.Truncated)
						}
						for _, e := range res.Entries {
							got = append(got, entryName(e))
						}
						if !res.Truncated {
							break
						}
						p.KeyMarker, p.VersionIDMarker = res.NextKeyMarker, res.NextVersionIDMarker
					}
					if strings.Join(got, " ") != strings.Join(want, " ") {
						t.Errorf("%s prefix %q delimiter %q max-keys %d:\n got %v\nwant %v", bucket, prefix, delim, mk, got, want)
					}
				}
			}
		}
	}
}

// entryName is a listing entry as text: a common prefix, or key@version
// (with a DM mark for a delete marker).
func entryName(e archiveview.VersionEntry) string {
	if e.Prefix != "" {
		return "P:" + e.Prefix
	}
	n := e.Version.Key + "@" + e.Version.VersionID
	if e.Version.DeleteMarker {
		n += "(DM)"
	}
	return n
}

// rollUp is what a listing with prefix and delimiter shows, from the full
// listing: the entries under prefix, a key with the delimiter after the
// prefix rolled into its common prefix, each common prefix once.
func rollUp(all []archiveview.VersionEntry, prefix, delim string) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range all {
		k := e.Version.Key
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if delim != "" {
			if d := strings.Index(k[len(prefix):], delim); d >= 0 {
				cp := k[:len(prefix)+d+len(delim)]
				if !seen[cp] {
					seen[cp] = true
					out = append(out, "P:"+cp)
				}
				continue
			}
		}
		out = append(out, entryName(e))
	}
	return out
}
