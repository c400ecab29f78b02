package catalog

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// A dataset of four published versions (ids in time order), version 3's
// and 4's chunks under version 1's and 2's folders (shared chunks):
//
//	V1: a.txt a1, b.txt b, d.txt d
//	V2: a.txt a2, b.txt b, d.txt d, e.txt e       (a changed, e new)
//	V3: a.txt a2, b.txt b, e.txt e                (d deleted)
//	V4: a.txt a4, b.txt b, d.txt d-again          (a changed, e deleted, d back)
var histIDs = []string{"20260101T000001Z-aaaaaa", "20260102T000001Z-bbbbbb", "20260103T000001Z-cccccc", "20260104T000001Z-dddddd"}

var histFiles = []map[string][]byte{
	{"a.txt": []byte("a1"), "b.txt": []byte("b"), "d.txt": []byte("d")},
	{"a.txt": []byte("a2 two"), "b.txt": []byte("b"), "d.txt": []byte("d"), "e.txt": []byte("e")},
	{"a.txt": []byte("a2 two"), "b.txt": []byte("b"), "e.txt": []byte("e")},
	{"a.txt": []byte("a4 four!"), "b.txt": []byte("b"), "d.txt": []byte("d-again")},
}

type histDataset struct {
	dir  string
	mans []string
}

func publishHistory(t testing.TB) histDataset {
	t.Helper()
	d := histDataset{dir: t.TempDir()}
	chunksOf := []int{0, 1, 0, 1}
	for i, id := range histIDs {
		created := time.Date(2026, 1, 1+i, 0, 0, 1, 0, time.UTC)
		d.mans = append(d.mans, packVersion(t, d.dir, dsPrefix, id, "u"+string(rune('1'+i)), histIDs[chunksOf[i]], histFiles[i], created))
	}
	d.point(t, 3, 2)
	return d
}

// point writes CURRENT naming version i, previous version prev (-1: none).
func (d histDataset) point(t testing.TB, i, prev int) {
	t.Helper()
	p := ""
	if prev >= 0 {
		p = histIDs[prev]
	}
	writeObject(t, d.dir, dsPrefix+"/CURRENT", pointerJSON(dsPrefix, histIDs[i], d.mans[i], p, len(histFiles[i])))
}

// want is a key's versions, newest first: "V<n>" a version whose bytes
// are histFiles[n-1][key], "DM<n>" a delete marker of version n.
type histWant map[string][]string

func versionName(id string) string {
	for i, h := range histIDs {
		if h == id {
			return string(rune('1' + i))
		}
	}
	return "?" + id
}

