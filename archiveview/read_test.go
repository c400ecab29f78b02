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
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// rp* helpers: archives written by cargopack into a temporary FileStore
// root, read back through faults.Faulty (counting, fault injection) and
// Open — real components only.

const rpBucket = "bkt"

var rpTime = time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)

type rpArchive struct {
	dir    string
	res    *cargopack.Result
	files  map[string][]byte
	faulty *faults.Faulty
	a      *Archive
}

func rpPack(t testing.TB, files map[string][]byte, opt cargopack.Options) (string, *cargopack.Result) {
	t.Helper()
	dir := t.TempDir()
	if opt.Bucket == "" {
		opt.Bucket = rpBucket
	}
	if opt.Prefix == "" {
		opt.Prefix = "pfx"
	}
	if opt.UploadID == "" {
		opt.UploadID = "20250607-readpath"
	}
	opt.Created = rpTime
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, rpTime), opt)
	if err != nil {
		t.Fatalf("cargopack.Write: %v", err)
	}
	return dir, res
}

func rpOpenDir(t testing.TB, dir string, res *cargopack.Result, files map[string][]byte, opts Options) *rpArchive {
	t.Helper()
	f := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	if opts.Name == "" {
		opts.Name = "arch"
	}
	a, err := Open(context.Background(), f, rpBucket, res.ManifestKey, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return &rpArchive{dir: dir, res: res, files: files, faulty: f, a: a}
}

func rpNew(t testing.TB, files map[string][]byte, opt cargopack.Options, opts Options) *rpArchive {
	t.Helper()
	dir, res := rpPack(t, files, opt)
	return rpOpenDir(t, dir, res, files, opts)
}

// read returns the bytes a reader delivered and its error. useWriterTo
// selects io.WriterTo (zero-copy path) or small Read calls.
func (ra *rpArchive) read(t testing.TB, key string, off, n int64, useWriterTo bool) ([]byte, error) {
	t.Helper()
	f, ok := ra.a.Stat(key)
	if !ok {
		t.Fatalf("Stat(%q): not found", key)
	}
	r, err := ra.a.Open(context.Background(), f, off, n)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out bytes.Buffer
	if useWriterTo {
		_, err = r.(io.WriterTo).WriteTo(&out)
	} else {
		buf := make([]byte, 7001)
		for {
			k, rerr := r.Read(buf)
			out.Write(buf[:k])
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				err = rerr
				break
			}
		}
	}
	return out.Bytes(), err
}

func (ra *rpArchive) mustRead(t testing.TB, key string, off, n int64, wt bool) {
	t.Helper()
	got, err := ra.read(t, key, off, n, wt)
	if err != nil {
		t.Fatalf("read %s [%d,+%d): %v", key, off, n, err)
	}
	want := ra.files[key][off : off+n]
	if !bytes.Equal(got, want) {
		t.Fatalf("read %s [%d,+%d): %d bytes differ from source (%d bytes)", key, off, n, len(got), len(want))
	}
}

func rpText(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 11))
	words := []string{"wharf ", "cargo ", "ship ", "frame ", "chunk ", "tar\n", "zstd ", "range "}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		if r.IntN(50) == 0 {
			fmt.Fprintf(&b, "%d\n", r.Uint64())
		}
	}
	return b.Bytes()[:n]
}

func rpRandom(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 13))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// rpTree is a mixed tree: many small files, empty files, files that fill
// and cross frames, and large files cut into sub-frames.
func rpTree(seed uint64) map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i < 40; i++ {
		m[fmt.Sprintf("small/f%03d.txt", i)] = rpText(seed+uint64(i), 100+i*97)
	}
	m["empty/a.txt"] = nil
	m["empty/b.txt"] = []byte{}
	m["mid/one.txt"] = rpText(seed+100, 70_000)
	m["mid/two.txt"] = rpText(seed+101, 130_001)
	m["big/large.txt"] = rpText(seed+102, 400_000)
	m["big/z-last.txt"] = rpText(seed+103, 5)
	m["deep/a/b/c/d/long-name-"+strings.Repeat("x", 120)+".txt"] = rpText(seed+104, 3000)
	m["unicode/données-été.txt"] = rpText(seed+105, 2048)
	return m
}

type rpShape struct {
	name  string
	opt   cargopack.Options
	opts  Options
	files func() map[string][]byte
	want  []string // features the archive must have (rpFeatures)
}

// rpFeatures describes what an opened archive contains, so each shape test
// proves it exercises the structure it is named for.
func rpFeatures(a *Archive) map[string]bool {
	feat := map[string]bool{}
	maxFrame := a.set.Options().MaxFrame()
	for i := range a.tree.Chunks {
		c := &a.tree.Chunks[i]
		feat[c.Kind.String()] = true
		for _, f := range c.Frames {
			if f.USize > maxFrame {
				feat["giant-frame"] = true
			}
		}
		if n := len(c.Frames); n > 1 && c.Frames[n-1].USize == 1024 {
			feat["trailer-only-frame"] = true
		}
	}
	loc := map[[3]int64]bool{}
	for i := 0; i < a.tree.Idx.N(); i++ {
		exts := a.fileExtents(int32(i))
		chunks := map[int32]bool{}
		for _, e := range exts {
			chunks[e.Chunk] = true
			if e.Off < 0 && a.tree.Chunks[e.Chunk].Kind != chunkio.Direct {
				feat["tar-walk"] = true
			}
			k := [3]int64{int64(e.Chunk), e.Off, e.Length}
			if e.Length > 0 && loc[k] {
				feat["shared-extent"] = true
			}
			loc[k] = true
			c := &a.tree.Chunks[e.Chunk]
			if e.Off >= 0 && len(c.Frames) > 0 && e.Length > 0 {
				if lo, hi, err := chunkio.CoverFrames(c.Frames, e.Off, e.Off+e.Length); err == nil && hi > lo {
					feat["file-spans-frames"] = true
				}
			}
		}
		if len(exts) > 1 {
			feat["split"] = true
		}
		if len(chunks) > 1 {
			feat["split-across-chunks"] = true
		}
	}
	return feat
}

