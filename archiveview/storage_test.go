package archiveview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

type stClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// stPartKeys returns, from the manifest alone, the stored object key and
// file offset of each piece of path (one for a whole file, one per part).
func stPartKeys(m *manifest.Manifest, prefix, path string) (keys []string, offs []int64) {
	var parts []manifest.FileEntry
	for _, e := range m.Files {
		if e.Path == path || strings.HasSuffix(e.Path, "/"+path) {
			parts = append(parts, e)
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].PartIndex < parts[j].PartIndex })
	for _, e := range parts {
		keys = append(keys, prefix+"/"+e.S3Key)
		offs = append(offs, e.Offset)
	}
	return keys, offs
}

func stDistinct(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// stOpen opens the archive at manifestKey of dir through the Glacier model
// (fake clock, restores of 30 minutes) with storage classes on.
func stOpen(t *testing.T, dir, manifestKey string, setup func(g *faults.Glacier)) (*Archive, *faults.Glacier, *stClock) {
	t.Helper()
	ck := &stClock{t: time.Date(2033, 3, 3, 0, 0, 0, 0, time.UTC)}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: 30 * time.Minute, Now: ck.Now})
	setup(g)
	a, err := Open(context.Background(), g.Store(backend.NewFileStore(dir)), rvBucket, manifestKey,
		Options{StorageClasses: true, RestoreTTL: time.Minute, clock: ck.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, g, ck
}

// TestStorageSplitFile: a file split across chunks, one of them archived:
// its class is the coldest, a range in the readable chunk is served, a
// range touching the archived one is refused before any fetch, a restore
// goes to the archived chunk only (once, however often asked), and after
// it the whole file reads exact.
func TestStorageSplitFile(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"big": rvRandom(1, 100<<10), "other": rvText(2, 3000), "small": rvText(3, 2000)}
	res := rvPack(t, dir, files, cargopack.Options{Prefix: "pre", UploadID: "u1", FrameSize: 8 << 10, ChunkSize: 64 << 10, SplitSize: 40 << 10})
	key, m := res.ManifestKey, res.Manifest
	bigKeys, bigOffs := stPartKeys(m, "pre", "big")
	if len(bigKeys) != 3 || bigKeys[0] == bigKeys[2] {
		t.Fatalf("test setup: big's parts lie in %q; want its first and last part in different chunks", bigKeys)
	}
	archived := bigKeys[2]
	a, g, ck := stOpen(t, dir, key, func(g *faults.Glacier) { g.SetClass(rvBucket, archived, backend.ClassGlacier, "") })
	ctx := context.Background()

	big := a.mustStat(t, "big")
	if c := a.StorageClass(big); c != "GLACIER" {
		t.Fatalf("class of big: %s", c)
	}
	for _, k := range []string{"other", "small"} {
		f := a.mustStat(t, k)
		ks, _ := stPartKeys(m, "pre", k)
		want, readable := "STANDARD", true
		if ks[0] == archived {
			want, readable = "GLACIER", false
		}
		if c := a.StorageClass(f); c != want {
			t.Fatalf("class of %s: %s, want %s", k, c, want)
		}
		if rc, err := a.Open(ctx, f, 0, f.Size); (err == nil) != readable {
			t.Fatalf("read of %s: %v", k, err)
		} else if err == nil {
			rc.Close()
		}
	}
	// The first part's bytes are served; anything touching the last part is not.
	if b := vReadAll(t, a, big, 10, bigOffs[1]-10); !bytes.Equal(b, files["big"][10:bigOffs[1]]) {
		t.Fatal("range in the readable chunk differs")
	}
	for _, r := range [][2]int64{{0, big.Size}, {bigOffs[2] - 1, 2}, {bigOffs[2], 1}} {
		_, err := a.Open(ctx, big, r[0], r[1])
		var ae *backend.ArchivedError
		if !errors.Is(err, ErrArchived) || !errors.As(err, &ae) || ae.StorageClass != "GLACIER" || !strings.Contains(err.Error(), archived) {
			t.Fatalf("range %v: %v; want ErrArchived naming %s", r, err, archived)
		}
	}
	if n := g.Refusals(); n != 0 {
		t.Fatalf("%d GETs of archived bytes reached the store", n)
	}

	st, err := a.FileStorage(ctx, big)
	if err != nil || st.Class != "GLACIER" || !st.Archived || st.Readable || st.Restore.Requested || len(st.Objects) != len(stDistinct(bigKeys)) {
		t.Fatalf("FileStorage before: %+v %v", st, err)
	}
	rep, err := a.Restore(ctx, big, backend.RestoreRequest{Days: 2, Tier: backend.RetrievalBulk})
	if err != nil || rep.Result != backend.RestoreStarted || len(rep.Objects) != 1 || rep.Objects[0].Key != archived || !rep.Objects[0].Sent {
		t.Fatalf("restore: %+v %v", rep, err)
	}
	if got := g.Started(); !slices.Equal(got, []string{rvBucket + "/" + archived}) {
		t.Fatalf("restores started: %v", got)
	}
	rep, err = a.Restore(ctx, big, backend.RestoreRequest{Days: 2})
	if err != nil || rep.Result != backend.RestoreInProgress || rep.Objects[0].Sent || len(g.Calls()) != 1 {
		t.Fatalf("second restore: %+v %v (%d calls)", rep, err, len(g.Calls()))
	}
	st, _ = a.FileStorage(ctx, big)
	if !st.Restore.Requested || !st.Restore.Ongoing || st.Readable {
		t.Fatalf("during the restore: %+v", st.Restore)
	}
	ck.Add(30 * time.Minute)
	st, err = a.FileStorage(ctx, big)
	if err != nil || !st.Readable || !st.Restore.Requested || st.Restore.Ongoing || !st.Restore.Expiry.Equal(ck.Now().Add(48*time.Hour)) {
		t.Fatalf("after the restore: %+v %v", st, err)
	}
	if b := vReadAll(t, a, big, 0, big.Size); !bytes.Equal(b, files["big"]) {
		t.Fatal("restored file differs")
	}
	rep, err = a.Restore(ctx, big, backend.RestoreRequest{Days: 2})
	if err != nil || rep.Result != backend.RestoreAlreadyRestored || len(g.Calls()) != 1 {
		t.Fatalf("restore of a restored file: %+v %v", rep, err)
	}
	for _, k := range []string{"other", "small"} {
		ks, _ := stPartKeys(m, "pre", k)
		rep, err := a.Restore(ctx, a.mustStat(t, k), backend.RestoreRequest{Days: 1})
		if ks[0] == archived {
			if err != nil || rep.Result != backend.RestoreAlreadyRestored {
				t.Fatalf("restore of %s, in the restored chunk: %+v %v", k, rep, err)
			}
		} else if !errors.Is(err, ErrNotArchived) {
			t.Fatalf("restore of %s, a STANDARD file: %v", k, err)
		}
	}
	if len(g.Calls()) != 1 {
		t.Fatalf("%d RestoreObject calls, want 1", len(g.Calls()))
	}
}

