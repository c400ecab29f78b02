package archiveview

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// pi* helpers: archives written by cargopack (rvPack) into a FileStore root,
// read through faults.Faulty; indexes written by WriteIndex and loaded by
// OpenIndex or Open's cache, compared with the source bytes.

// piShape is one archive shape of the round-trip table.
type piShape struct {
	name  string
	files map[string][]byte
	opt   cargopack.Options
	chain func(t *testing.T, dir string) (key string, want map[string][]byte) // builds a chain instead
	legac bool                                                                // has legacy (walked) offsets
}

func piShapes() []piShape {
	plainAll := func(string) bool { return true }
	dupFiles := map[string][]byte{"x/one": rvText(9, 5000), "x/two": rvText(9, 5000), "y/three": rvText(9, 5000), "other": rvRandom(1, 10)}
	mime := func(rel string) map[string]string {
		if strings.HasSuffix(rel, ".txt") {
			return map[string]string{"magika_mime": "text/plain"}
		}
		return nil
	}
	return []piShape{
		{name: "framed", opt: cargopack.Options{FrameSize: 16 << 10, ChunkSize: 100 << 10}},
		{name: "framed-giant", opt: cargopack.Options{FrameSize: 16 << 10, NoSubFrames: true}},
		{name: "stream", opt: cargopack.Options{}},
		{name: "plain-tar", opt: cargopack.Options{PlainTar: plainAll}},
		{name: "direct", opt: cargopack.Options{Direct: true}},
		{name: "mixed-direct", opt: cargopack.Options{FrameSize: 16 << 10, DirectFor: func(rel string) bool { return strings.HasPrefix(rel, "dir/") }}},
		{name: "split", opt: cargopack.Options{FrameSize: 32 << 10, SplitSize: 64 << 10}},
		{name: "split-plain-pre492", opt: cargopack.Options{SplitSize: 50000, PlainTar: plainAll, Pre492: true}, legac: true},
		{name: "pre492-stream", opt: cargopack.Options{Pre492: true}, legac: true},
		{name: "v2.0-legacy", opt: cargopack.Options{Version: "2.0"}, legac: true},
		{name: "v1.0", opt: cargopack.Options{Version: "1.0"}, legac: true},
		{name: "no-checksums", opt: cargopack.Options{FrameSize: 16 << 10, NoChecksums: true}},
		{name: "content-hash-mime", opt: cargopack.Options{ContentHash: true, FrameSize: 1 << 20, Metadata: mime}},
		{name: "relative-paths", opt: cargopack.Options{RelativePaths: true, FrameSize: 1 << 20}},
		{name: "dedup", files: dupFiles, opt: cargopack.Options{Dedup: true, FrameSize: 16 << 10}},
		{name: "dedup-direct", files: dupFiles, opt: cargopack.Options{Dedup: true, Direct: true}},
		{name: "dedup-stream-legacy", files: dupFiles, opt: cargopack.Options{Dedup: true, Version: "2.0"}, legac: true},
		{name: "chain", chain: piChain},
	}
}

// piChain writes a base upload and a delta that changes a.txt, adds n.txt
// and deletes z/deep/er/d.csv; it returns the delta's key and the tree.
func piChain(t *testing.T, dir string) (string, map[string][]byte) {
	base := rvSources()
	rvPack(t, dir, base, cargopack.Options{Prefix: "c", UploadID: "20250304-00000001", FrameSize: 16 << 10})
	delta := map[string][]byte{"a.txt": rvText(77, 1234), "n.txt": rvRandom(78, 999)}
	res := rvPack(t, dir, delta, cargopack.Options{Prefix: "c", UploadID: "20250305-00000002", FrameSize: 16 << 10,
		PreviousManifestID: "20250304-00000001", SyncType: "incremental", DeletedPaths: []string{"z/deep/er/d.csv"}})
	want := maps.Clone(base)
	maps.Copy(want, delta)
	delete(want, "z/deep/er/d.csv")
	return res.ManifestKey, want
}

// piSetup packs one shape and returns the store root, manifest key and tree.
func piSetup(t *testing.T, sh piShape) (string, string, map[string][]byte) {
	dir := t.TempDir()
	if sh.chain != nil {
		k, want := sh.chain(t, dir)
		return dir, k, want
	}
	src := sh.files
	if src == nil {
		src = rvSources()
	}
	res := rvPack(t, dir, src, sh.opt)
	return dir, res.ManifestKey, src
}

// piReadAll reads every key of want whole (and one random range) from a
// and compares the bytes with the source.
func piReadAll(t *testing.T, a *Archive, want map[string][]byte, r *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	for _, key := range slices.Sorted(maps.Keys(want)) {
		src := want[key]
		f, ok := a.Stat(key)
		if !ok {
			t.Errorf("Stat(%q): missing", key)
			continue
		}
		got := hoRead(ctx, a, f, 0, f.Size, r.IntN(2) == 0)
		if got.err != nil || !bytes.Equal(got.got, src) {
			t.Errorf("%s: whole read: err %v, bytes equal %v (%d of %d)", key, got.err, bytes.Equal(got.got, src), len(got.got), len(src))
		}
		if f.Size > 0 {
			off := r.Int64N(f.Size)
			n := r.Int64N(f.Size - off + 1)
			got := hoRead(ctx, a, f, off, n, r.IntN(2) == 0)
			if got.err != nil || !bytes.Equal(got.got, src[off:off+n]) {
				t.Errorf("%s: range %d+%d: err %v, bytes differ", key, off, n, got.err)
			}
		}
	}
}

