package catalog

import (
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/catalog/dataset"
)

func TestParseVersionKey(t *testing.T) {
	for _, c := range []struct {
		rel      string
		id       string
		manifest bool
		ok       bool
	}{
		{"V1/uploads/u1/manifest.json.gz", "V1", true, true},
		{"V1/uploads/u1/manifest.json", "V1", true, true},
		{"V1/uploads/u1/manifest.partial.json.gz", "V1", false, true},
		{"V1/uploads/u1/chunks/c0.tar.zst", "V1", false, true},
		{"V1/uploads/u1/sub/manifest.json.gz", "V1", false, true}, // not an upload's own manifest
		{"V1/index.lith", "V1", false, true},
		{"V1/uploads//manifest.json.gz", "V1", false, true},
		{"V1/uploads/../manifest.json.gz", "V1", false, true},
		{"V1/uploads/manifest.json.gz", "V1", false, true},
		{"V1/manifest.json.gz", "V1", false, true},
		{"CURRENT", "", false, false},
		{"../x/uploads/u/manifest.json.gz", "", false, false},
		{"/V1/uploads/u/manifest.json.gz", "", false, false},
		{"bad id/uploads/u/manifest.json.gz", "", false, false},
		{"", "", false, false},
	} {
		id, man, ok := parseVersionKey(c.rel)
		if id != c.id || man != c.manifest || ok != c.ok {
			t.Errorf("parseVersionKey(%q) = %q %v %v, want %q %v %v", c.rel, id, man, ok, c.id, c.manifest, c.ok)
		}
	}
}

// FuzzParseVersionKey: any key under DATASET/v/ gives a valid version id
// or none, and a manifest only in an upload folder of that version.
func FuzzParseVersionKey(f *testing.F) {
	for _, s := range []string{"V1/uploads/u1/manifest.json.gz", "V1/index.lith", "../a", "V1/uploads/u/x", "a/uploads//manifest.json"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		id, man, ok := parseVersionKey(rel)
		if !ok {
			if id != "" || man {
				t.Fatalf("%q: not ok but %q %v", rel, id, man)
			}
			return
		}
		if dataset.ValidVersionID(id) != nil || !strings.HasPrefix(rel, id+"/") {
			t.Fatalf("%q: id %q", rel, id)
		}
		if man {
			rest := strings.TrimPrefix(rel, id+"/uploads/")
			up, name, _ := strings.Cut(rest, "/")
			if up == "" || up == "." || up == ".." || strings.Contains(name, "/") || (name != "manifest.json.gz" && name != "manifest.json") {
				t.Fatalf("%q: a manifest at %q %q", rel, up, name)
			}
		}
	})
}

func TestChainFrom(t *testing.T) {
	l := func(ids string, manifests string) versionListing {
		v := versionListing{manifests: map[string]HistoryVersion{}}
		if ids != "" {
			v.ids = strings.Fields(ids)
		}
		for _, m := range strings.Fields(manifests) {
			v.manifests[m] = HistoryVersion{ID: m}
		}
		return v
	}
	for _, c := range []struct {
		name, current, previous string
		listing                 versionListing
		limit                   int
		want, ended             string
	}{
		{"walk", "5", "4", l("1 2 3 4 5", "1 2 3 4 5"), 100, "4 3 2 1", "oldest listed"},
		{"limit", "5", "4", l("1 2 3 4 5", "1 2 3 4 5"), 3, "4 3", "limit (3 versions)"},
		{"pruned first link", "5", "4", l("1 2 3 5", "1 2 3 5"), 100, "", "4: its manifest is gone"},
		{"pruned folder keeps chunks", "5", "4", l("1 2 3 4 5", "1 3 4 5"), 100, "4 3", "2: its manifest is gone"},
		{"promote", "2", "4", l("1 2 3 4", "1 2 3 4"), 100, "4 3 1", "oldest listed"},
		{"self", "5", "5", l("1 2 3 4 5", "1 2 3 4 5"), 100, "", "cycle"},
		{"unpublished newer folder", "4", "3", l("1 2 3 4 9", "1 2 3 4 9"), 100, "3 2 1", "oldest listed"},
		{"previous newer than all listed", "3", "9", l("1 2 3", "1 2 3"), 100, "", "9: its manifest is gone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			chain, ended := chainFrom(c.current, c.previous, c.listing, c.limit)
			var ids []string
			for _, v := range chain {
				ids = append(ids, v.ID)
			}
			if got := strings.Join(ids, " "); got != c.want || !strings.Contains(ended, c.ended) {
				t.Fatalf("chain %q ended %q, want %q ended %q", got, ended, c.want, c.ended)
			}
		})
	}
}