func rpShapes() []rpShape {
	tree := func() map[string][]byte { return rpTree(1) }
	plain := func(string) bool { return true }
	return []rpShape{
		{name: "framed", opt: cargopack.Options{FrameSize: 64 << 10, ChunkSize: 1 << 20}, files: tree,
			want: []string{"framed-zstd", "file-spans-frames"}},
		{name: "framed-multichunk", opt: cargopack.Options{FrameSize: 32 << 10, ChunkSize: 150_000}, files: tree,
			want: []string{"framed-zstd", "file-spans-frames"}},
		{name: "giant-frame", opt: cargopack.Options{FrameSize: 64 << 10, NoSubFrames: true},
			opts: Options{MaxFrameBytes: 100 << 10}, files: tree, want: []string{"framed-zstd", "giant-frame"}},
		{name: "stream-zstd", opt: cargopack.Options{FrameSize: 0, ChunkSize: 300_000}, files: tree,
			want: []string{"stream-zstd"}},
		{name: "plain-tar", opt: cargopack.Options{PlainTar: plain, ChunkSize: 300_000}, files: tree,
			want: []string{"plain-tar"}},
		{name: "direct", opt: cargopack.Options{Direct: true}, files: tree, want: []string{"direct"}},
		{name: "split", opt: cargopack.Options{FrameSize: 32 << 10, SplitSize: 90_000, ChunkSize: 200_000}, files: tree,
			want: []string{"framed-zstd", "split", "split-across-chunks"}},
		{name: "split-plain", opt: cargopack.Options{PlainTar: plain, SplitSize: 90_000, ChunkSize: 200_000}, files: tree,
			want: []string{"plain-tar", "split", "split-across-chunks"}},
		{name: "dedup", opt: cargopack.Options{FrameSize: 32 << 10, Dedup: true}, files: func() map[string][]byte {
			m := rpTree(2)
			m["dup/copy-of-large.txt"] = m["big/large.txt"]
			m["dup/copy-of-small.txt"] = m["small/f003.txt"]
			return m
		}, want: []string{"framed-zstd", "shared-extent"}},
		{name: "no-checksums", opt: cargopack.Options{FrameSize: 32 << 10, NoChecksums: true}, files: tree,
			want: []string{"framed-zstd", "file-spans-frames"}},
		{name: "trailer-only", opt: cargopack.Options{FrameSize: 4096}, files: func() map[string][]byte {
			return map[string][]byte{"a.txt": rpText(1, 3584), "b.txt": rpText(2, 3584)} // 512+3584 = 4096: cut after each
		}, want: []string{"framed-zstd", "trailer-only-frame"}},
		{name: "v2.0-tarwalk", opt: cargopack.Options{Version: "2.0", ChunkSize: 300_000}, files: tree,
			want: []string{"stream-zstd", "tar-walk"}},
		{name: "v1.0-tarwalk", opt: cargopack.Options{Version: "1.0", ChunkSize: 300_000}, files: tree,
			want: []string{"stream-zstd", "tar-walk"}},
		{name: "v2.0-split-tarwalk", opt: cargopack.Options{Version: "2.0", SplitSize: 90_000, ChunkSize: 200_000}, files: tree,
			want: []string{"tar-walk", "split-across-chunks"}},
		{name: "v2.0-plain-tarwalk", opt: cargopack.Options{Version: "2.0", PlainTar: plain, ChunkSize: 300_000}, files: tree,
			want: []string{"plain-tar", "tar-walk"}},
	}
}

func rpKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestReadShapes reads every file of every archive shape with a table of
// ranges and a randomized loop, byte-exact against the source, through both
// Read and WriteTo.
func TestReadShapes(t *testing.T) {
	for _, sh := range rpShapes() {
		t.Run(sh.name, func(t *testing.T) {
			files := sh.files()
			ra := rpNew(t, files, sh.opt, sh.opts)
			feat := rpFeatures(ra.a)
			for _, w := range sh.want {
				if !feat[w] {
					t.Fatalf("archive lacks %q (has %v)", w, feat)
				}
			}
			r := rand.New(rand.NewPCG(7, uint64(len(sh.name))))
			for _, key := range rpKeys(files) {
				size := int64(len(files[key]))
				type rng struct{ off, n int64 }
				ranges := []rng{{0, 0}, {size, 0}, {0, size}}
				if size > 0 {
					ranges = append(ranges, rng{0, 1}, rng{size - 1, 1}, rng{size / 2, size - size/2}, rng{size / 3, size / 3})
				}
				if size > 100_000 {
					// spanning frame (32/64 KiB) and part (90 000) boundaries
					ranges = append(ranges, rng{60_000, 80_000}, rng{89_999, 2}, rng{65_535, 2}, rng{size - 70_000, 70_000})
				}
				for i := 0; i < 6 && size > 0; i++ {
					off := r.Int64N(size)
					ranges = append(ranges, rng{off, r.Int64N(size-off) + 1})
				}
				for i, g := range ranges {
					g.n = min(g.n, size-g.off)
					ra.mustRead(t, key, g.off, g.n, i%2 == 0)
				}
			}
			// A second pass over the whole tree (cache and parked decoders warm).
			for _, key := range rpKeys(files) {
				ra.mustRead(t, key, 0, int64(len(files[key])), true)
			}
		})
	}
}

// TestReadConcurrentShapes runs many goroutines reading random ranges of
// random files at once (go test -race exercises the shared state).
func TestReadConcurrentShapes(t *testing.T) {
	for _, sh := range rpShapes()[:6] {
		t.Run(sh.name, func(t *testing.T) {
			files := sh.files()
			ra := rpNew(t, files, sh.opt, sh.opts)
			keys := rpKeys(files)
			var wg sync.WaitGroup
			errc := make(chan error, 8)
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 3))
					for i := 0; i < 25; i++ {
						key := keys[r.IntN(len(keys))]
						size := int64(len(files[key]))
						var off, n int64
						if size > 0 {
							off = r.Int64N(size)
							n = r.Int64N(size-off) + 1
						}
						got, err := ra.read(t, key, off, n, i%2 == 0)
						if err != nil {
							errc <- err
							return
						}
						if !bytes.Equal(got, files[key][off:off+n]) {
							errc <- fmt.Errorf("%s [%d,+%d): wrong bytes", key, off, n)
							return
						}
					}
				}(g)
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
		})
	}
}