// TestStorageChainAndVersions: in a chain whose base upload is in Deep
// Archive, an unchanged file lives in the base's chunk (its class, its
// restore); the newer upload's files read as usual; Expedited is refused
// before anything is sent; an older version served through its version id
// follows the same rules and shares the restore of the chunk it lives in.
func TestStorageChainAndVersions(t *testing.T) {
	dir := t.TempDir()
	day := func(d int) time.Time { return time.Date(2025, 6, d, 12, 0, 0, 0, time.UTC) }
	ups := []vUpload{
		{id: "u1", created: day(1), opt: cargopack.Options{FrameSize: 16 << 10},
			files: map[string][]byte{"a": rvText(1, 5000), "b": rvText(2, 4000)}},
		{id: "u2", created: day(2), opt: cargopack.Options{FrameSize: 16 << 10},
			files: map[string][]byte{"a": rvText(11, 6000), "c": rvText(12, 300)}},
	}
	key := vPackChain(t, dir, ups)
	a, g, ck := stOpen(t, dir, key, func(g *faults.Glacier) {
		g.SetPrefixClass(rvBucket, "pre/uploads/u1/", backend.ClassDeepArchive, "")
		g.SetClass(rvBucket, "pre/uploads/u1/manifest.json.gz", backend.ClassStandard, "") // manifests stay readable
	})
	ctx := context.Background()
	b, c, aNew := a.mustStat(t, "b"), a.mustStat(t, "c"), a.mustStat(t, "a")
	if a.StorageClass(b) != "DEEP_ARCHIVE" || a.StorageClass(c) != "STANDARD" || a.StorageClass(aNew) != "STANDARD" {
		t.Fatalf("classes: b %s, c %s, a %s", a.StorageClass(b), a.StorageClass(c), a.StorageClass(aNew))
	}
	if _, err := a.Open(ctx, b, 0, b.Size); !errors.Is(err, ErrArchived) {
		t.Fatalf("read of b: %v", err)
	}
	if got := vReadAll(t, a, c, 0, c.Size); !bytes.Equal(got, ups[1].files["c"]) {
		t.Fatal("c differs")
	}
	if _, err := a.Restore(ctx, b, backend.RestoreRequest{Days: 1, Tier: backend.RetrievalExpedited}); !errors.Is(err, backend.ErrInvalidRestore) || len(g.Calls()) != 0 {
		t.Fatalf("Expedited restore of Deep Archive: %v (%d calls)", err, len(g.Calls()))
	}
	if _, err := a.Restore(ctx, c, backend.RestoreRequest{Days: 1}); !errors.Is(err, ErrNotArchived) || len(g.Calls()) != 0 {
		t.Fatalf("restore of a STANDARD file: %v", err)
	}
	rep, err := a.Restore(ctx, b, backend.RestoreRequest{Days: 1, Tier: backend.RetrievalStandard})
	if err != nil || rep.Result != backend.RestoreStarted || len(g.Started()) != 1 || !strings.HasPrefix(g.Started()[0], rvBucket+"/pre/uploads/u1/") {
		t.Fatalf("restore of b: %+v %v; started %v", rep, err, g.Started())
	}

	// The older version of "a" lives in u1's chunk too.
	vs, err := a.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old, ok := vs.StatVersion("a", "u1")
	if !ok || old.IsLatest {
		t.Fatalf("version u1 of a: %+v %v", old, ok)
	}
	if cl := a.StorageClass(old.File); cl != "DEEP_ARCHIVE" {
		t.Fatalf("class of the old version: %s", cl)
	}
	if _, err := a.Open(ctx, old.File, 0, old.Size); !errors.Is(err, ErrArchived) {
		t.Fatalf("read of the old version: %v", err)
	}
	rep, err = a.Restore(ctx, old.File, backend.RestoreRequest{Days: 1})
	if err != nil || rep.Result != backend.RestoreInProgress || len(g.Calls()) != 1 {
		t.Fatalf("restore of the old version (same chunk as b): %+v %v (%d calls)", rep, err, len(g.Calls()))
	}
	ck.Add(31 * time.Minute)
	if got := vReadAll(t, a, old.File, 0, old.Size); !bytes.Equal(got, ups[0].files["a"]) {
		t.Fatal("old version differs after the restore")
	}
	if got := vReadAll(t, a, b, 0, b.Size); !bytes.Equal(got, ups[0].files["b"]) {
		t.Fatal("b differs after the restore")
	}
	objs, total, err := a.StorageObjects(ctx, []File{b, c})
	if err != nil || len(objs) != 2 || total != a.Info().CompressedBytes || objs[0].Size <= 0 {
		t.Fatalf("StorageObjects: %+v %d %v", objs, total, err)
	}
}