func checkHistory(t *testing.T, h archiveview.History, want histWant) {
	t.Helper()
	res, err := h.ListVersions(archiveview.VersionListParams{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got := histWant{}
	for _, e := range res.Entries {
		v := e.Version
		n := "V"
		if v.DeleteMarker {
			n = "DM"
		}
		got[v.Key] = append(got[v.Key], n+versionName(v.VersionID))
		if len(got[v.Key]) == 1 != v.IsLatest {
			t.Errorf("%s %s: IsLatest %v", v.Key, v.VersionID, v.IsLatest)
		}
	}
	for k, w := range want {
		if strings.Join(got[k], " ") != strings.Join(w, " ") {
			t.Errorf("%s: versions %v, want %v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("keys %v, want %v", got, want)
	}
}

// readVersion reads key as of version id through Lookup.
func readVersion(t *testing.T, h archiveview.History, cur *archiveview.Archive, key, id string) (data []byte, v archiveview.Version, ok bool) {
	t.Helper()
	v, ok, err := h.Lookup(context.Background(), key, id)
	if err != nil {
		t.Fatalf("%s@%s: %v", key, id, err)
	}
	if !ok || v.DeleteMarker {
		return nil, v, ok
	}
	a := cur
	if v.Archive != nil {
		a = v.Archive
	}
	rc, err := a.Open(context.Background(), v.File, 0, v.Size)
	if err != nil {
		t.Fatalf("%s@%s: %v", key, id, err)
	}
	defer rc.Close()
	data, err = io.ReadAll(rc)
	if err != nil {
		t.Fatalf("%s@%s: %v", key, id, err)
	}
	return data, v, true
}

// TestDatasetHistory: a followed dataset's history walks CURRENT's
// previous_version_id and then the listed versions; per key a version
// where its bytes changed and a delete marker where it disappeared;
// versionId= reads byte for byte (older versions opened again, chunks
// shared across version folders); a plain lookup never builds it; the
// build costs one listing and one manifest GET per older version.
func TestDatasetHistory(t *testing.T) {
	d := publishHistory(t)
	store := newCountStore(backend.NewFileStore(d.dir))
	cm := datasetManager(store, Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a := bucketArchive(t, cm, "ocean")
	checkTree(t, a, histFiles[3])

	before := store.counts()
	h, ds, err := cm.History(ctx, "ocean", a, false)
	if err != nil || !ds || h != nil {
		t.Fatalf("a plain lookup: history %v dataset %v err %v, want none built", h, ds, err)
	}
	if n := store.total() - sum(before); n != 0 {
		t.Fatalf("a plain lookup made %d requests", n)
	}
	h, ds, err = cm.History(ctx, "ocean", a, true)
	if err != nil || !ds || h == nil {
		t.Fatalf("history %v dataset %v err %v", h, ds, err)
	}
	after := store.counts()
	if after["list"]-before["list"] != 1 || after["get"]-before["get"] != 3 {
		t.Fatalf("the build made %v requests (before %v), want 1 listing and 3 manifest GETs", after, before)
	}
	checkHistory(t, h, histWant{
		"a.txt": {"V4", "V2", "V1"},
		"b.txt": {"V1"},
		"d.txt": {"V4", "DM3", "V1"},
		"e.txt": {"DM4", "V2"},
	})
	if dh := h.(*DatasetHistory); len(dh.Versions()) != 4 || !strings.Contains(dh.Ended(), "oldest listed") {
		t.Fatalf("versions %d, ended %q", len(dh.Versions()), dh.Ended())
	}
	if de := cm.datasetEntry("ocean"); de == nil || de.History == nil || de.History.Versions != 4 || de.History.KeyVersions != 9 || de.History.Bytes <= 0 {
		t.Fatalf("/-/archives dataset entry: %+v", de)
	}
	// As of each version, every key: its bytes, a delete marker, or none.
	for vi, id := range histIDs {
		for _, key := range []string{"a.txt", "b.txt", "d.txt", "e.txt"} {
			data, v, ok := readVersion(t, h, a, key, id)
			want, exists := histFiles[vi][key]
			switch {
			case exists && (!ok || v.DeleteMarker || string(data) != string(want)):
				t.Errorf("%s as of V%d: %q (ok %v marker %v), want %q", key, vi+1, data, ok, v.DeleteMarker, want)
			case !exists && ok && !v.DeleteMarker:
				t.Errorf("%s as of V%d: %q, want absent", key, vi+1, data)
			}
		}
	}
	// Deleted in V4 but existed: a delete marker; as of V1, e.txt never existed.
	if _, v, ok := readVersion(t, h, a, "e.txt", histIDs[3]); !ok || !v.DeleteMarker || v.VersionID != histIDs[3] {
		t.Fatalf("e.txt as of V4: ok %v %+v, want the delete marker V4", ok, v)
	}
	if _, _, ok := readVersion(t, h, a, "e.txt", histIDs[0]); ok {
		t.Fatal("e.txt as of V1: found, want no such version")
	}
	if _, _, ok := readVersion(t, h, a, "a.txt", "20990101T000000Z-ffffff"); ok {
		t.Fatal("an id not in the history: found")
	}
	// The latest: a.txt's id is V4, b.txt's V1 (unchanged since).
	if _, v, _ := readVersion(t, h, a, "b.txt", ""); v.VersionID != histIDs[0] {
		t.Fatalf("b.txt's latest version id %q, want %s", v.VersionID, histIDs[0])
	}
	// Asked again: the same history, no request.
	n := store.total()
	if h2, _, _ := cm.History(ctx, "ocean", a, false); h2 != h {
		t.Fatal("history rebuilt")
	}
	if store.total() != n {
		t.Fatal("a built history made requests")
	}
	// Paging by key-marker and version-id-marker visits the same versions.
	var all []string
	p := archiveview.VersionListParams{MaxKeys: 2}
	for {
		res, err := h.ListVersions(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Entries {
			all = append(all, e.Version.Key+"@"+versionName(e.Version.VersionID))
		}
		if !res.Truncated {
			break
		}
		p.KeyMarker, p.VersionIDMarker = res.NextKeyMarker, res.NextVersionIDMarker
	}
	if got := strings.Join(all, " "); got != "a.txt@4 a.txt@2 a.txt@1 b.txt@1 d.txt@4 d.txt@3 d.txt@1 e.txt@4 e.txt@2" {
		t.Fatalf("paged: %s", got)
	}
	if _, err := h.ListVersions(archiveview.VersionListParams{MaxKeys: 5, KeyMarker: "a.txt", VersionIDMarker: histIDs[2]}); !errors.Is(err, archiveview.ErrUnknownVersion) {
		t.Fatalf("a version-id marker not of the key: %v", err)
	}
	res, _ := h.ListVersions(archiveview.VersionListParams{MaxKeys: 10, Delimiter: ".", Prefix: ""})
	if len(res.Entries) != 4 || res.Entries[0].Prefix != "a." {
		t.Fatalf("delimited: %+v", res.Entries)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestDatasetHistoryEnds: the limit, a pruned version (its manifest gone,
// its folder still holding chunks a retained version needs), a promote
// (CURRENT back to an older version: its previous_version_id is the one it
// replaced) and a pinned bucket (a history of one version, no request).
func TestDatasetHistoryEnds(t *testing.T) {
	cases := []struct {
		name    string
		target  string
		limit   int
		prepare func(t *testing.T, d histDataset)
		want    histWant
		ended   string
		lists   int
	}{
		{name: "limit", target: "s3://lake/ocean@current", limit: 2, lists: 1,
			want:  histWant{"a.txt": {"V4", "V3"}, "b.txt": {"V3"}, "d.txt": {"V4"}, "e.txt": {"DM4", "V3"}},
			ended: "limit (2 versions)"},
		{name: "pruned", target: "s3://lake/ocean@current", lists: 1,
			prepare: func(t *testing.T, d histDataset) {
				// prune --keep 3: V1's manifest goes, its chunks (V3's) stay.
				if err := os.Remove(filepath.Join(d.dir, dsBucket, d.mans[0])); err != nil {
					t.Fatal(err)
				}
			},
			want:  histWant{"a.txt": {"V4", "V2"}, "b.txt": {"V2"}, "d.txt": {"V4", "DM3", "V2"}, "e.txt": {"DM4", "V2"}},
			ended: "pruned"},
		{name: "promote", target: "s3://lake/ocean@current", lists: 1,
			prepare: func(t *testing.T, d histDataset) { d.point(t, 1, 3) }, // V2 again, replacing V4
			// V2, V4, V3, V1
			want: histWant{"a.txt": {"V2", "V4", "V3", "V1"}, "b.txt": {"V1"}, "d.txt": {"V2", "V4", "DM3", "V1"}, "e.txt": {"V2", "DM4", "V3"}},
		},
		{name: "pinned", target: "s3://lake/ocean@" + histIDs[2], lists: 0,
			want:  histWant{"a.txt": {"V3"}, "b.txt": {"V3"}, "e.txt": {"V3"}},
			ended: "no previous version"},
		{name: "first version", target: "s3://lake/ocean@current", lists: 0,
			prepare: func(t *testing.T, d histDataset) { d.point(t, 0, -1) },
			want:    histWant{"a.txt": {"V1"}, "b.txt": {"V1"}, "d.txt": {"V1"}},
			ended:   "no previous version"},
		{name: "cycle", target: "s3://lake/ocean@current", lists: 1,
			prepare: func(t *testing.T, d histDataset) { d.point(t, 3, 3) }, // a pointer naming itself
			want:    histWant{"a.txt": {"V4"}, "b.txt": {"V4"}, "d.txt": {"V4"}},
			ended:   "cycle"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := publishHistory(t)
			if c.prepare != nil {
				c.prepare(t, d)
			}
			store := newCountStore(backend.NewFileStore(d.dir))
			cm := NewManager(Config{Store: store, Aliases: []Alias{{Name: "ocean", Target: c.target}}, WaitOpen: true,
				RetireGrace: time.Hour, DatasetHistory: c.limit})
			defer cm.CloseAll()
			ctx := context.Background()
			if err := cm.Scan(ctx, true); err != nil {
				t.Fatal(err)
			}
			a := bucketArchive(t, cm, "ocean")
			lists := store.counts()["list"]
			h, ds, err := cm.History(ctx, "ocean", a, true)
			if err != nil || !ds || h == nil {
				t.Fatalf("history %v dataset %v err %v", h, ds, err)
			}
			if n := store.counts()["list"] - lists; n != c.lists {
				t.Fatalf("%d listings, want %d", n, c.lists)
			}
			checkHistory(t, h, c.want)
			if ended := h.(*DatasetHistory).Ended(); !strings.Contains(ended, c.ended) {
				t.Fatalf("ended %q, want %q", ended, c.ended)
			}
		})
	}
}

// TestDatasetHistoryReplaced: a promote at a rescan drops the history of
// the version no longer served; the next request builds the new one.
func TestDatasetHistoryReplaced(t *testing.T) {
	d := publishHistory(t)
	store := newCountStore(backend.NewFileStore(d.dir))
	cm := datasetManager(store, Alias{Name: "ocean", Target: "s3://lake/ocean@current"})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a := bucketArchive(t, cm, "ocean")
	h1, _, err := cm.History(ctx, "ocean", a, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h1.Lookup(ctx, "a.txt", histIDs[1]); err != nil { // opens V3 (a2's newest)
		t.Fatal(err)
	}
	d.point(t, 2, 3) // V3 again, replacing V4
	if err := cm.Scan(ctx, false); err != nil {
		t.Fatal(err)
	}
	a2 := bucketArchive(t, cm, "ocean")
	if a2 == a {
		t.Fatal("promote not picked up")
	}
	if h, _, err := cm.History(ctx, "ocean", a, true); err == nil || h != nil || !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("the retired archive's history: %v %v", h, err)
	}
	h2, _, err := cm.History(ctx, "ocean", a2, true)
	if err != nil {
		t.Fatal(err)
	}
	checkHistory(t, h2, histWant{"a.txt": {"V3", "V4", "V2", "V1"}, "b.txt": {"V1"}, "d.txt": {"DM3", "V4", "V1"}, "e.txt": {"V3", "DM4", "V2"}})
}

// blockingList holds every List until release is closed.
type blockingList struct {
	backend.Store
	release chan struct{}
}

func (b *blockingList) List(ctx context.Context, bucket, prefix string, fn func(backend.ObjectInfo) error) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.Store.List(ctx, bucket, prefix, fn)
}

// TestDatasetHistoryBuilding: a request waits for a history still being
// built up to the open wait, then gets an error wrapping
// ErrHistoryBuilding (a 503) while the build goes on; the next request
// gets the history.
func TestDatasetHistoryBuilding(t *testing.T) {
	d := publishHistory(t)
	store := &blockingList{Store: backend.NewFileStore(d.dir), release: make(chan struct{})}
	cm := NewManager(Config{Store: store, Aliases: []Alias{{Name: "ocean", Target: "s3://lake/ocean@current"}},
		WaitOpen: true, RetireGrace: time.Hour, OpenWait: 50 * time.Millisecond})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a := bucketArchive(t, cm, "ocean")
	h, ds, err := cm.History(ctx, "ocean", a, true)
	if h != nil || !ds || !errors.Is(err, ErrHistoryBuilding) || !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("history %v dataset %v err %v, want ErrHistoryBuilding", h, ds, err)
	}
	close(store.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, _, err = cm.History(ctx, "ocean", a, true)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrHistoryBuilding) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	checkHistory(t, h, histWant{"a.txt": {"V4", "V2", "V1"}, "b.txt": {"V1"}, "d.txt": {"V4", "DM3", "V1"}, "e.txt": {"DM4", "V2"}})
}

// TestDatasetHistoryRewritten: an older version rewritten after the
// history was built (its manifest now describes other bytes) is refused
// when its bytes are asked for, never served as that version.
func TestDatasetHistoryRewritten(t *testing.T) {
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
	// a.txt as of V2 is read from V3 (the newest version of that run):
	// V3's manifest now holds V1's files.
	data, err := os.ReadFile(filepath.Join(d.dir, dsBucket, d.mans[0]))
	if err != nil {
		t.Fatal(err)
	}
	writeObject(t, d.dir, d.mans[2], string(data))
	if _, _, err := h.Lookup(ctx, "a.txt", histIDs[1]); !errors.Is(err, archiveview.ErrInvalidTree) || !strings.Contains(err.Error(), "a.txt") {
		t.Fatalf("a rewritten version: %v, want a refusal naming the key", err)
	}
}
