package archiveview

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// vUpload is one upload of a test chain, as the reference model sees it.
type vUpload struct {
	id      string
	files   map[string][]byte
	deleted []string
	created time.Time
	opt     cargopack.Options
}

// vWant is one expected version.
type vWant struct {
	key, id string
	dm      bool
	data    []byte
	created time.Time
}

// vPackChain writes uploads (oldest first) as a chain and returns the
// newest manifest key.
func vPackChain(t testing.TB, dir string, ups []vUpload) string {
	t.Helper()
	var key, prev string
	for _, u := range ups {
		opt := u.opt
		opt.Bucket, opt.Prefix, opt.UploadID, opt.Created = rvBucket, "pre", u.id, u.created
		if prev != "" {
			opt.PreviousManifestID, opt.SyncType, opt.DeletedPaths = prev, "incremental", u.deleted
		}
		res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(u.files, u.created), opt)
		if err != nil {
			t.Fatalf("cargopack.Write %s: %v", u.id, err)
		}
		key, prev = res.ManifestKey, u.id
	}
	return key
}

// vReference computes every key's versions, newest first, from the
// uploads (oldest first) alone: a file in upload U is version U, else a
// deleted path in U is a delete marker U.
func vReference(ups []vUpload) []vWant {
	keys := map[string]bool{}
	for _, u := range ups {
		for k := range u.files {
			keys[k] = true
		}
		for _, k := range u.deleted {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []vWant
	for _, k := range sorted {
		for i := len(ups) - 1; i >= 0; i-- {
			u := ups[i]
			if d, ok := u.files[k]; ok {
				out = append(out, vWant{key: k, id: u.id, data: d, created: u.created})
			} else if slices.Contains(u.deleted, k) {
				out = append(out, vWant{key: k, id: u.id, dm: true, created: u.created})
			}
		}
	}
	return out
}

func vReadAll(t testing.TB, a *Archive, f File, off, n int64) []byte {
	t.Helper()
	rc, err := a.Open(context.Background(), f, off, n)
	if err != nil {
		t.Fatalf("Open %s [%d,+%d): %v", f.Key, off, n, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s [%d,+%d): %v", f.Key, off, n, err)
	}
	return b
}

// vShapesChain is four uploads of different shapes: framed with split
// files and dedup, an unframed 2.0 delta, a direct-upload delta and a
// plain-tar delta, with deletes and re-adds.
func vShapesChain() []vUpload {
	day := func(d int) time.Time { return time.Date(2025, 6, d, 12, 0, 0, 0, time.UTC) }
	same := rvText(9, 3000)
	return []vUpload{
		{id: "u1", created: day(1), opt: cargopack.Options{FrameSize: 16 << 10, SplitSize: 40 << 10, Dedup: true},
			files: map[string][]byte{"a/x": rvRandom(1, 100<<10), "a/y": rvText(2, 5000), "b": rvText(3, 700),
				"c/d/e": rvText(4, 90), "dup1": same, "dup2": same, "z": rvText(5, 1)}},
		{id: "u2", created: day(2), opt: cargopack.Options{Version: "2.0"},
			files: map[string][]byte{"a/y": rvText(12, 6000), "new": rvText(13, 400), "z": {}}, deleted: []string{"b", "c/d/e"}},
		{id: "u3", created: day(3), opt: cargopack.Options{Direct: true},
			files: map[string][]byte{"b": rvText(23, 800), "a/x": rvRandom(21, 20<<10)}},
		{id: "u4", created: day(4), opt: cargopack.Options{PlainTar: func(string) bool { return true }},
			files: map[string][]byte{"a/y": rvText(32, 100)}, deleted: []string{"new", "dup2"}},
	}
}

// TestVersionsChain serves every version of a four-upload chain of mixed
// shapes and compares each with the reference model and the source bytes.
func TestVersionsChain(t *testing.T) {
	dir := t.TempDir()
	ups := vShapesChain()
	top := vPackChain(t, dir, ups)
	a, err := rvOpen(t, dir, top, Options{Name: "vb"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	v, err := a.Versions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := vReference(ups)
	got, err := v.ListVersions(VersionListParams{MaxKeys: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if got.Truncated || len(got.Entries) != len(want) {
		t.Fatalf("ListVersions: %d entries (truncated %v), want %d", len(got.Entries), got.Truncated, len(want))
	}
	for i, w := range want {
		e := got.Entries[i].Version
		latest := i == 0 || want[i-1].key != w.key
		if e.Key != w.key || e.VersionID != w.id || e.DeleteMarker != w.dm || e.IsLatest != latest {
			t.Fatalf("entry %d = %s@%s dm=%v latest=%v, want %s@%s dm=%v latest=%v",
				i, e.Key, e.VersionID, e.DeleteMarker, e.IsLatest, w.key, w.id, w.dm, latest)
		}
		s, ok := v.StatVersion(w.key, w.id)
		if !ok || s.VersionID != w.id || s.DeleteMarker != w.dm || s.IsLatest != latest {
			t.Fatalf("StatVersion(%s, %s) = %+v, %v", w.key, w.id, s, ok)
		}
		if latest {
			l, ok := v.StatVersion(w.key, "")
			if !ok || l.VersionID != w.id || l.DeleteMarker != w.dm {
				t.Fatalf("latest of %s = %+v, want %s", w.key, l, w.id)
			}
			cur, inTree := a.Stat(w.key)
			if inTree == w.dm {
				t.Fatalf("key %s: in the tree %v, latest is a delete marker %v", w.key, inTree, w.dm)
			}
			if inTree && (cur.ETag != l.ETag || cur.Size != l.Size || cur.VersionID != w.id) {
				t.Fatalf("key %s: tree %+v, latest version %+v", w.key, cur, l.File)
			}
			if id, dm := a.DeleteMarker(w.key); dm != w.dm || (dm && id != w.id) {
				t.Fatalf("DeleteMarker(%s) = %q, %v; want %q, %v", w.key, id, dm, w.id, w.dm)
			}
		}
		if w.dm {
			if !s.ModTime.Equal(w.created) || s.Size != 0 {
				t.Fatalf("delete marker %s@%s: %+v", w.key, w.id, s)
			}
			continue
		}
		if s.Size != int64(len(w.data)) || !s.ModTime.Equal(w.created) || s.ETag == "" {
			t.Fatalf("%s@%s: size %d mtime %v etag %q, want %d %v", w.key, w.id, s.Size, s.ModTime, s.ETag, len(w.data), w.created)
		}
		if b := vReadAll(t, a, s.File, 0, s.Size); !bytes.Equal(b, w.data) {
			t.Fatalf("%s@%s: whole read differs from the source (%d bytes, want %d)", w.key, w.id, len(b), len(w.data))
		}
		if s.Size > 10 {
			off, n := s.Size/3, s.Size/2
			if b := vReadAll(t, a, s.File, off, n); !bytes.Equal(b, w.data[off:off+n]) {
				t.Fatalf("%s@%s: range read differs from the source", w.key, w.id)
			}
		}
	}
	// Versions of one key with different contents have different ETags.
	if x1, _ := v.StatVersion("a/x", "u1"); x1.ETag == "" || x1.ETag == a.mustStat(t, "a/x").ETag {
		t.Errorf("split old version a/x@u1 has ETag %q", x1.ETag)
	}
	for _, c := range []struct{ key, id string }{{"a/y", "u3"}, {"a/y", "nope"}, {"nope", "u1"}, {"nope", ""}, {"b", "u4"}} {
		if s, ok := v.StatVersion(c.key, c.id); ok {
			t.Errorf("StatVersion(%q, %q) = %+v, want not found", c.key, c.id, s)
		}
	}
	if _, err := v.ListVersions(VersionListParams{KeyMarker: "a/y", VersionIDMarker: "u3", MaxKeys: 5}); !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("unknown version-id marker: %v", err)
	}
	// The same Versions is returned again without another build.
	v2, err := a.Versions(context.Background())
	if err != nil || v2 != v {
		t.Errorf("second Versions: %p %v, first %p", v2, err, v)
	}
	// A File of another archive's history is refused, never misread.
	b, err := rvOpen(t, dir, top, Options{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	old, _ := v.StatVersion("a/y", "u2")
	if _, err := b.Open(context.Background(), old.File, 0, old.Size); !errors.Is(err, ErrBadRange) {
		t.Errorf("foreign version File: %v", err)
	}
}

// TestVersionIDWithoutHistory: a plain Stat of a chain archive knows each
// key's version id (the upload that wrote it) and whether its latest
// version is a delete marker without building the version history (no
// store request at all), also after a round trip through the persistent
// index.
func TestVersionIDWithoutHistory(t *testing.T) {
	dir := t.TempDir()
	ups := vShapesChain()
	top := vPackChain(t, dir, ups)
	fs := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	a, err := Open(context.Background(), fs, rvBucket, top, Options{Name: "vid"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var buf bytes.Buffer
	if err := a.WriteIndex(&buf); err != nil {
		t.Fatal(err)
	}
	b, err := OpenIndex(context.Background(), fs, &buf, Options{Name: "vid"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := vReference(ups)
	fs.Reset()
	checked, deleted := 0, 0
	for _, arc := range []*Archive{a, b} {
		for i, w := range want {
			if i > 0 && want[i-1].key == w.key {
				continue // only the latest version of each key
			}
			f, ok := arc.Stat(w.key)
			id, dm := arc.DeleteMarker(w.key)
			switch {
			case w.dm && (ok || !dm || id != w.id):
				t.Fatalf("%s: deleted by %s, got Stat %v, DeleteMarker %q %v", w.key, w.id, ok, id, dm)
			case !w.dm && (!ok || dm || f.VersionID != w.id):
				t.Fatalf("%s: version %s, got Stat %v (version %q), DeleteMarker %v", w.key, w.id, ok, f.VersionID, dm)
			}
			checked++
			if w.dm {
				deleted++
			}
		}
	}
	if deleted == 0 || checked < 4 {
		t.Fatalf("chain has %d keys, %d deleted: not a useful case", checked, deleted)
	}
	if n := fs.Requests(""); n != 0 {
		t.Fatalf("%d store requests for version ids, want 0", n)
	}
}

// TestVersionsSingleUpload: one upload has one version per key (the upload
// id) and building the history costs no request.
func TestVersionsSingleUpload(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"a": rvText(1, 10), "d/b": rvText(2, 20), "d/c": rvText(3, 30)}
	res := rvPack(t, dir, files, cargopack.Options{Prefix: "pre", UploadID: "only", FrameSize: 1 << 10})
	st := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	a, err := Open(context.Background(), st, rvBucket, res.ManifestKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Reset()
	v, err := a.Versions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	page, err := v.ListVersions(VersionListParams{MaxKeys: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 3 {
		t.Fatalf("%d entries", len(page.Entries))
	}
	for _, e := range page.Entries {
		s, ok := v.StatVersion(e.Version.Key, "only")
		if !ok || !s.IsLatest || s.DeleteMarker || e.Version.VersionID != "only" || !e.Version.IsLatest {
			t.Fatalf("%+v / %+v %v", e.Version, s, ok)
		}
		if b := vReadAll(t, a, s.File, 0, s.Size); !bytes.Equal(b, files[s.Key]) {
			t.Fatalf("%s differs", s.Key)
		}
	}
	if _, ok := v.StatVersion("a", "other"); ok {
		t.Error("unknown version id found")
	}
	if n := st.Requests("get") + st.Requests("stat") + st.Requests("list"); n != 0 {
		t.Errorf("Versions and StatVersion of one upload made %d get/stat/list requests", n)
	}
}

// vRefPage is the brute-force reference of one ListVersions page: every
// entry in order (common prefixes rolled up at their first key), markers
// applied by position.
func vRefPage(all []vWant, p VersionListParams) (VersionListResult, error) {
	type ent struct {
		prefix string
		w      vWant
	}
	var seq []ent
	seen := map[string]bool{}
	for _, w := range all {
		if !strings.HasPrefix(w.key, p.Prefix) {
			continue
		}
		if p.Delimiter != "" {
			if d := strings.Index(w.key[len(p.Prefix):], p.Delimiter); d >= 0 {
				cp := w.key[:len(p.Prefix)+d+len(p.Delimiter)]
				if !seen[cp] {
					seen[cp] = true
					seq = append(seq, ent{prefix: cp})
				}
				continue
			}
		}
		seq = append(seq, ent{w: w})
	}
	var res VersionListResult
	useMarker := p.KeyMarker != "" && p.KeyMarker >= p.Prefix
	if useMarker && p.VersionIDMarker != "" && !slices.ContainsFunc(all, func(w vWant) bool {
		return w.key == p.KeyMarker && w.id == p.VersionIDMarker
	}) {
		return VersionListResult{}, ErrUnknownVersion
	}
	passed := false // the version-id marker was passed
	skip := func(e ent) bool {
		if !useMarker {
			return false
		}
		if e.prefix != "" {
			return e.prefix <= p.KeyMarker
		}
		if e.w.key != p.KeyMarker {
			return e.w.key < p.KeyMarker
		}
		if p.VersionIDMarker == "" {
			return true
		}
		if e.w.id == p.VersionIDMarker {
			passed = true
			return true
		}
		return !passed
	}
	for _, e := range seq {
		if skip(e) {
			continue
		}
		if len(res.Entries) == p.MaxKeys {
			res.Truncated = true
			break
		}
		if e.prefix != "" {
			res.Entries = append(res.Entries, VersionEntry{Prefix: e.prefix})
		} else {
			res.Entries = append(res.Entries, VersionEntry{Version: Version{File: File{Key: e.w.key}, VersionID: e.w.id, DeleteMarker: e.w.dm}})
		}
	}
	if res.Truncated {
		last := res.Entries[len(res.Entries)-1]
		if last.Prefix != "" {
			res.NextKeyMarker = last.Prefix
		} else {
			res.NextKeyMarker, res.NextVersionIDMarker = last.Version.Key, last.Version.VersionID
		}
	}
	return res, nil
}

func vSamePage(got, want VersionListResult) error {
	if got.Truncated != want.Truncated || got.NextKeyMarker != want.NextKeyMarker || got.NextVersionIDMarker != want.NextVersionIDMarker {
		return fmt.Errorf("truncated %v next %q/%q, want %v %q/%q", got.Truncated, got.NextKeyMarker, got.NextVersionIDMarker,
			want.Truncated, want.NextKeyMarker, want.NextVersionIDMarker)
	}
	if len(got.Entries) != len(want.Entries) {
		return fmt.Errorf("%d entries, want %d", len(got.Entries), len(want.Entries))
	}
	for i := range got.Entries {
		g, w := got.Entries[i], want.Entries[i]
		if g.Prefix != w.Prefix || g.Version.Key != w.Version.Key || g.Version.VersionID != w.Version.VersionID || g.Version.DeleteMarker != w.Version.DeleteMarker {
			return fmt.Errorf("entry %d = %q %s@%s dm=%v, want %q %s@%s dm=%v", i, g.Prefix, g.Version.Key, g.Version.VersionID,
				g.Version.DeleteMarker, w.Prefix, w.Version.Key, w.Version.VersionID, w.Version.DeleteMarker)
		}
	}
	return nil
}

// TestVersionsPaging pages many keys × versions with max-keys 1, 3 and
// 1000, with and without prefix and delimiter, following the next markers,
// and compares every page with the brute-force reference; then random
// marker pairs.
func TestVersionsPaging(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var keys []string
	for i := 0; i < 150; i++ {
		keys = append(keys, fmt.Sprintf("%s/%s%02d", []string{"a", "b", "b/c", "d"}[r.IntN(4)], []string{"x", "y", "y/z", ""}[r.IntN(4)], i))
	}
	keys = append(keys, "top", "b.x", "b0")
	var ups []vUpload
	present := map[string]bool{}
	for u := 0; u < 5; u++ {
		up := vUpload{id: fmt.Sprintf("up%d", u), files: map[string][]byte{}, created: time.Date(2025, 1, 1+u, 0, 0, 0, 0, time.UTC),
			opt: cargopack.Options{FrameSize: 4 << 10}}
		for _, k := range keys {
			switch x := r.IntN(10); {
			case u == 0 && x < 7, u > 0 && x < 3:
				up.files[k] = []byte(fmt.Sprintf("%s@%d", k, u))
				present[k] = true
			case u > 0 && x < 5 && present[k]:
				up.deleted = append(up.deleted, k)
				present[k] = false
			}
		}
		ups = append(ups, up)
	}
	dir := t.TempDir()
	a, err := rvOpen(t, dir, vPackChain(t, dir, ups), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	v, err := a.Versions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	all := vReference(ups)
	for _, max := range []int{1, 3, 1000} {
		for _, pd := range [][2]string{{"", ""}, {"", "/"}, {"b/", "/"}, {"b", "/"}, {"b/c/", ""}, {"a/", "y"}, {"", "//"}, {"zz", ""}} {
			p := VersionListParams{Prefix: pd[0], Delimiter: pd[1], MaxKeys: max}
			var concat []VersionEntry
			for pages := 0; ; pages++ {
				got, err := v.ListVersions(p)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := vRefPage(all, p)
				if err := vSamePage(got, want); err != nil {
					t.Fatalf("max %d prefix %q delim %q page %d (markers %q/%q): %v", max, p.Prefix, p.Delimiter, pages, p.KeyMarker, p.VersionIDMarker, err)
				}
				concat = append(concat, got.Entries...)
				if !got.Truncated {
					break
				}
				p.KeyMarker, p.VersionIDMarker = got.NextKeyMarker, got.NextVersionIDMarker
			}
			whole, _ := vRefPage(all, VersionListParams{Prefix: pd[0], Delimiter: pd[1], MaxKeys: 1 << 20})
			if err := vSamePage(VersionListResult{Entries: concat}, whole); err != nil {
				t.Fatalf("max %d prefix %q delim %q: pages joined: %v", max, pd[0], pd[1], err)
			}
		}
	}
	for i := 0; i < 400; i++ {
		w := all[r.IntN(len(all))]
		p := VersionListParams{KeyMarker: w.key, MaxKeys: 1 + r.IntN(7)}
		if r.IntN(2) == 0 {
			p.VersionIDMarker = w.id
		}
		if r.IntN(3) == 0 {
			p.Delimiter = "/"
		}
		if r.IntN(3) == 0 {
			p.Prefix = w.key[:r.IntN(len(w.key)+1)]
		}
		got, err := v.ListVersions(p)
		want, werr := vRefPage(all, p)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%+v: error %v, reference %v", p, err, werr)
		}
		if err := vSamePage(got, want); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
	}
}

// TestVersionsConcurrentAndChanged: concurrent first uses share one build;
// a chain whose manifests changed since Open is an error naming the
// archive, never a wrong history.
func TestVersionsConcurrentAndChanged(t *testing.T) {
	dir := t.TempDir()
	ups := vShapesChain()
	top := vPackChain(t, dir, ups)
	a, err := rvOpen(t, dir, top, Options{Name: "vb"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]*Versions, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := a.Versions(context.Background())
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	for _, v := range got[1:] {
		if v != got[0] {
			t.Fatal("concurrent Versions built twice")
		}
	}
	a.Close()

	// Rewrite the middle upload with other content: the tree opened before
	// no longer matches.
	b, err := rvOpen(t, dir, top, Options{Name: "vb2"})
	if err != nil {
		t.Fatal(err)
	}
	u3 := ups[2]
	u3.files = map[string][]byte{"other": rvText(99, 10)}
	if err := os.RemoveAll(filepath.Join(dir, rvBucket, "pre", "uploads", "u3")); err != nil {
		t.Fatal(err)
	}
	vPackChain(t, dir, []vUpload{ups[1], u3})
	_, err = b.Versions(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"vb2"`) {
		t.Fatalf("changed chain: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Versions(ctx); err == nil {
		t.Fatal("cancelled build succeeded")
	}
}

func (a *Archive) mustStat(t testing.TB, key string) File {
	t.Helper()
	f, ok := a.Stat(key)
	if !ok {
		t.Fatalf("Stat(%q): not found", key)
	}
	return f
}

// BenchmarkVersions1M builds the history of a two-upload chain: the
// 1,000,000-file base of BenchmarkOpen1M and a delta that modifies 1000
// files and deletes 1000. Reported: history-MB and history-B/key (HeapAlloc
// retained by the history, after GC, beyond the opened archive), cpu-s/op
// (Versions' first call: the manifests read again and resolved) and the
// cost of one ListVersions page of 1000 deep in the key space.
func BenchmarkVersions1M(b *testing.B) {
	dir := benchManifest(b)
	t0 := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	// The delta reuses the base's chunks (a chain resolves chunk keys
	// across manifests); its entries only need to resolve, not be read.
	rc, _, err := backend.NewFileStore(dir).Get(context.Background(), "bkt", benchManifestKey)
	if err != nil {
		b.Fatal(err)
	}
	base, err := manifest.Load(rc, benchManifestKey, manifest.Limits{})
	rc.Close()
	if err != nil {
		b.Fatal(err)
	}
	delta := *base
	delta.UploadID, delta.PreviousManifestID, delta.SyncType = "20260102-delta", base.UploadID, "incremental"
	delta.CreatedAt, delta.CompletedAt = t0, t0
	delta.Files, delta.DeletedPaths = nil, nil
	for i := 0; i < 2000; i += 2 {
		fe := base.Files[i*499]
		fe.ModTime = t0
		delta.Files = append(delta.Files, fe)
		delta.DeletedPaths = append(delta.DeletedPaths, base.Files[i*499+1].Path)
	}
	delta.TotalFiles = int64(len(delta.Files))
	deltaKey := "bench/uploads/20260102-delta/manifest.json.gz"
	rvPutManifestDir(b, dir, deltaKey, &delta)
	base = nil

	store := backend.NewFileStore(dir)
	ctx := context.Background()
	for b.Loop() {
		a, err := Open(ctx, store, "bkt", deltaKey, Options{})
		if err != nil {
			b.Fatal(err)
		}
		before := heapAfterGC()
		cpu0 := cpuTime()
		v, err := a.Versions(ctx)
		cpu := cpuTime() - cpu0
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		retained := heapAfterGC() - before
		b.ReportMetric(float64(retained)/(1<<20), "history-MB")
		b.ReportMetric(float64(retained)/float64(v.keys.N()), "history-B/key")
		b.ReportMetric(cpu.Seconds(), "cpu-s/op")
		if v.keys.N() != benchFiles || len(v.vers) != benchFiles+2000 {
			b.Fatalf("keys %d versions %d", v.keys.N(), len(v.vers))
		}
		t1 := time.Now()
		page, err := v.ListVersions(VersionListParams{KeyMarker: benchKey(600_000), MaxKeys: 1000})
		if err != nil || len(page.Entries) != 1000 {
			b.Fatalf("page: %d %v", len(page.Entries), err)
		}
		b.ReportMetric(float64(time.Since(t1).Microseconds()), "page-µs")
		runtime.KeepAlive(a)
		b.StartTimer()
	}
}

// rvPutManifestDir writes m as gzip JSON at key in FileStore dir.
func rvPutManifestDir(b testing.TB, dir, key string, m *manifest.Manifest) {
	b.Helper()
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err := json.NewEncoder(zw).Encode(m); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// FuzzListVersions compares ListVersions with the brute-force reference
// for arbitrary prefixes, delimiters, markers and page sizes over a chain
// with versions, delete markers and nested keys.
func FuzzListVersions(f *testing.F) {
	ups := vShapesChain()
	dir := f.TempDir()
	a, err := rvOpen(f, dir, vPackChain(f, dir, ups), Options{})
	if err != nil {
		f.Fatal(err)
	}
	v, err := a.Versions(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	all := vReference(ups)
	f.Add("", "", "", "", uint8(3))
	f.Add("a", "/", "a/x", "u1", uint8(1))
	f.Add("", "/", "c/", "", uint8(2))
	f.Add("", "d", "dup2", "u4", uint8(9))
	f.Add("a/", "", "a/y", "nope", uint8(4))
	f.Fuzz(func(t *testing.T, prefix, delim, km, vm string, max uint8) {
		p := VersionListParams{Prefix: prefix, Delimiter: delim, KeyMarker: km, VersionIDMarker: vm, MaxKeys: int(max % 12)}
		got, err := v.ListVersions(p)
		if p.MaxKeys == 0 {
			if err != nil || len(got.Entries) != 0 || got.Truncated {
				t.Fatalf("max 0: %+v %v", got, err)
			}
			return
		}
		want, werr := vRefPage(all, p)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%+v: error %v, reference %v", p, err, werr)
		}
		if err := vSamePage(got, want); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
	})
}

// TestVersionsFromIndexCache: an archive loaded from a persistent index
// (no manifest read at Open) builds the same history on first use.
func TestVersionsFromIndexCache(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	ups := vShapesChain()
	top := vPackChain(t, dir, ups)
	for round := 0; round < 2; round++ {
		st := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
		a, err := Open(context.Background(), st, rvBucket, top, Options{IndexCache: DirIndexCache{Dir: cache}})
		if err != nil {
			t.Fatal(err)
		}
		if round == 1 && st.Requests("get") != 0 {
			t.Fatalf("second Open read %d objects: the index cache was not used", st.Requests("get"))
		}
		v, err := a.Versions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := vReference(ups)
		got, err := v.ListVersions(VersionListParams{MaxKeys: 1000})
		if err != nil || len(got.Entries) != len(want) {
			t.Fatalf("round %d: %d entries %v, want %d", round, len(got.Entries), err, len(want))
		}
		for i, w := range want {
			e := got.Entries[i].Version
			if e.Key != w.key || e.VersionID != w.id || e.DeleteMarker != w.dm {
				t.Fatalf("round %d entry %d: %s@%s, want %s@%s", round, i, e.Key, e.VersionID, w.key, w.id)
			}
			if !w.dm {
				if b := vReadAll(t, a, e.File, 0, e.Size); !bytes.Equal(b, w.data) {
					t.Fatalf("round %d: %s@%s differs from the source", round, w.key, w.id)
				}
			}
		}
		a.Close()
	}
}