func TestOpenRejectsBadRange(t *testing.T) {
	ra := rpNew(t, map[string][]byte{"a.txt": []byte("hello")}, cargopack.Options{FrameSize: 1 << 10}, Options{})
	f, _ := ra.a.Stat("a.txt")
	for _, g := range []struct{ off, n int64 }{{-1, 1}, {0, 6}, {5, 1}, {2, -1}, {6, 0}} {
		if _, err := ra.a.Open(context.Background(), f, g.off, g.n); !errors.Is(err, ErrBadRange) {
			t.Errorf("Open(%d, %d): err %v, want ErrBadRange", g.off, g.n, err)
		}
	}
}

// --- failure cases -------------------------------------------------------

// rpExpectFailure reads key whole (or [off,+n)) and checks the error names
// archive, key and chunk, matches target, and that the delivered bytes are
// a strict prefix of the source: nothing wrong, never the final byte.
func (ra *rpArchive) expectFailure(t *testing.T, key string, off, n int64, target error) []byte {
	t.Helper()
	var first []byte
	for _, wt := range []bool{true, false} { // WriteTo, then small Reads
		got, err := ra.read(t, key, off, n, wt)
		if err == nil {
			t.Fatalf("read %s (writerTo=%v): no error", key, wt)
		}
		if !errors.Is(err, target) {
			t.Fatalf("read %s: error %v, want %v", key, err, target)
		}
		msg := err.Error()
		if !strings.Contains(msg, "archive "+ra.a.name) || !strings.Contains(msg, key) || !strings.Contains(msg, "chunk ") {
			t.Fatalf("error does not name archive, key and chunk: %v", err)
		}
		if int64(len(got)) >= n && n > 0 {
			t.Fatalf("read %s: all %d bytes delivered despite the error", key, len(got))
		}
		want := ra.files[key][off : off+n]
		if !bytes.Equal(got, want[:len(got)]) {
			t.Fatalf("read %s: delivered bytes differ from the source", key)
		}
		if wt {
			first = got
		}
	}
	return first
}

func rpChunkOf(t testing.TB, ra *rpArchive, key string) (*chunkio.Chunk, extent) {
	t.Helper()
	f, ok := ra.a.Stat(key)
	if !ok {
		t.Fatalf("no %s", key)
	}
	e := ra.a.fileExtents(index.Ordinal(f))[0]
	return &ra.a.tree.Chunks[e.Chunk], e
}

func TestFlippedByteInFrame(t *testing.T) {
	files := rpTree(3)
	ra := rpNew(t, files, cargopack.Options{FrameSize: 64 << 10}, Options{Readahead: -1})
	c, e := rpChunkOf(t, ra, "mid/two.txt")
	lo, _, err := chunkio.CoverFrames(c.Frames, e.Off, e.Off+1)
	if err != nil {
		t.Fatal(err)
	}
	flip := c.Frames[lo].COff + c.Frames[lo].CSize/2
	ra.faulty.SetHook(func(r faults.Request) faults.Fault {
		if r.Key == c.Key {
			return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{flip}}
		}
		return faults.Fault{}
	})
	got := ra.expectFailure(t, "mid/two.txt", 0, int64(len(files["mid/two.txt"])), ErrChecksum)
	if len(got) != 0 {
		t.Fatalf("%d bytes delivered before the frame check", len(got))
	}
	// A partial read inside the bad frame fails too.
	ra.expectFailure(t, "mid/two.txt", 10, 100, ErrChecksum)
	// Once the store is healthy again the same reads succeed (nothing bad was cached).
	ra.faulty.SetHook(nil)
	ra.mustRead(t, "mid/two.txt", 0, int64(len(files["mid/two.txt"])), true)
}

func TestFlippedBytePlainTar(t *testing.T) {
	files := map[string][]byte{
		"a/small.bin": rpRandom(1, 40_000),
		"a/large.bin": rpRandom(2, 900_000),
		"a/tail.bin":  rpRandom(3, 1000),
	}
	ra := rpNew(t, files, cargopack.Options{PlainTar: func(string) bool { return true }}, Options{SmallVerifyBytes: 64 << 10})
	for _, tc := range []struct {
		key     string
		at      int64 // flipped byte, file offset
		off, n  int64
		maxSent int64 // bytes that may be delivered before the error
	}{
		{"a/small.bin", 20_000, 0, 40_000, 0},         // whole small file: nothing sent
		{"a/small.bin", 20_000, 100, 50, 0},           // partial small read verifies the whole extent first
		{"a/small.bin", 39_999, 39_990, 10, 0},        // last byte
		{"a/large.bin", 899_999, 0, 900_000, 899_999}, // whole large file: final byte withheld
	} {
		t.Run(fmt.Sprintf("%s@%d[%d+%d]", tc.key, tc.at, tc.off, tc.n), func(t *testing.T) {
			c, e := rpChunkOf(t, ra, tc.key)
			flip := e.Off + tc.at
			ra.faulty.SetHook(func(r faults.Request) faults.Fault {
				if r.Key == c.Key {
					return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{flip}}
				}
				return faults.Fault{}
			})
			defer ra.faulty.SetHook(nil)
			got := ra.expectFailure(t, tc.key, tc.off, tc.n, ErrChecksum)
			if int64(len(got)) > tc.maxSent {
				t.Fatalf("%d bytes delivered, at most %d allowed", len(got), tc.maxSent)
			}
		})
	}
}

