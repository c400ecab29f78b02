package archiveview

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// sliceTable is a VersionTable over sorted keys, key i having vers[i]
// versions named "<key>#<j>".
type sliceTable struct {
	keys []string
	vers []int
}

func (t sliceTable) Len() int            { return len(t.keys) }
func (t sliceTable) Key(i int) string    { return t.keys[i] }
func (t sliceTable) Search(s string) int { return sort.SearchStrings(t.keys, s) }
func (t sliceTable) SkipPrefix(i int, p string) int {
	for i < len(t.keys) && strings.HasPrefix(t.keys[i], p) {
		i++
	}
	return i
}
func (t sliceTable) Count(i int) int { return t.vers[i] }
func (t sliceTable) Find(i int, id string) int {
	for j := 0; j < t.vers[i]; j++ {
		if id == fmt.Sprintf("%s#%d", t.keys[i], j) {
			return j
		}
	}
	return -1
}
func (t sliceTable) Version(i, j int) (Version, error) {
	return Version{File: File{Key: t.keys[i]}, VersionID: fmt.Sprintf("%s#%d", t.keys[i], j), IsLatest: j == 0}, nil
}
func (t sliceTable) KeepPrefix(cp string) string { return cp }

// render lists a page as "key#j" and "prefix/" entries, then the markers.
func render(r VersionListResult) string {
	var b strings.Builder
	for _, e := range r.Entries {
		if e.Prefix != "" {
			b.WriteString(e.Prefix + " ")
		} else {
			b.WriteString(e.Version.VersionID + " ")
		}
	}
	if r.Truncated {
		fmt.Fprintf(&b, "| next %s %s", r.NextKeyMarker, r.NextVersionIDMarker)
	}
	return strings.TrimSpace(b.String())
}

// TestPageVersions: the one ListObjectVersions paging rule, as S3 pages:
// prefix, delimiter, key and version-id markers, truncation.
func TestPageVersions(t *testing.T) {
	tab := sliceTable{keys: []string{"a", "d/x", "d/y", "e", "f/g/h"}, vers: []int{2, 1, 3, 1, 2}}
	for _, tc := range []struct {
		name string
		p    VersionListParams
		want string
	}{
		{"all", VersionListParams{MaxKeys: 100}, "a#0 a#1 d/x#0 d/y#0 d/y#1 d/y#2 e#0 f/g/h#0 f/g/h#1"},
		{"none asked", VersionListParams{MaxKeys: 0}, ""},
		{"truncated inside a key", VersionListParams{MaxKeys: 3}, "a#0 a#1 d/x#0 | next d/x d/x#0"},
		{"after a version", VersionListParams{MaxKeys: 2, KeyMarker: "d/y", VersionIDMarker: "d/y#0"}, "d/y#1 d/y#2 | next d/y d/y#2"},
		{"after the last version of a key", VersionListParams{MaxKeys: 9, KeyMarker: "d/y", VersionIDMarker: "d/y#2"}, "e#0 f/g/h#0 f/g/h#1"},
		{"key marker alone skips the key", VersionListParams{MaxKeys: 9, KeyMarker: "d/x"}, "d/y#0 d/y#1 d/y#2 e#0 f/g/h#0 f/g/h#1"},
		{"key marker between keys", VersionListParams{MaxKeys: 9, KeyMarker: "b"}, "d/x#0 d/y#0 d/y#1 d/y#2 e#0 f/g/h#0 f/g/h#1"},
		{"prefix", VersionListParams{MaxKeys: 9, Prefix: "d/"}, "d/x#0 d/y#0 d/y#1 d/y#2"},
		{"delimiter", VersionListParams{MaxKeys: 9, Delimiter: "/"}, "a#0 a#1 d/ e#0 f/"},
		{"delimiter under a prefix", VersionListParams{MaxKeys: 9, Prefix: "f/", Delimiter: "/"}, "f/g/"},
		{"truncated at a common prefix", VersionListParams{MaxKeys: 3, Delimiter: "/"}, "a#0 a#1 d/ | next d/"},
		{"after a common prefix", VersionListParams{MaxKeys: 9, Delimiter: "/", KeyMarker: "d/"}, "e#0 f/"},
		{"marker before the prefix", VersionListParams{MaxKeys: 9, Prefix: "e", KeyMarker: "a"}, "e#0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := PageVersions(tab, tc.p, "test")
			if err != nil {
				t.Fatal(err)
			}
			if got := render(res); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	for _, p := range []VersionListParams{
		{MaxKeys: 9, KeyMarker: "a", VersionIDMarker: "a#7"},
		{MaxKeys: 9, KeyMarker: "b", VersionIDMarker: "b#0"},
	} {
		if _, err := PageVersions(tab, p, "test"); !errors.Is(err, ErrUnknownVersion) {
			t.Errorf("%+v: %v, want ErrUnknownVersion", p, err)
		}
	}
}