// piSameTree checks that b shows exactly what a shows: info, listing,
// every Stat, the chunk table and the index columns (learned offsets
// aside, which the caller compares).
func piSameTree(t *testing.T, a, b *Archive) {
	t.Helper()
	ia, ib := a.Info(), b.Info()
	ia.Name, ib.Name = "", ""
	// How the index is held, and its size (provenance, verified units),
	// may differ; the tree may not.
	ia.IndexInPlace, ib.IndexInPlace = false, false
	ia.IndexBytes, ib.IndexBytes = 0, 0
	if !reflect.DeepEqual(ia, ib) {
		t.Errorf("Info differs:\n open  %+v\n index %+v", ia, ib)
	}
	if !a.Created().Equal(b.Created()) || a.Region() != b.Region() || a.UploadID() != b.UploadID() {
		t.Errorf("metadata differs: %v %q %q vs %v %q %q", a.Created(), a.Region(), a.UploadID(), b.Created(), b.Region(), b.UploadID())
	}
	la, lb := hoAllKeys(a), hoAllKeys(b)
	if !reflect.DeepEqual(la, lb) {
		t.Errorf("listings differ:\n open  %+v\n index %+v", la, lb)
	}
	for _, p := range []ListParams{{Delimiter: "/", MaxKeys: 1000}, {Prefix: "dir/", Delimiter: "/", MaxKeys: 2}} {
		if ra, rb := a.List(p), b.List(p); !reflect.DeepEqual(ra, rb) {
			t.Errorf("List(%+v) differs: %+v vs %+v", p, ra, rb)
		}
	}
	for _, f := range la {
		fb, ok := b.Stat(f.Key)
		if !ok || fb != f {
			t.Errorf("Stat(%q) = %+v, %v; want %+v", f.Key, fb, ok, f)
		}
	}
	if len(a.tree.Chunks) != len(b.tree.Chunks) {
		t.Fatalf("%d chunks, want %d", len(b.tree.Chunks), len(a.tree.Chunks))
	}
	for i := range a.tree.Chunks {
		ca, cb := &a.tree.Chunks[i], &b.tree.Chunks[i]
		if ca.Key != cb.Key || ca.Kind != cb.Kind || ca.Size != cb.Size || ca.Sum != cb.Sum || ca.HasSum != cb.HasSum ||
			!(len(ca.Frames) == 0 && len(cb.Frames) == 0 || reflect.DeepEqual(ca.Frames, cb.Frames)) {
			t.Errorf("chunk %d differs: %s %s %d vs %s %s %d", i, ca.Key, ca.Kind, ca.Size, cb.Key, cb.Kind, cb.Size)
		}
	}
}

// piSameIndex checks that two indexes hold the same columns (whether in
// memory or read in place from a file) and that the chunk tables agree,
// stream bounds included.
func piSameIndex(t *testing.T, a, b *Archive) {
	t.Helper()
	x, y := &a.tree.Idx, &b.tree.Idx
	eq := func(name string, ok bool) {
		if !ok {
			t.Errorf("index column %s differs", name)
		}
	}
	eq("names", x.Names == y.Names)
	eq("ends", slices.Equal(x.Ends, y.Ends))
	eq("size", slices.Equal(x.Size, y.Size))
	eq("msec", slices.Equal(x.Msec, y.Msec))
	eq("mnsec", slices.Equal(x.Mnsec, y.Mnsec))
	eq("sum", slices.Equal(x.Sum, y.Sum))
	eq("flags", slices.Equal(x.Flags, y.Flags))
	eq("chunk", slices.Equal(x.Chunk, y.Chunk))
	eq("off", slices.Equal(x.Off, y.Off))
	eq("root", slices.Equal(x.Root, y.Root))
	eq("roots", slices.Equal(x.Roots, y.Roots))
	eq("exts", slices.Equal(x.Exts, y.Exts) && x.ExtNames == y.ExtNames)
	eq("md5", slices.Equal(x.MD5, y.MD5) && (x.MD5 == nil) == (y.MD5 == nil))
	eq("ctype", slices.Equal(x.Ctype, y.Ctype) && slices.Equal(x.Ctypes, y.Ctypes) && (x.Ctype == nil) == (y.Ctype == nil))
	eq("link", slices.Equal(x.Link, y.Link) && (x.Link == nil) == (y.Link == nil))
	eq("tombs", x.Tombs.Names == y.Tombs.Names && slices.Equal(x.Tombs.Ends, y.Tombs.Ends) && slices.Equal(x.Tombs.Link, y.Tombs.Link))
	eq("totals", x.Frames == y.Frames && x.Compressed == y.Compressed && x.Uncompressed == y.Uncompressed)
	eq("ids", slices.Equal(x.IDs, y.IDs))
	for i := range a.tree.Chunks {
		if i < len(b.tree.Chunks) && a.tree.Chunks[i].MaxTar != b.tree.Chunks[i].MaxTar {
			t.Errorf("chunk %d: stream bound %d, want %d", i, b.tree.Chunks[i].MaxTar, a.tree.Chunks[i].MaxTar)
		}
	}
}