func TestTruncatedBody(t *testing.T) {
	files := rpTree(4)
	for _, sh := range []rpShape{
		{name: "framed", opt: cargopack.Options{FrameSize: 64 << 10}},
		{name: "plain", opt: cargopack.Options{PlainTar: func(string) bool { return true }}},
		{name: "stream", opt: cargopack.Options{}},
		{name: "direct", opt: cargopack.Options{Direct: true}},
	} {
		t.Run(sh.name, func(t *testing.T) {
			ra := rpNew(t, files, sh.opt, Options{Readahead: -1})
			ra.faulty.SetHook(func(r faults.Request) faults.Fault {
				if r.Op == "range" {
					return faults.Fault{Kind: faults.FaultTruncate, After: 1000}
				}
				return faults.Fault{}
			})
			ra.expectFailure(t, "big/large.txt", 0, 400_000, backend.ErrBadResponse)
		})
	}
}

func TestMissingChunk(t *testing.T) {
	files := rpTree(5)
	for _, sh := range []rpShape{
		{name: "framed", opt: cargopack.Options{FrameSize: 64 << 10}},
		{name: "plain", opt: cargopack.Options{PlainTar: func(string) bool { return true }}},
		{name: "stream", opt: cargopack.Options{}},
		{name: "direct", opt: cargopack.Options{Direct: true}},
		{name: "v2.0", opt: cargopack.Options{Version: "2.0"}},
	} {
		t.Run(sh.name, func(t *testing.T) {
			ra := rpNew(t, files, sh.opt, Options{})
			c, _ := rpChunkOf(t, ra, "mid/one.txt")
			if err := os.Remove(filepath.Join(ra.dir, rpBucket, filepath.FromSlash(c.Key))); err != nil {
				t.Fatal(err)
			}
			ra.expectFailure(t, "mid/one.txt", 0, 70_000, backend.ErrNotFound)
			ra.expectFailure(t, "mid/one.txt", 5, 7, backend.ErrNotFound)
		})
	}
}