// TestStorageSummarize is the aggregation table of FileStorage.
func TestStorageSummarize(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e1, e2 := now.Add(time.Hour), now.Add(2*time.Hour)
	obj := func(class, tier string, r backend.RestoreStatus) StorageObject {
		so := StorageObject{}
		so.Class, so.Tier, so.Restore = class, tier, r
		return so
	}
	std := obj("STANDARD", "", backend.RestoreStatus{})
	done1 := obj("GLACIER", "", backend.RestoreStatus{Requested: true, Expiry: e2})
	done2 := obj("DEEP_ARCHIVE", "", backend.RestoreStatus{Requested: true, Expiry: e1})
	ongoing := obj("GLACIER", "", backend.RestoreStatus{Requested: true, Ongoing: true})
	none := obj("GLACIER", "", backend.RestoreStatus{})
	itArch := obj("INTELLIGENT_TIERING", "ARCHIVE_ACCESS", backend.RestoreStatus{})
	itFreq := obj("INTELLIGENT_TIERING", "", backend.RestoreStatus{})
	tests := []struct {
		name     string
		objs     []StorageObject
		class    string
		tier     string
		readable bool
		restore  backend.RestoreStatus
	}{
		{"none", nil, "STANDARD", "", true, backend.RestoreStatus{}},
		{"standard", []StorageObject{std}, "STANDARD", "", true, backend.RestoreStatus{}},
		{"unknown class", []StorageObject{obj("", "", backend.RestoreStatus{})}, "STANDARD", "", true, backend.RestoreStatus{}},
		{"all restored: earliest expiry", []StorageObject{std, done1, done2}, "DEEP_ARCHIVE", "", true, backend.RestoreStatus{Requested: true, Expiry: e1}},
		{"one ongoing", []StorageObject{done1, ongoing}, "GLACIER", "", false, backend.RestoreStatus{Requested: true, Ongoing: true}},
		{"one never asked", []StorageObject{done1, none}, "GLACIER", "", false, backend.RestoreStatus{}},
		{"never asked beats ongoing: a restore is needed", []StorageObject{none, ongoing}, "GLACIER", "", false, backend.RestoreStatus{}},
		{"expired beats ongoing", []StorageObject{ongoing, obj("GLACIER", "", backend.RestoreStatus{Requested: true, Expiry: now})}, "GLACIER", "", false, backend.RestoreStatus{}},
		{"expired copy", []StorageObject{obj("GLACIER", "", backend.RestoreStatus{Requested: true, Expiry: now})}, "GLACIER", "", false, backend.RestoreStatus{}},
		{"IT archive tier", []StorageObject{itFreq, itArch}, "INTELLIGENT_TIERING", "ARCHIVE_ACCESS", false, backend.RestoreStatus{}},
		{"IT frequent", []StorageObject{std, itFreq}, "INTELLIGENT_TIERING", "", true, backend.RestoreStatus{}},
		{"IR is readable", []StorageObject{obj("GLACIER_IR", "", backend.RestoreStatus{})}, "GLACIER_IR", "", true, backend.RestoreStatus{}},
	}
	for _, tc := range tests {
		got := summarize(tc.objs, now)
		if got.Class != tc.class || got.Tier != tc.tier || got.Readable != tc.readable || got.Restore != tc.restore {
			t.Errorf("%s: %+v, want class %s/%s readable %v restore %+v", tc.name, got, tc.class, tc.tier, tc.readable, tc.restore)
		}
	}
}