// piIndexBytes writes a's index.
func piIndexBytes(t testing.TB, a *Archive) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := a.WriteIndex(&buf); err != nil {
		t.Fatalf("WriteIndex: %v", err)
	}
	return buf.Bytes()
}

func piOpenIndex(t testing.TB, store backend.Store, data []byte) *Archive {
	t.Helper()
	b, err := OpenIndex(context.Background(), store, bytes.NewReader(data), Options{Name: "loaded"})
	if err != nil {
		t.Fatalf("OpenIndex: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestIndexRoundTrip: every archive shape, Open → WriteIndex → OpenIndex
// gives the same tree (index columns identical, chunks identical) and
// byte-exact reads; after reading legacy files, the offsets the tar walk
// learned are recorded, and the loaded index reads them without a walk.
func TestIndexRoundTrip(t *testing.T) {
	for _, sh := range piShapes() {
		t.Run(sh.name, func(t *testing.T) {
			dir, key, want := piSetup(t, sh)
			r := rand.New(rand.NewPCG(uint64(len(sh.name)), 1))
			fa := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
			a, err := Open(context.Background(), fa, rvBucket, key, Options{Name: "served"})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer a.Close()

			// Before any read: the index is exactly Open's.
			data := piIndexBytes(t, a)
			if n := a.Info().IndexBytes; n != int64(len(data)) {
				t.Errorf("Info().IndexBytes = %d, WriteIndex wrote %d", n, len(data))
			}
			fb := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
			b := piOpenIndex(t, fb, data)
			if fb.Requests("") != 0 {
				t.Errorf("OpenIndex made %d store requests", fb.Requests(""))
			}
			piSameTree(t, a, b)
			piSameIndex(t, a, b)
			if b.Name() != "loaded" {
				t.Errorf("Name() = %q", b.Name())
			}
			if again := piIndexBytes(t, b); !bytes.Equal(again, data) {
				t.Errorf("rewriting a loaded index changes it (%d vs %d bytes)", len(again), len(data))
			}
			piReadAll(t, b, want, r)

			// After reading through a: learned offsets are recorded.
			piReadAll(t, a, want, r)
			learned := a.LearnedOffsets()
			if sh.legac != (learned > 0) {
				t.Errorf("LearnedOffsets() = %d, legacy shape %v", learned, sh.legac)
			}
			data2 := piIndexBytes(t, a)
			// Counted, not encoded: the size still agrees once reads
			// have added verified units to the meta section.
			if n := a.Info().IndexBytes; n != int64(len(data2)) {
				t.Errorf("after reads: Info().IndexBytes = %d, WriteIndex wrote %d", n, len(data2))
			}
			fc := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
			c := piOpenIndex(t, fc, data2)
			piSameTree(t, a, c)
			if got := c.LearnedOffsets(); got != 0 {
				t.Errorf("loaded index still has %d unknown offsets that a walk found", got)
			}
			piReadAll(t, c, want, r)
			walks := c.set.TarWalks()
			if walks != 0 {
				t.Errorf("%d chunk(s) walked although the index records every offset", walks)
			}
			if sh.legac {
				// Reads with learned offsets cost no more requests than the
				// first reads through Open did.
				fd := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
				d := piOpenIndex(t, fd, data)
				piReadAll(t, d, want, rand.New(rand.NewPCG(5, 5)))
				fe := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
				e := piOpenIndex(t, fe, data2)
				piReadAll(t, e, want, rand.New(rand.NewPCG(5, 5)))
				t.Logf("legacy reads: %d requests / %d bytes walking, %d requests / %d bytes with learned offsets",
					fd.Requests(""), fd.BytesReturned(), fe.Requests(""), fe.BytesReturned())
				if fe.BytesReturned() > fd.BytesReturned() {
					t.Errorf("learned offsets read more bytes (%d) than walking (%d)", fe.BytesReturned(), fd.BytesReturned())
				}
			}
		})
	}
}

// TestIndexLearnedOffsetVerified: a recorded offset pointing at another
// member (an index that lies, with a valid checksum) is refused by the tar
// header check; no wrong byte is served.
func TestIndexLearnedOffsetVerified(t *testing.T) {
	dir, key, want := piSetup(t, piShape{opt: cargopack.Options{PlainTar: func(string) bool { return true }, Pre492: true}})
	a, err := Open(context.Background(), backend.NewFileStore(dir), rvBucket, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	piReadAll(t, a, want, rand.New(rand.NewPCG(1, 2)))
	b := piOpenIndex(t, backend.NewFileStore(dir), piIndexBytes(t, a))
	fa, _ := b.Stat("a.txt")
	fz, _ := b.Stat("dir/b.txt")
	if b.tree.Idx.Off[index.Ordinal(fa)] < 0 || b.tree.Idx.Off[index.Ordinal(fz)] < 0 {
		t.Fatalf("offsets not learned: %d %d", b.tree.Idx.Off[index.Ordinal(fa)], b.tree.Idx.Off[index.Ordinal(fz)])
	}
	b.tree.Idx.Off[index.Ordinal(fa)] = b.tree.Idx.Off[index.Ordinal(fz)] // a.txt now claims dir/b.txt's bytes
	c := piOpenIndex(t, backend.NewFileStore(dir), piIndexBytes(t, b))
	f, _ := c.Stat("a.txt")
	for _, wt := range []bool{false, true} {
		got := hoRead(context.Background(), c, f, 0, 10, wt)
		if !errors.Is(got.err, ErrWrongMember) {
			t.Errorf("read via a lying offset: err %v, got %q", got.err, got.got)
		}
		if len(got.got) > 0 {
			t.Errorf("served %d bytes from a lying offset", len(got.got))
		}
	}
}

// piCountingStore returns a counting FileStore over dir.
func piCountingStore(dir string) *faults.Faulty {
	return faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
}

// piCachedOpen opens key with an index cache in cacheDir over a fresh
// counting store; it returns the archive and the store.
func piCachedOpen(t *testing.T, dir, cacheDir, key string) (*Archive, *faults.Faulty) {
	t.Helper()
	f := piCountingStore(dir)
	a, err := Open(context.Background(), f, rvBucket, key, Options{Name: "cached", IndexCache: DirIndexCache{Dir: cacheDir}})
	if err != nil {
		t.Fatalf("Open with IndexCacheDir: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a, f
}

func TestIndexCacheOpen(t *testing.T) {
	for _, sh := range []piShape{{name: "framed", opt: cargopack.Options{FrameSize: 16 << 10}}, {name: "chain", chain: piChain}} {
		t.Run(sh.name, func(t *testing.T) {
			dir, key, want := piSetup(t, sh)
			cache := filepath.Join(t.TempDir(), "idx")
			r := rand.New(rand.NewPCG(3, 4))
			ref, err := Open(context.Background(), backend.NewFileStore(dir), rvBucket, key, Options{Name: "cached"})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()

			a1, f1 := piCachedOpen(t, dir, cache, key)
			nManifests := int64(len(ref.tree.Chain))
			if f1.Requests("get") != nManifests || f1.Requests("stat") != 0 {
				t.Errorf("first Open: %d GETs %d stats, want %d GETs (one per manifest) and no stat", f1.Requests("get"), f1.Requests("stat"), nManifests)
			}
			piSameTree(t, ref, a1)
			ents, _ := os.ReadDir(cache)
			if len(ents) != 1 || !strings.HasSuffix(ents[0].Name(), indexCacheSuffix) {
				t.Fatalf("cache dir holds %v, want one %s file", ents, indexCacheSuffix)
			}

			a2, f2 := piCachedOpen(t, dir, cache, key)
			if f2.Requests("get") != 0 || f2.Requests("") != f2.Requests("stat") || f2.Requests("stat") < nManifests {
				t.Errorf("second Open: %d GETs, %d stats, %d requests in all; want 0 GETs and only stats (>= %d)",
					f2.Requests("get"), f2.Requests("stat"), f2.Requests(""), nManifests)
			}
			piSameTree(t, ref, a2)
			piSameIndex(t, ref, a2)
			if !a2.tree.Idx.InPlace() || !a1.tree.Idx.InPlace() {
				t.Errorf("an archive opened with an index cache is not served from the mapped file")
			}
			piReadAll(t, a2, want, r)

			// A rewritten manifest (any manifest of the chain) invalidates.
			for i, link := range a2.prov.Sources {
				if link.Absent {
					continue
				}
				p := filepath.Join(dir, rvBucket, filepath.FromSlash(link.Key))
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond)
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
				a3, f3 := piCachedOpen(t, dir, cache, key)
				if f3.Requests("get") != nManifests {
					t.Errorf("manifest %d (%s) rewritten: %d GETs, want %d (cache invalidated)", i, link.Key, f3.Requests("get"), nManifests)
				}
				piSameTree(t, ref, a3)
				_, f4 := piCachedOpen(t, dir, cache, key)
				if f4.Requests("get") != 0 {
					t.Errorf("after rebuilding: %d GETs, want 0", f4.Requests("get"))
				}
			}
		})
	}
}

// TestIndexCacheChangedContent: a manifest replaced by different content
// (another upload under the same key) is served as the new tree.
func TestIndexCacheChangedContent(t *testing.T) {
	dir := t.TempDir()
	src := rvSources()
	opt := cargopack.Options{UploadID: "20250304-0000000a", FrameSize: 16 << 10}
	res := rvPack(t, dir, src, opt)
	cache := t.TempDir()
	a1, _ := piCachedOpen(t, dir, cache, res.ManifestKey)
	if a1.Files() != len(src) {
		t.Fatalf("%d files", a1.Files())
	}
	src2 := maps.Clone(src)
	src2["added/file.txt"] = rvText(99, 4321)
	time.Sleep(10 * time.Millisecond)
	res2 := rvPack(t, dir, src2, opt)
	if res2.ManifestKey != res.ManifestKey {
		t.Fatalf("keys differ: %s %s", res.ManifestKey, res2.ManifestKey)
	}
	a2, f2 := piCachedOpen(t, dir, cache, res.ManifestKey)
	if f2.Requests("get") == 0 || a2.Files() != len(src2) {
		t.Fatalf("after the rewrite: %d GETs, %d files; want a rebuild with %d files", f2.Requests("get"), a2.Files(), len(src2))
	}
	piReadAll(t, a2, src2, rand.New(rand.NewPCG(1, 1)))
}

// piReseal recomputes the trailer (tree hash) of an index body.
func piReseal(body []byte) []byte {
	sum := index.TreeHash(body)
	return append(slices.Clip(body), sum[:]...)
}

// TestIndexCacheCorrupt: a damaged cache file is refused (the error names
// the file), Open falls back to the manifest and replaces the file.
func TestIndexCacheCorrupt(t *testing.T) {
	dir, key, want := piSetup(t, piShape{opt: cargopack.Options{FrameSize: 16 << 10, Dedup: true, SplitSize: 60000}})
	cache := t.TempDir()
	piCachedOpen(t, dir, cache, key)
	path := filepath.Join(cache, indexName(rvBucket, key, ""))
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := good[:len(good)-index.TrailerBytes]
	tests := []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"flip-byte-middle", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }},
		{"flip-byte-trailer", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-100] }},
		{"truncated-header", func(b []byte) []byte { return b[:20] }},
		{"empty", func(b []byte) []byte { return nil }},
		{"trailing-garbage", func(b []byte) []byte { return append(b, 0) }},
		{"wrong-magic", func(b []byte) []byte { copy(b, "WHARFIDY"); return b }},
		{"wrong-version", func(b []byte) []byte {
			nb := slices.Clone(body)
			binary.LittleEndian.PutUint32(nb[8:], index.FormatVersion+1)
			return piReseal(nb)
		}},
		{"resealed-garbage-tail", func(b []byte) []byte { return piReseal(append(slices.Clone(body), 1, 2, 3)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := tc.damage(slices.Clone(good))
			_, perr := openIndexBytes(nil, bad, path, Options{})
			if !errors.Is(perr, ErrBadIndex) || !strings.Contains(perr.Error(), path) {
				t.Errorf("load error %v: want ErrBadIndex naming %s", perr, path)
			}
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			a, f := piCachedOpen(t, dir, cache, key)
			if f.Requests("get") == 0 {
				t.Errorf("a damaged cache file was used (no manifest GET)")
			}
			piReadAll(t, a, want, rand.New(rand.NewPCG(2, 2)))
			now, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(now, good) {
				t.Errorf("the damaged cache file was not replaced by a fresh one (err %v)", err)
			}
			_, f2 := piCachedOpen(t, dir, cache, key)
			if f2.Requests("get") != 0 {
				t.Errorf("after replacement: %d GETs", f2.Requests("get"))
			}
		})
	}
}

// piHeaderCountOffsets are the byte offsets of the header counts.
const (
	piOffFiles    = 16
	piOffNames    = 24
	piOffExts     = 32
	piOffExtNames = 40
	piOffTombs    = 48
	piOffCols     = 64
	piOffMeta     = 72
)

// piCursor walks an index file's meta section as the format lays it out
// (the test's own reader, independent of the decoder's).
type piCursor struct {
	b   []byte
	off int
	err error
}

func (c *piCursor) take(n int) []byte {
	if c.err != nil || n > len(c.b)-c.off {
		c.err = fmt.Errorf("meta section truncated at %d", c.off)
		return nil
	}
	c.off += n
	return c.b[c.off-n : c.off]
}

func (c *piCursor) u32() uint32 {
	if b := c.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (c *piCursor) str() { c.take(int(c.u32())) }

// piMetaCounts returns the offsets (in the file) of the meta section's
// sources count and chunks count, found by walking the meta section as
// the format lays it out.
func piMetaCounts(t *testing.T, data []byte) (sources, chunks int) {
	t.Helper()
	c := &piCursor{b: data, off: index.HeaderBytes}
	c.str()
	c.str()
	c.take(8 * 8)
	sources = c.off
	for n := c.u32(); n > 0; n-- {
		c.str()
		c.str()
		c.take(8 + 8 + 32 + 1)
	}
	c.str()
	c.str()
	c.take(8 + 4 + 4)
	c.str()
	for k := 0; k < 3; k++ {
		for n := c.u32(); n > 0; n-- {
			c.str()
		}
	}
	c.take(3 * 8)
	if c.err != nil {
		t.Fatal(c.err)
	}
	return sources, c.off
}

// TestReadIndexHostile: files with a valid trailer whose content lies are
// refused with ErrBadIndex, and huge counts fail before allocating.
func TestReadIndexHostile(t *testing.T) {
	dir, key, _ := piSetup(t, piShape{opt: cargopack.Options{FrameSize: 16 << 10, Dedup: true, SplitSize: 60000,
		DirectFor: func(rel string) bool { return rel == "a.txt" }}, files: hoDupFiles()})
	a, err := Open(context.Background(), backend.NewFileStore(dir), rvBucket, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	good := piIndexBytes(t, a)
	body := good[:len(good)-index.TrailerBytes]
	if _, err := openIndexBytes(nil, good, "good", Options{}); err != nil {
		t.Fatalf("good index refused: %v", err)
	}
	metaSources, metaChunks := piMetaCounts(t, good)
	header := func(off int, v uint64, width int) func(*Archive) []byte {
		return func(*Archive) []byte {
			nb := slices.Clone(body)
			if width == 4 {
				binary.LittleEndian.PutUint32(nb[off:], uint32(v))
			} else {
				binary.LittleEndian.PutUint64(nb[off:], v)
			}
			return piReseal(nb)
		}
	}
	// mutate loads a fresh copy, changes it and writes it (valid trailer).
	mutate := func(f func(b *Archive)) func(*Archive) []byte {
		return func(*Archive) []byte {
			// A copy: the loaded columns are views of the bytes.
			b, err := openIndexBytes(nil, slices.Clone(good), "good", Options{})
			if err != nil {
				t.Fatal(err)
			}
			f(b)
			var buf bytes.Buffer
			if err := b.WriteIndex(&buf); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
	}
	// raw changes the body's bytes, knowing the layout, and reseals.
	raw := func(f func(nb []byte, off, size [index.NumSections]uint64)) func(*Archive) []byte {
		return func(*Archive) []byte {
			nb := slices.Clone(body)
			h := index.ParseHeader(nb)
			off, size, _, _ := h.Layout()
			f(nb, off, size)
			return piReseal(nb)
		}
	}
	multi := func(b *Archive) int {
		for i, fl := range b.tree.Idx.Flags {
			if fl&index.FlagMulti != 0 {
				return i
			}
		}
		t.Fatal("no multi-extent file")
		return 0
	}
	framed := func(b *Archive) *chunkio.Chunk {
		for i := range b.tree.Chunks {
			if b.tree.Chunks[i].Kind == chunkio.FramedZstd && len(b.tree.Chunks[i].Frames) > 1 {
				return &b.tree.Chunks[i]
			}
		}
		t.Fatal("no framed chunk")
		return nil
	}
	tests := []struct {
		name  string
		make  func(*Archive) []byte
		alloc bool // must fail without allocating much
	}{
		{"files-2^31", header(piOffFiles, 1<<31-1, 8), true},
		{"files-2^63", header(piOffFiles, 1<<63, 8), true},
		{"names-2^60", header(piOffNames, 1<<60, 8), true},
		{"names-2^32-1", header(piOffNames, 1<<32-1, 8), true},
		{"extents-2^31", header(piOffExts, 1<<31-1, 8), true},
		{"extent-names-2^40", header(piOffExtNames, 1<<40, 8), true},
		{"tombstones-2^31", header(piOffTombs, 1<<31-1, 8), true},
		{"meta-2^40", header(piOffMeta, 1<<40, 8), true},
		{"meta-one-more", header(piOffMeta, binary.LittleEndian.Uint64(good[piOffMeta:])+1, 8), true},
		{"columns-unknown", header(piOffCols, 1<<5, 8), true},
		{"columns-md5-added", header(piOffCols, binary.LittleEndian.Uint64(good[piOffCols:])|index.ColMD5, 8), true},
		{"chunks-2^31", header(metaChunks, 1<<31-1, 4), true},
		{"frames-2^60", header(metaChunks+4, 1<<60, 8), true},
		{"sources-2^32-1", header(metaSources, 1<<32-1, 4), true},
		{"files-one-more", header(piOffFiles, uint64(a.tree.Idx.N()+1), 8), false},
		{"files-one-less", header(piOffFiles, uint64(a.tree.Idx.N()-1), 8), false},
		{"reserved", header(12, 1, 4), false},
		{"reserved-tail", header(index.HeaderBytes-8, 1, 8), false},
		{"padding", raw(func(nb []byte, off, size [index.NumSections]uint64) {
			// the byte after the names section (padding up to the ends column)
			if off[index.SecNames]+size[index.SecNames] == off[index.SecEnds] {
				t.Fatal("no padding after names")
			}
			nb[off[index.SecNames]+size[index.SecNames]] = 1
		}), false},
		{"extent-reserved", raw(func(nb []byte, off, size [index.NumSections]uint64) { nb[off[index.SecExts]+70] = 7 }), false},
		{"extent-has-sum", mutate(func(b *Archive) { b.tree.Idx.Exts[0].HasSum = 2 }), false},
		{"extent-name-past-end", mutate(func(b *Archive) { b.tree.Idx.Exts[0].NameLen = uint32(len(b.tree.Idx.ExtNames)) + 1 }), false},
		{"key-empty", mutate(func(b *Archive) {
			k0 := b.tree.Idx.RawKey(0)
			b.tree.Idx.Names = b.tree.Idx.Names[len(k0):]
			b.tree.Idx.Ends = slices.Clone(b.tree.Idx.Ends)
			b.tree.Idx.Ends[0] = 0
			for i := 1; i < len(b.tree.Idx.Ends); i++ {
				b.tree.Idx.Ends[i] -= uint32(len(k0))
			}
		}), false},
		{"stream-bound-on-framed", mutate(func(b *Archive) { framed(b).MaxTar = 10 }), false},
		{"keys-unsorted", mutate(func(b *Archive) {
			// swap the first two keys' bytes (same lengths by construction of a copy)
			k0, k1 := b.tree.Idx.KeyAt(0), b.tree.Idx.KeyAt(1)
			b.tree.Idx.Names = k1 + k0 + b.tree.Idx.Names[len(k0)+len(k1):]
			b.tree.Idx.Ends[0] = uint32(len(k1))
		}), false},
		{"keys-duplicate", mutate(func(b *Archive) {
			k0 := b.tree.Idx.KeyAt(0)
			k1 := b.tree.Idx.KeyAt(1)
			rest := b.tree.Idx.Names[len(k0)+len(k1):]
			b.tree.Idx.Names = k0 + k0 + rest
			b.tree.Idx.Ends[1] = uint32(2 * len(k0))
			for i := 2; i < len(b.tree.Idx.Ends); i++ {
				b.tree.Idx.Ends[i] = b.tree.Idx.Ends[i] - uint32(len(k1)) + uint32(len(k0))
			}
		}), false},
		{"chunk-index-out-of-range", mutate(func(b *Archive) { b.tree.Idx.Chunk[0] = int32(len(b.tree.Chunks)) }), false},
		{"chunk-index-negative", mutate(func(b *Archive) { b.tree.Idx.Chunk[0] = -1 }), false},
		{"root-out-of-range", mutate(func(b *Archive) { b.tree.Idx.Root[0] = uint32(len(b.tree.Idx.Roots)) }), false},
		{"negative-size", mutate(func(b *Archive) { b.tree.Idx.Size[0] = -1 }), false},
		{"nanoseconds", mutate(func(b *Archive) { b.tree.Idx.Mnsec[0] = 1e9 }), false},
		{"unknown-flag", mutate(func(b *Archive) { b.tree.Idx.Flags[0] |= 0x80 }), false},
		{"sum-and-identity", mutate(func(b *Archive) { b.tree.Idx.Flags[0] |= index.FlagSum | index.FlagIdentity }), false},
		{"extent-past-file", mutate(func(b *Archive) { b.tree.Idx.Exts[b.tree.Idx.Off[multi(b)]].Length++ }), false},
		{"extent-gap", mutate(func(b *Archive) { b.tree.Idx.Exts[b.tree.Idx.Off[multi(b)]].FileOff = 1 }), false},
		{"extent-count", mutate(func(b *Archive) { b.tree.Idx.Chunk[multi(b)]++ }), false},
		{"extent-bad-chunk", mutate(func(b *Archive) { b.tree.Idx.Exts[b.tree.Idx.Off[multi(b)]].Chunk = 1 << 30 }), false},
		{"framed-offset-outside", mutate(func(b *Archive) {
			for i := range b.tree.Idx.Flags {
				if b.tree.Idx.Flags[i]&index.FlagMulti == 0 && b.tree.Chunks[b.tree.Idx.Chunk[i]].Kind == chunkio.FramedZstd {
					b.tree.Idx.Off[i] = 1 << 40
					return
				}
			}
			t.Fatal("no single framed file")
		}), false},
		{"frames-gap", mutate(func(b *Archive) { framed(b).Frames[1].UOff++ }), false},
		{"frames-overlap", mutate(func(b *Archive) { c := framed(b); c.Frames[1].COff = c.Frames[0].COff }), false},
		{"frames-past-object", mutate(func(b *Archive) { c := framed(b); c.Size = c.Frames[len(c.Frames)-1].COff }), false},
		{"frame-empty", mutate(func(b *Archive) { c := framed(b); c.Frames[0].USize = 0 }), false},
		{"chunk-kind", mutate(func(b *Archive) { b.tree.Chunks[0].Kind = 9 }), false},
		{"frames-on-plain", mutate(func(b *Archive) { framed(b).Kind = chunkio.PlainTar }), false},
		{"direct-length", mutate(func(b *Archive) {
			for i := range b.tree.Chunks {
				if b.tree.Chunks[i].Kind == chunkio.Direct {
					b.tree.Chunks[i].Size++
					b.tree.Idx.Compressed++
					return
				}
			}
			t.Fatal("no direct chunk")
		}), false},
		{"compressed-total", mutate(func(b *Archive) { b.tree.Idx.Compressed++ }), false},
		{"chain-head", mutate(func(b *Archive) { b.tree.Chain[0] = "other" }), false},
		{"ctype-range", mutate(func(b *Archive) {
			b.tree.Idx.Ctypes = []string{"", "x"}
			b.tree.Idx.Ctype = make([]uint32, b.tree.Idx.N())
			b.tree.Idx.Ctype[0] = 2
		}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := tc.make(a)
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			_, err := openIndexBytes(nil, bad, "hostile.widx", Options{})
			runtime.ReadMemStats(&ms1)
			if !errors.Is(err, ErrBadIndex) || !strings.Contains(err.Error(), "hostile.widx") {
				t.Fatalf("err = %v, want ErrBadIndex naming the file", err)
			}
			t.Logf("refused: %v", err)
			if alloc := ms1.TotalAlloc - ms0.TotalAlloc; tc.alloc && alloc > 1<<20 {
				t.Errorf("allocated %d bytes before refusing", alloc)
			}
		})
	}
}

// BenchmarkLoadIndex1M loads the index of the 1,000,000-file archive of
// BenchmarkOpen1M (index_bench_test.go): checksum, decode, validation.
func BenchmarkLoadIndex1M(b *testing.B) {
	dir := benchManifest(b)
	store := backend.NewFileStore(dir)
	a, err := Open(context.Background(), store, "bkt", benchManifestKey, Options{})
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if err := a.WriteIndex(&buf); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	a = nil
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for b.Loop() {
		x, err := OpenIndex(context.Background(), store, bytes.NewReader(data), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if x.Files() != benchFiles {
			b.Fatalf("%d files", x.Files())
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(len(data))/1e6, "MB")
	b.ReportMetric(float64(len(data))/benchFiles, "bytes/file")
}

// TestIndexWriteDuringReads: WriteIndex runs while reads walk legacy
// chunks (run with -race); every index written loads and reads byte-exact.
func TestIndexWriteDuringReads(t *testing.T) {
	dir, key, want := piSetup(t, piShape{opt: cargopack.Options{Version: "2.0", ChunkSize: 40 << 10}})
	a, err := Open(context.Background(), backend.NewFileStore(dir), rvBucket, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		piReadAll(t, a, want, rand.New(rand.NewPCG(8, 8)))
	}()
	var outs [][]byte
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		outs = append(outs, piIndexBytes(t, a))
	}
	for _, data := range []([]byte){outs[0], outs[len(outs)/2], outs[len(outs)-1]} {
		b := piOpenIndex(t, backend.NewFileStore(dir), data)
		piReadAll(t, b, want, rand.New(rand.NewPCG(9, 9)))
	}
	t.Logf("%d indexes written during the reads", len(outs))
}

// TestIndexCacheChainCandidates: the ancestor is stored as manifest.json,
// so the build tried manifest.json.gz first and found nothing; the cache
// records that absence. A manifest.json.gz appearing there (which Open
// would now prefer) invalidates the cache, and a deleted ancestor makes
// the cached Open fail as the uncached one does, never serve the old tree.
func TestIndexCacheChainCandidates(t *testing.T) {
	dir := t.TempDir()
	base := map[string][]byte{"a.txt": rvText(1, 3000), "b.txt": rvText(2, 500)}
	rvPack(t, dir, base, cargopack.Options{Prefix: "c", UploadID: "20250304-00000001", PlainManifest: true, FrameSize: 16 << 10})
	res := rvPack(t, dir, map[string][]byte{"n.txt": rvText(3, 100)}, cargopack.Options{Prefix: "c", UploadID: "20250305-00000002",
		FrameSize: 16 << 10, PreviousManifestID: "20250304-00000001", SyncType: "incremental"})
	cache := t.TempDir()
	a1, _ := piCachedOpen(t, dir, cache, res.ManifestKey)
	absent := 0
	for _, s := range a1.prov.Sources {
		if s.Absent {
			absent++
		}
	}
	if absent == 0 || a1.Files() != 3 {
		t.Fatalf("sources %+v, %d files: want an absent candidate recorded and 3 files", a1.prov.Sources, a1.Files())
	}
	if _, f2 := piCachedOpen(t, dir, cache, res.ManifestKey); f2.Requests("get") != 0 {
		t.Fatalf("second Open: %d GETs", f2.Requests("get"))
	}

	// A gzip manifest appears for the ancestor (a different tree).
	replacement := rvPack(t, t.TempDir(), map[string][]byte{"only.txt": rvText(4, 10)},
		cargopack.Options{Prefix: "c", UploadID: "20250304-00000001", FrameSize: 16 << 10})
	gz := filepath.Join(dir, rvBucket, "c", "uploads", "20250304-00000001", "manifest.json.gz")
	m := replacement.Manifest
	rvPutManifest(t, dir, "c/uploads/20250304-00000001/manifest.json.gz", m)
	a3, f3 := piCachedOpen(t, dir, cache, res.ManifestKey)
	if f3.Requests("get") == 0 {
		t.Errorf("a new ancestor manifest did not invalidate the cache")
	}
	if _, ok := a3.Stat("only.txt"); !ok {
		t.Errorf("the rebuilt tree does not come from the new ancestor manifest")
	}

	// Both ancestor manifests deleted: the cached Open fails like Open.
	if err := os.Remove(gz); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, rvBucket, "c", "uploads", "20250304-00000001", "manifest.json")); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), piCountingStore(dir), rvBucket, res.ManifestKey, Options{IndexCache: DirIndexCache{Dir: cache}})
	if !errors.Is(err, ErrBrokenChain) {
		t.Errorf("deleted ancestor: err %v, want ErrBrokenChain", err)
	}
}

// TestIndexBytesWithProvenance: the meta section counted (metaBytes) is
// the one encoded, and Info().IndexBytes is the size WriteIndex writes for an archive built
// with provenance, before and after reads record verified units.
func TestIndexBytesWithProvenance(t *testing.T) {
	for _, sh := range piShapes() {
		t.Run(sh.name, func(t *testing.T) {
			dir, key, want := piSetup(t, sh)
			a, err := BuildIndex(context.Background(), backend.NewFileStore(dir), rvBucket, key, Options{Name: "built"})
			if err != nil {
				t.Fatalf("BuildIndex: %v", err)
			}
			defer a.Close()
			if a.prov == nil || len(a.prov.Sources) == 0 {
				t.Fatalf("BuildIndex recorded no sources")
			}
			for round := range 2 {
				if n, meta := index.MetaBytes(&a.tree, indexMeta(a)), binary.LittleEndian.Uint64(piIndexBytes(t, a)[72:]); uint64(n) != meta {
					t.Errorf("round %d: MetaBytes() = %d, WriteIndex wrote %d", round, n, meta)
				}
				if data := piIndexBytes(t, a); a.Info().IndexBytes != int64(len(data)) {
					t.Errorf("round %d: Info().IndexBytes = %d, WriteIndex wrote %d", round, a.Info().IndexBytes, len(data))
				}
				piReadAll(t, a, want, rand.New(rand.NewPCG(7, uint64(round))))
			}
		})
	}
}