// rpRewrite changes the stored manifest and reopens the archive.
func rpRewrite(t *testing.T, dir string, res *cargopack.Result, files map[string][]byte, opts Options, edit func(m *manifest.Manifest)) *rpArchive {
	t.Helper()
	m := *res.Manifest
	m.Files = append([]manifest.FileEntry(nil), res.Manifest.Files...)
	m.Chunks = append([]manifest.ChunkEntry(nil), res.Manifest.Chunks...)
	for i := range m.Chunks {
		m.Chunks[i].Frames = append([]manifest.FrameEntry(nil), m.Chunks[i].Frames...)
	}
	edit(&m)
	js, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(js)
	zw.Close()
	if err := os.WriteFile(filepath.Join(dir, rpBucket, filepath.FromSlash(res.ManifestKey)), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return rpOpenDir(t, dir, res, files, opts)
}

func rpFileEntry(t *testing.T, m *manifest.Manifest, suffix string) *manifest.FileEntry {
	t.Helper()
	for i := range m.Files {
		if strings.HasSuffix(m.Files[i].Path, "/"+suffix) {
			return &m.Files[i]
		}
	}
	t.Fatalf("no manifest entry for %s", suffix)
	return nil
}

func TestLyingArchiveOffset(t *testing.T) {
	files := map[string][]byte{
		"a.txt": rpText(1, 5000),
		"b.txt": rpText(2, 5000), // same size as a.txt: only the name tells them apart
		"c.txt": rpText(3, 7000),
	}
	for _, sh := range []rpShape{
		{name: "framed", opt: cargopack.Options{FrameSize: 64 << 10}},
		{name: "plain", opt: cargopack.Options{PlainTar: func(string) bool { return true }}},
		{name: "stream", opt: cargopack.Options{}},
	} {
		for _, lie := range []struct{ victim, target string }{{"a.txt", "b.txt"}, {"a.txt", "c.txt"}} {
			t.Run(sh.name+"/"+lie.victim+"->"+lie.target, func(t *testing.T) {
				dir, res := rpPack(t, files, sh.opt)
				ra := rpRewrite(t, dir, res, files, Options{SmallVerifyBytes: -1}, func(m *manifest.Manifest) {
					v, tg := rpFileEntry(t, m, lie.victim), rpFileEntry(t, m, lie.target)
					off := *tg.ArchiveOffset
					v.ArchiveOffset = &off
					v.Checksum = "" // the header check alone must catch it
				})
				ra.expectFailure(t, lie.victim, 0, 5000, ErrWrongMember)
				ra.expectFailure(t, lie.victim, 100, 10, ErrWrongMember)
				ra.mustRead(t, lie.target, 0, int64(len(files[lie.target])), true)
			})
		}
	}
}

func TestWrongFrameSize(t *testing.T) {
	files := rpTree(6)
	dir, res := rpPack(t, files, cargopack.Options{FrameSize: 64 << 10})
	var key string
	ra := rpRewrite(t, dir, res, files, Options{}, func(m *manifest.Manifest) {
		for ci := range m.Chunks {
			fr := m.Chunks[ci].Frames
			if len(fr) >= 3 {
				fr[0].UncompressedSize++
				fr[1].UncompressedOffset++
				fr[1].UncompressedSize--
				key = m.Chunks[ci].S3Key
				return
			}
		}
		t.Fatal("no chunk with 3 frames")
	})
	_ = key
	// The first file lives in frame 0 of the first chunk.
	keys := rpKeys(files)
	ra.expectFailure(t, keys[0], 0, int64(len(files[keys[0]])), ErrCorrupt)
}

func TestReplacedChunk(t *testing.T) {
	files := rpTree(7)
	ra := rpNew(t, files, cargopack.Options{FrameSize: 32 << 10}, Options{Readahead: -1})
	ra.mustRead(t, "big/large.txt", 0, 100, true)
	c, _ := rpChunkOf(t, ra, "big/large.txt")
	p := filepath.Join(ra.dir, rpBucket, filepath.FromSlash(c.Key))
	obj, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// Same bytes plus one: a new object (new size and mtime, so a new ETag).
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(p, append(obj, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	os.Chtimes(p, future, future)
	ra.expectFailure(t, "big/large.txt", 300_000, 1000, backend.ErrChanged)
}

func TestFileChecksumMismatchWithholdsFinalByte(t *testing.T) {
	files := rpTree(8)
	for _, sh := range []rpShape{
		{name: "framed", opt: cargopack.Options{FrameSize: 64 << 10}},
		{name: "plain", opt: cargopack.Options{PlainTar: func(string) bool { return true }}},
		{name: "stream", opt: cargopack.Options{}},
		{name: "direct", opt: cargopack.Options{Direct: true}},
		{name: "giant", opt: cargopack.Options{FrameSize: 64 << 10, NoSubFrames: true}, opts: Options{MaxFrameBytes: 100 << 10}},
	} {
		t.Run(sh.name, func(t *testing.T) {
			dir, res := rpPack(t, files, sh.opt)
			wrong := strings.Repeat("ab", 32)
			ra := rpRewrite(t, dir, res, files, sh.opts, func(m *manifest.Manifest) {
				rpFileEntry(t, m, "big/large.txt").Checksum = wrong
				rpFileEntry(t, m, "small/f001.txt").Checksum = wrong
			})
			got := ra.expectFailure(t, "big/large.txt", 0, 400_000, ErrChecksum)
			if len(got) >= 400_000 {
				t.Fatal("final byte delivered")
			}
			got = ra.expectFailure(t, "small/f001.txt", 0, int64(len(files["small/f001.txt"])), ErrChecksum)
			if len(got) != 0 {
				t.Fatalf("small file: %d bytes delivered", len(got))
			}
			// Partial reads of intact bytes of a large file are still served
			// (no file checksum applies to them; frames or nothing verify them).
			if sh.name != "plain" && sh.name != "direct" && sh.name != "stream" && sh.name != "giant" {
				ra.mustRead(t, "big/large.txt", 1000, 2000, true)
			}
		})
	}
}

// --- counting -------------------------------------------------------------

func rpSmallFiles(n int) map[string][]byte {
	m := make(map[string][]byte, n)
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("d%02d/file-%05d.txt", i%37, i)] = rpText(uint64(i), 200+(i*7919)%4000)
	}
	return m
}

// walk reads every file whole in key order.
func (ra *rpArchive) walk(t testing.TB) int64 {
	var n int64
	for _, key := range rpKeys(ra.files) {
		f, _ := ra.a.Stat(key)
		r, err := ra.a.Open(context.Background(), f, 0, f.Size)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := r.(io.WriterTo).WriteTo(&b); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		r.Close()
		if !bytes.Equal(b.Bytes(), ra.files[key]) {
			t.Fatalf("%s: wrong bytes", key)
		}
		n += f.Size
	}
	return n
}

func TestWalk2000FetchesEachFrameOnce(t *testing.T) {
	files := rpSmallFiles(2000)
	ra := rpNew(t, files, cargopack.Options{FrameSize: 256 << 10, ChunkSize: 1500 << 10}, Options{})
	ra.faulty.Reset()
	ra.walk(t)
	ra.a.Close() // wait for prefetch
	gets := ra.faulty.Requests("range") + ra.faulty.Requests("get")
	frames := int64(ra.res.Frames)
	t.Logf("files %d, chunks %d, frames %d, GETs %d, bytes %d / compressed %d (%.3fx)",
		len(files), len(ra.res.ObjectKeys), frames, gets, ra.faulty.BytesReturned(), ra.res.CompressedBytes,
		float64(ra.faulty.BytesReturned())/float64(ra.res.CompressedBytes))
	if gets > frames+1 {
		t.Errorf("%d GETs for %d frames", gets, frames)
	}
	if b := ra.faulty.BytesReturned(); float64(b) > 1.05*float64(ra.res.CompressedBytes) {
		t.Errorf("%d bytes fetched for %d compressed", b, ra.res.CompressedBytes)
	}
	if s := ra.faulty.Requests("stat") + ra.faulty.Requests("list"); s != 0 {
		t.Errorf("%d stat/list requests on the read path", s)
	}
}

func TestWalkPlainAndMixed(t *testing.T) {
	files := rpSmallFiles(300)
	for i := 0; i < 20; i++ {
		files[fmt.Sprintf("media/img-%02d.jpg", i)] = rpRandom(uint64(i), 3000+i*500)
	}
	ra := rpNew(t, files, cargopack.Options{FrameSize: 64 << 10, ChunkSize: 200 << 10}, Options{SmallVerifyBytes: -1})
	ra.faulty.Reset()
	ra.walk(t)
	ra.a.Close()
	gets := ra.faulty.Requests("range") + ra.faulty.Requests("get")
	plain := 0
	for i := range ra.a.tree.Chunks {
		if ra.a.tree.Chunks[i].Kind == chunkio.PlainTar {
			plain++
		}
	}
	t.Logf("frames %d, plain objects %d, GETs %d", ra.res.Frames, plain, gets)
	// plain tar members are one ranged GET each (plus their header check, in the same GET)
	if max := int64(ra.res.Frames) + 20 + 1; gets > max {
		t.Errorf("%d GETs, want <= %d", gets, max)
	}
}

func TestConcurrentReadersOneFrameOneGET(t *testing.T) {
	files := map[string][]byte{}
	for i := 0; i < 8; i++ {
		files[fmt.Sprintf("f%d.txt", i)] = rpText(uint64(i), 10_000)
	}
	dir, res := rpPack(t, files, cargopack.Options{FrameSize: 1 << 20})
	if res.Frames != 1 {
		t.Fatalf("want one frame, got %d", res.Frames)
	}
	f := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Latency: 50 * time.Millisecond})
	a, err := Open(context.Background(), f, rpBucket, res.ManifestKey, Options{Name: "arch", Readahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	f.Reset()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := fmt.Sprintf("f%d.txt", i)
			st, _ := a.Stat(key)
			<-start
			r, err := a.Open(context.Background(), st, 0, st.Size)
			if err != nil {
				t.Error(err)
				return
			}
			defer r.Close()
			b, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(b, files[key]) {
				t.Errorf("%s: %v", key, err)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	if n := f.Requests("range"); n != 1 {
		t.Fatalf("%d range GETs for 8 concurrent readers of one frame, want 1", n)
	}
}

// TestGiantFrameSequentialIsLinear reads a giant frame in small sequential
// ranges: parked decoders continue where the last read stopped, so decode
// work and fetched bytes stay O(size), not O(size^2).
func TestGiantFrameSequentialIsLinear(t *testing.T) {
	const size = 3 << 20
	files := map[string][]byte{"huge.txt": rpText(9, size)}
	for _, sh := range []rpShape{
		{name: "giant", opt: cargopack.Options{FrameSize: 64 << 10, NoSubFrames: true}, opts: Options{MaxFrameBytes: 256 << 10}},
		{name: "stream", opt: cargopack.Options{}},
	} {
		t.Run(sh.name, func(t *testing.T) {
			ra := rpNew(t, files, sh.opt, sh.opts)
			ra.faulty.Reset()
			const step = 64 << 10
			for off := int64(0); off < size; off += step {
				ra.mustRead(t, "huge.txt", off, min(step, size-off), off%2 == 0)
			}
			decoded := ra.a.set.StreamDecoded()
			t.Logf("decoded %d bytes for a %d-byte file; fetched %d of %d compressed; %d requests",
				decoded, size, ra.faulty.BytesReturned(), ra.res.CompressedBytes, ra.faulty.Requests(""))
			if decoded > size+(2<<10) {
				t.Errorf("decoded %d bytes, want about %d", decoded, size)
			}
			if b := ra.faulty.BytesReturned(); b > 2*ra.res.CompressedBytes {
				t.Errorf("fetched %d bytes for %d compressed", b, ra.res.CompressedBytes)
			}
		})
	}
}

func TestConcurrentReadersStayWithinCacheBudget(t *testing.T) {
	files := rpSmallFiles(400)
	files["big.txt"] = rpText(99, 3<<20)
	cache := chunkio.NewFrameCache(512 << 10)
	ra := rpNew(t, files, cargopack.Options{FrameSize: 64 << 10, ChunkSize: 1 << 20}, Options{Cache: cache})
	keys := rpKeys(files)
	var wg sync.WaitGroup
	var peak int64
	var mu sync.Mutex
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < len(keys); i += 6 {
				got, err := ra.read(t, keys[i], 0, int64(len(files[keys[i]])), true)
				if err != nil || !bytes.Equal(got, files[keys[i]]) {
					t.Errorf("%s: %v", keys[i], err)
					return
				}
				mu.Lock()
				peak = max(peak, cache.Bytes())
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	if peak > cache.Budget() {
		t.Fatalf("cache held %d bytes, budget %d", peak, cache.Budget())
	}
	t.Logf("peak cache bytes %d of %d, entries now %d", peak, cache.Budget(), cache.Len())
}

func TestCloseStopsPrefetch(t *testing.T) {
	files := rpSmallFiles(300)
	dir, res := rpPack(t, files, cargopack.Options{FrameSize: 16 << 10})
	f := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Latency: 20 * time.Millisecond})
	a, err := Open(context.Background(), f, rpBucket, res.ManifestKey, Options{Name: "arch", Readahead: 8})
	if err != nil {
		t.Fatal(err)
	}
	keys := rpKeys(files)
	st, _ := a.Stat(keys[0])
	r, _ := a.Open(context.Background(), st, 0, st.Size)
	io.Copy(io.Discard, r)
	r.Close()
	done := make(chan struct{})
	go func() { a.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	before := f.Requests("")
	time.Sleep(100 * time.Millisecond)
	if after := f.Requests(""); after != before {
		t.Fatalf("%d requests after Close", after-before)
	}
	// Reads still work after Close (without prefetch).
	st, _ = a.Stat(keys[len(keys)-1])
	r, _ = a.Open(context.Background(), st, 0, st.Size)
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(b, files[keys[len(keys)-1]]) {
		t.Fatalf("read after Close: %v", err)
	}
}

func TestCancelledContextStopsRead(t *testing.T) {
	files := map[string][]byte{"big.txt": rpText(1, 2<<20)}
	dir, res := rpPack(t, files, cargopack.Options{FrameSize: 64 << 10})
	f := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Latency: 30 * time.Millisecond})
	a, err := Open(context.Background(), f, rpBucket, res.ManifestKey, Options{Name: "arch", Readahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	st, _ := a.Stat("big.txt")
	r, _ := a.Open(ctx, st, 0, st.Size)
	buf := make([]byte, 1000)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = io.Copy(io.Discard, r)
	r.Close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v, want context.Canceled", err)
	}
}

func BenchmarkWalk2000(b *testing.B) {
	files := rpSmallFiles(2000)
	dir, res := rpPack(b, files, cargopack.Options{FrameSize: 256 << 10, ChunkSize: 1500 << 10})
	b.ResetTimer()
	var gets, bytesFetched int64
	for i := 0; i < b.N; i++ {
		ra := rpOpenDir(b, dir, res, files, Options{})
		ra.faulty.Reset()
		ra.walk(b)
		ra.a.Close()
		gets += ra.faulty.Requests("range") + ra.faulty.Requests("get")
		bytesFetched += ra.faulty.BytesReturned()
	}
	b.ReportMetric(float64(gets)/float64(b.N), "GETs/walk")
	b.ReportMetric(float64(bytesFetched)/float64(b.N)/float64(res.CompressedBytes), "bytes/compressed")
	b.ReportMetric(float64(res.Frames), "frames")
}

// TestTarWalkWithoutOffsets drops archive_offset from a 2.1 manifest, so
// framed and plain chunks are read through a tar walk (frames in order, or
// the plain object with seeks over member data).
func TestTarWalkWithoutOffsets(t *testing.T) {
	files := rpTree(41)
	for _, sh := range []rpShape{
		{name: "framed", opt: cargopack.Options{FrameSize: 32 << 10, ChunkSize: 300_000}},
		{name: "plain", opt: cargopack.Options{PlainTar: func(string) bool { return true }, ChunkSize: 300_000}},
		{name: "split-framed", opt: cargopack.Options{FrameSize: 32 << 10, SplitSize: 90_000, ChunkSize: 200_000}},
	} {
		t.Run(sh.name, func(t *testing.T) {
			dir, res := rpPack(t, files, sh.opt)
			ra := rpRewrite(t, dir, res, files, Options{}, func(m *manifest.Manifest) {
				for i := range m.Files {
					m.Files[i].ArchiveOffset = nil
				}
			})
			if !rpFeatures(ra.a)["tar-walk"] {
				t.Fatal("offsets still known")
			}
			// 8 concurrent first readers share one walk per chunk.
			keys := rpKeys(files)
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := g; i < len(keys); i += 8 {
						got, err := ra.read(t, keys[i], 0, int64(len(files[keys[i]])), true)
						if err != nil || !bytes.Equal(got, files[keys[i]]) {
							t.Errorf("%s: %v", keys[i], err)
						}
					}
				}(g)
			}
			wg.Wait()
			for _, key := range keys {
				size := int64(len(files[key]))
				if size > 10 {
					ra.mustRead(t, key, size/3, size/3, false)
				}
			}
			if st := ra.faulty.Requests("stat"); st > int64(len(ra.a.tree.Chunks)) {
				t.Errorf("%d stats for %d chunks: walks were not shared", st, len(ra.a.tree.Chunks))
			}
		})
	}
}