// TestStoragePrepare: PrepareStorage HEADs each archived object of a page
// of files once (in parallel), after which FileStorage makes no request;
// STANDARD objects are never HEADed.
func TestStoragePrepare(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{}
	for i := range 40 {
		files[fmt.Sprintf("f%02d", i)] = rvText(uint64(i), 100+i)
	}
	res := rvPack(t, dir, files, cargopack.Options{Prefix: "pre", UploadID: "u1", Direct: true})
	ck := &stClock{t: time.Date(2033, 3, 3, 0, 0, 0, 0, time.UTC)}
	g := faults.NewGlacier(faults.GlacierConfig{Now: ck.Now})
	for i := range 30 { // f00..f29 archived, f30..f39 STANDARD
		g.SetClass(rvBucket, fmt.Sprintf("pre/uploads/u1/files/f%02d", i), backend.ClassGlacier, "")
	}
	faulty := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Latency: 20 * time.Millisecond})
	a, err := Open(context.Background(), g.Store(faulty), rvBucket, res.ManifestKey, Options{StorageClasses: true, clock: ck.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var fs []File
	for i := range 40 {
		fs = append(fs, a.mustStat(t, fmt.Sprintf("f%02d", i)))
	}
	faulty.Reset()
	t0 := time.Now()
	a.PrepareStorage(context.Background(), fs)
	if n := faulty.Requests("stat"); n != 30 {
		t.Fatalf("PrepareStorage made %d HEADs, want 30 (one per archived object)", n)
	}
	if d := time.Since(t0); d > 400*time.Millisecond {
		t.Errorf("PrepareStorage took %v for 30 HEADs of 20 ms: not parallel", d)
	}
	for i, f := range fs {
		st, err := a.FileStorage(context.Background(), f)
		if err != nil || (i < 30) != st.Archived {
			t.Fatalf("%s: %+v %v", f.Key, st, err)
		}
	}
	if n := faulty.Requests(""); n != 30 {
		t.Fatalf("%d requests in all, want the 30 HEADs of PrepareStorage", n)
	}
}