func TestTarWalkNameNotFound(t *testing.T) {
	files := map[string][]byte{"a.txt": rpText(1, 100), "b.txt": rpText(2, 200)}
	for _, sh := range []rpShape{
		{name: "v2.0-stream", opt: cargopack.Options{Version: "2.0"}},
		{name: "plain", opt: cargopack.Options{PlainTar: func(string) bool { return true }}},
		{name: "framed", opt: cargopack.Options{FrameSize: 1 << 10}},
	} {
		t.Run(sh.name, func(t *testing.T) {
			dir, res := rpPack(t, files, sh.opt)
			renamed := map[string][]byte{"a.txt": files["a.txt"], "ghost.txt": files["b.txt"]}
			ra := rpRewrite(t, dir, res, renamed, Options{}, func(m *manifest.Manifest) {
				e := rpFileEntry(t, m, "b.txt")
				e.Path = strings.TrimSuffix(e.Path, "b.txt") + "ghost.txt"
				e.ArchiveOffset = nil
				rpFileEntry(t, m, "a.txt").ArchiveOffset = nil
			})
			ra.expectFailure(t, "ghost.txt", 0, 200, ErrNotInChunk)
			ra.mustRead(t, "a.txt", 0, 100, true)
		})
	}
}

// A reader that gives up (context cancelled) while it owns the fetch of
// frames another reader waits for must not fail that other reader.
func TestCancelledFetcherDoesNotFailWaiters(t *testing.T) {
	files := map[string][]byte{"big.txt": rpText(5, 3<<20)}
	dir, res := rpPack(t, files, cargopack.Options{FrameSize: 64 << 10})
	f := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Latency: 20 * time.Millisecond, Bandwidth: 2 << 20})
	for round := 0; round < 3; round++ {
		a, err := Open(context.Background(), f, rpBucket, res.ManifestKey, Options{Name: "arch", Readahead: -1})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := a.Stat("big.txt")
		f.Reset()
		ctx, cancel := context.WithCancel(context.Background())
		ra, _ := a.Open(ctx, st, 0, st.Size) // claims every frame in one run
		buf := make([]byte, 10)
		if _, err := io.ReadFull(ra, buf); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			rb, _ := a.Open(context.Background(), st, 0, st.Size)
			defer rb.Close()
			b, err := io.ReadAll(rb)
			if err == nil && !bytes.Equal(b, files["big.txt"]) {
				err = errors.New("wrong bytes")
			}
			done <- err
		}()
		time.Sleep(30 * time.Millisecond)
		cancel()
		ra.Close()
		if err := <-done; err != nil {
			t.Fatalf("round %d: waiter failed after the fetcher was cancelled: %v", round, err)
		}
		if n := f.Requests("range"); n < 2 {
			t.Fatalf("round %d: %d range GETs: the fetcher was not interrupted, the test proves nothing", round, n)
		}
		a.Close()
	}
}

// BenchmarkReadLargeFramed reads one 24 MiB file cold (fresh cache each
// time): coalesced GETs, parallel frame decode, WriteTo.
func BenchmarkReadLargeFramed(b *testing.B) {
	const size = 24 << 20
	files := map[string][]byte{"big.txt": rpText(77, size)}
	dir, res := rpPack(b, files, cargopack.Options{FrameSize: 1 << 20})
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ra := rpOpenDir(b, dir, res, files, Options{Cache: chunkio.NewFrameCache(64 << 20)})
		st, _ := ra.a.Stat("big.txt")
		r, err := ra.a.Open(context.Background(), st, 0, st.Size)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, r)
		r.Close()
		if err != nil || n != size {
			b.Fatalf("%d bytes, %v", n, err)
		}
		ra.a.Close()
	}
	b.ReportMetric(float64(res.Frames), "frames")
}

// TestRandomFaultsNeverServeWrongBytes reads random ranges while the store
// randomly flips bytes, truncates, resets and fails requests. Every read
// must either deliver exactly the source bytes or fail with a prefix of
// them: never a wrong byte, never a complete-looking wrong body. (Files stay
// under one 256 KiB segment and SmallVerifyBytes, where the read path
// verifies every byte it delivers, whatever the shape.)
func TestRandomFaultsNeverServeWrongBytes(t *testing.T) {
	files := map[string][]byte{}
	for i := 0; i < 60; i++ {
		files[fmt.Sprintf("f/%02d.txt", i)] = rpText(uint64(i), 50+(i*3371)%200_000)
	}
	files["f/empty"] = nil
	for _, sh := range []rpShape{
		{name: "framed", opt: cargopack.Options{FrameSize: 32 << 10, ChunkSize: 600_000}},
		{name: "giant", opt: cargopack.Options{FrameSize: 32 << 10, NoSubFrames: true}, opts: Options{MaxFrameBytes: 40 << 10}},
		{name: "stream", opt: cargopack.Options{ChunkSize: 600_000}},
		{name: "plain", opt: cargopack.Options{PlainTar: func(string) bool { return true }, ChunkSize: 600_000}},
		{name: "direct", opt: cargopack.Options{Direct: true}},
		{name: "split", opt: cargopack.Options{FrameSize: 32 << 10, SplitSize: 70_000, ChunkSize: 300_000}},
		{name: "v2.0", opt: cargopack.Options{Version: "2.0", ChunkSize: 600_000}},
		// Framed chunks verify every frame before use, so large files too.
		{name: "framed-large", opt: cargopack.Options{FrameSize: 64 << 10, ChunkSize: 2 << 20}, files: func() map[string][]byte {
			m := map[string][]byte{}
			for k, v := range files {
				m[k] = v
			}
			for i := 0; i < 4; i++ {
				m[fmt.Sprintf("large/%d.txt", i)] = rpText(uint64(100+i), 700_000+i*300_000)
			}
			return m
		}},
	} {
		t.Run(sh.name, func(t *testing.T) {
			files := files
			if sh.files != nil {
				files = sh.files()
			}
			ra := rpNew(t, files, sh.opt, sh.opts)
			var mu sync.Mutex
			fr := rand.New(rand.NewPCG(42, uint64(len(sh.name))))
			ra.faulty.SetHook(func(r faults.Request) faults.Fault {
				mu.Lock()
				defer mu.Unlock()
				if r.Op != "range" && r.Op != "get" {
					return faults.Fault{}
				}
				switch x := fr.IntN(10); {
				case x < 2 && r.Len > 0:
					return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{r.Off + fr.Int64N(r.Len)}}
				case x == 2 && r.Len > 1:
					return faults.Fault{Kind: faults.FaultTruncate, After: fr.Int64N(r.Len)}
				case x == 3 && r.Len > 1:
					return faults.Fault{Kind: faults.FaultReset, After: fr.Int64N(r.Len)}
				case x == 4:
					return faults.Fault{Kind: faults.FaultError}
				}
				return faults.Fault{}
			})
			keys := rpKeys(files)
			r := rand.New(rand.NewPCG(9, 9))
			var okReads, failed int
			for i := 0; i < 300; i++ {
				key := keys[r.IntN(len(keys))]
				size := int64(len(files[key]))
				off, n := int64(0), size
				if size > 0 && r.IntN(2) == 0 {
					off = r.Int64N(size)
					n = r.Int64N(size-off) + 1
				}
				got, err := ra.read(t, key, off, n, i%2 == 0)
				want := files[key][off : off+n]
				if err == nil {
					okReads++
					if !bytes.Equal(got, want) {
						t.Fatalf("%s [%d,+%d): wrong bytes served without error", key, off, n)
					}
					continue
				}
				failed++
				if n > 0 && int64(len(got)) >= n {
					t.Fatalf("%s [%d,+%d): complete body delivered with error %v", key, off, n, err)
				}
				if !bytes.Equal(got, want[:len(got)]) {
					t.Fatalf("%s [%d,+%d): wrong bytes delivered before error %v", key, off, n, err)
				}
				if !strings.Contains(err.Error(), key) {
					t.Fatalf("error does not name the key: %v", err)
				}
			}
			t.Logf("%d reads served, %d failed cleanly", okReads, failed)
			if okReads == 0 || failed == 0 {
				t.Fatalf("fault mix exercised nothing: %d ok, %d failed", okReads, failed)
			}
		})
	}
}

// TestGiantFrameRangesFetchOnce reads a giant frame the way the SDK
// downloaders do, one sequential range after another, with parts smaller
// than the ranges: the decoder parked at the end of each range keeps the
// parts it had fetched ahead, so every compressed byte is fetched once by
// the serving decode (plus, by default, once by the first read's check of
// the whole frame). Dropping the parts at each park refetched the window
// ahead on every range (9.8x the frame for 8 MiB ranges of 512 MiB).
func TestGiantFrameRangesFetchOnce(t *testing.T) {
	const size = 12 << 20
	// Text with stretches of random bytes (zstd ratio about 0.6): a frame
	// of many parts. (Random bytes alone are stored as a direct object.)
	var mixed []byte
	for i := uint64(0); len(mixed) < size; i++ {
		mixed = append(mixed, rpText(i, 48<<10)...)
		mixed = append(mixed, rpRandom(i, 48<<10)...)
	}
	files := map[string][]byte{"huge.bin": mixed[:size]}
	for _, tc := range []struct {
		trust bool
		max   float64 // backend bytes / compressed bytes
	}{{trust: true, max: 1.05}, {trust: false, max: 2.05}} {
		t.Run(fmt.Sprintf("trust=%v", tc.trust), func(t *testing.T) {
			cache := chunkio.NewFrameCache(32<<20, chunkio.WithPartSize(1<<20), chunkio.WithStreamParts(4))
			dir, res := rpPack(t, files, cargopack.Options{FrameSize: 64 << 10, NoSubFrames: true})
			// Parts take time to arrive, so the reader's window grows
			// ahead of the range it serves (as against S3).
			f := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Latency: 2 * time.Millisecond, Bandwidth: 200e6})
			a, err := Open(context.Background(), f, rpBucket, res.ManifestKey,
				Options{Name: "arch", MaxFrameBytes: 256 << 10, TrustUnframed: tc.trust, Cache: cache})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			ra := &rpArchive{dir: dir, res: res, files: files, faulty: f, a: a}
			f.Reset()
			const step = 1536 << 10
			for off := int64(0); off < size; off += step {
				ra.mustRead(t, "huge.bin", off, min(step, size-off), true)
			}
			ratio := float64(ra.faulty.BytesReturned()) / float64(ra.res.CompressedBytes)
			t.Logf("fetched %d bytes for %d compressed (%.2fx) in %d requests", ra.faulty.BytesReturned(),
				ra.res.CompressedBytes, ratio, ra.faulty.Requests(""))
			if ratio > tc.max {
				t.Errorf("fetched %.2fx the compressed frame, want at most %.2fx", ratio, tc.max)
			}
		})
	}
}
