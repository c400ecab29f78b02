package archiveview

// Hostile-archive tests (issue 7). Every archive here is written by our own
// writer (package cargopack) into a temporary FileStore root and then
// tampered with: the manifest is decoded, modified and written back, or the
// chunk objects are changed on disk. Each case pins one of three outcomes:
//
//   - refused at Open, with an error naming the manifest key;
//   - refused at read, with an error naming the archive, the file key and
//     the chunk key;
//   - served byte-exact (compared with the source bytes).
//
// Whatever the outcome, no case may serve different bytes, panic, allocate
// beyond a bound (runtime.MemStats.TotalAlloc around Open and the reads),
// hang (every case runs under a deadline), list a key that contains a ".."
// segment or starts with "/", or make the store read a key with a ".."
// segment (the request log of a backend.Faulty wrapper is inspected).
//
// Every case runs in the normal `go test ./archiveview` and must pass.
// The cases that revealed read-core bugs (issue 7) are in hoIssue7Rows,
// TestHostileCachePoisoning, TestHostileTraversalChain and
// TestHostileManifestMutationsShared; the bugs, all fixed, were:
//
//  1. the header-checked cache (chunkReadState.hdrOK) and the verified
//     extent cache (keyExtent) were keyed by chunk offset only, so a lying
//     archive_offset or s3_key that landed on a member read before served
//     that member's bytes (now keyed by offset, tar name, length, sha256);
//  2. a duplicate whose duplicate_of_hash names another file's content was
//     served from that file although its own sha256 disagreed (refused at
//     Open);
//  3. a frame's compressed bytes were buffered whole, whatever their size
//     (frames over MaxFrameBytes compressed are streamed; impossible spans
//     refused unread);
//  4. decoded frames were cached by frame index, so a hostile manifest over
//     the same chunk object poisoned an honest archive (wrong bytes, or a
//     slice-bounds panic in framedSource.next) (keyed by span, size, sha256;
//     buffers length-checked);
//  5. s3_key, prefix and previous_manifest_id with ".." segments reached
//     the store (refused at Open);
//  6. duplicate member names in a walked chunk: the last one won (refused);
//  7. a failed tar walk over an unframed zstd bomb was redone by every read
//     (decode bounded, data failures remembered per chunk).

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

const (
	hoBucket = "hbkt"
	hoPrefix = "hp"
	hoName   = "hostile"
	// hoDeadline bounds every case: a hang is a failure, not a stuck test.
	hoDeadline = 15 * time.Second
	// hoAllocBound is the default bound on bytes allocated by Open plus all
	// reads of one case (TotalAlloc delta); the archives are < 200 KiB.
	hoAllocBound = 96 << 20
)

var hoTime = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// hoText is deterministic compressible text.
func hoText(seed uint64, n int) []byte {
	words := []string{"wharf ", "cargo ", "ship ", "frame ", "chunk ", "tar ", "zstd ", "hostile\n", "byte ", "range "}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.Bytes()[:n]
}

// hoRandom is deterministic incompressible data.
func hoRandom(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, ^seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// hoBaseFiles: several files per frame at FrameSize 16 KiB, one file
// larger than a frame (sub-frames), one tiny file, nested keys.
func hoBaseFiles() map[string][]byte {
	return map[string][]byte{
		"a.txt":     hoText(1, 3000),
		"b.bin":     hoRandom(2, 40000),
		"dir/c.txt": hoText(3, 20000),
		"dir/e.txt": hoText(4, 100),
		"z.txt":     hoText(5, 5000),
	}
}

// hoEnv is one written archive in its own FileStore root.
type hoEnv struct {
	t      testing.TB
	dir    string
	res    *cargopack.Result
	files  map[string][]byte // source bytes by Rel (= virtual key)
	mkey   string            // manifest key
	bucket string
}

func hoPack(t testing.TB, dir string, files map[string][]byte, opt cargopack.Options) *hoEnv {
	t.Helper()
	if opt.Bucket == "" {
		opt.Bucket = hoBucket
	}
	if opt.Prefix == "" {
		opt.Prefix = hoPrefix
	}
	if opt.UploadID == "" {
		opt.UploadID = "20250304-a0a0a0a0"
	}
	if opt.ShardCount == 0 {
		opt.ShardCount = 1
	}
	opt.Created = hoTime
	opt.Hostname = "hostile-test"
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, hoTime), opt)
	if err != nil {
		t.Fatalf("cargopack.Write: %v", err)
	}
	return &hoEnv{t: t, dir: dir, res: res, files: files, mkey: res.ManifestKey, bucket: opt.Bucket}
}

// objPath is the file behind bucket/key in the FileStore root.
func (h *hoEnv) objPath(key string) string {
	return filepath.Join(h.dir, h.bucket, filepath.FromSlash(key))
}

// manifest decodes the manifest as stored (gzip sniffed), without Load's
// validation, so that tests start from exactly what the writer wrote.
func (h *hoEnv) manifest() *manifest.Manifest {
	h.t.Helper()
	raw, err := os.ReadFile(h.objPath(h.mkey))
	if err != nil {
		h.t.Fatalf("read manifest: %v", err)
	}
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			h.t.Fatalf("gunzip manifest: %v", err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			h.t.Fatalf("gunzip manifest: %v", err)
		}
	}
	var m manifest.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		h.t.Fatalf("decode manifest: %v", err)
	}
	return &m
}

// putJSON stores raw JSON as the manifest (gzipped if the key says so).
func (h *hoEnv) putJSON(key string, js []byte) {
	h.t.Helper()
	data := js
	if strings.HasSuffix(key, ".gz") {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(js)
		if err := zw.Close(); err != nil {
			h.t.Fatal(err)
		}
		data = b.Bytes()
	}
	p := h.objPath(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *hoEnv) putManifest(m *manifest.Manifest) {
	h.t.Helper()
	js, err := json.Marshal(m)
	if err != nil {
		h.t.Fatalf("encode manifest: %v", err)
	}
	h.putJSON(h.mkey, js)
}

// chunkKey is the object key of manifest chunk i.
func (h *hoEnv) chunkKey(m *manifest.Manifest, i int) string {
	return manifest.ResolveObjectKey(h.bucket, m.Prefix, m.Chunks[i].S3Key)
}

// chunkOf returns the index of the chunk that holds file rel (the first
// entry with that path) in m.
func (h *hoEnv) chunkOf(m *manifest.Manifest, rel string) int {
	h.t.Helper()
	fe := hoEntry(h.t, m, rel)
	for i := range m.Chunks {
		if m.Chunks[i].S3Key == fe.S3Key {
			return i
		}
	}
	h.t.Fatalf("file %s: no chunk with s3_key %q", rel, fe.S3Key)
	return -1
}

// hoEntry finds the (first) file entry of rel.
func hoEntry(t testing.TB, m *manifest.Manifest, rel string) *manifest.FileEntry {
	t.Helper()
	for i := range m.Files {
		if p := m.Files[i].Path; p == rel || strings.HasSuffix(p, "/"+rel) {
			return &m.Files[i]
		}
	}
	t.Fatalf("no file entry for %s", rel)
	return nil
}

// hoFrameAt is the index of the frame of c covering uncompressed byte u.
func hoFrameAt(c *manifest.ChunkEntry, u int64) int {
	for i, f := range c.Frames {
		if u >= f.UncompressedOffset && u < f.UncompressedOffset+f.UncompressedSize {
			return i
		}
	}
	return -1
}

// hoResize sets frame fi of chunk ci to claim newU uncompressed bytes and
// shifts every later frame and every archive_offset past the frame, so that
// only that frame lies.
func hoResize(m *manifest.Manifest, ci, fi int, newU int64) {
	c := &m.Chunks[ci]
	f := &c.Frames[fi]
	end := f.UncompressedOffset + f.UncompressedSize
	delta := newU - f.UncompressedSize
	f.UncompressedSize = newU
	for i := range c.Frames {
		if c.Frames[i].UncompressedOffset >= end {
			c.Frames[i].UncompressedOffset += delta
		}
	}
	c.UncompressedSize += delta
	for i := range m.Files {
		fe := &m.Files[i]
		if fe.S3Key == c.S3Key && fe.ArchiveOffset != nil && *fe.ArchiveOffset >= end {
			v := *fe.ArchiveOffset + delta
			fe.ArchiveOffset = &v
		}
	}
}

// hoKeysInFrame lists the files of chunk ci whose data touch frame fi.
func hoKeysInFrame(m *manifest.Manifest, ci, fi int) []string {
	c := &m.Chunks[ci]
	f := c.Frames[fi]
	var out []string
	for _, fe := range m.Files {
		if fe.S3Key != c.S3Key || fe.ArchiveOffset == nil {
			continue
		}
		off := *fe.ArchiveOffset
		if off < f.UncompressedOffset+f.UncompressedSize && off+fe.Size > f.UncompressedOffset {
			k, _ := manifest.RelativeKey(m.SourcePath, fe.Path)
			out = append(out, k)
		}
	}
	return out
}

// hoZeroBomb builds one real zstd frame that decodes to n zero bytes from
// about n/32768 bytes: RLE blocks of 128 KiB, 4 bytes each, no content size.
func hoZeroBomb(n int64) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38} // magic, FHD (no FCS), window 128 KiB
	const block = 128 << 10
	for n > 0 {
		sz := min(n, block)
		n -= sz
		hdr := uint32(1<<1) | uint32(sz)<<3 // RLE block
		if n == 0 {
			hdr |= 1 // last block
		}
		b = append(b, byte(hdr), byte(hdr>>8), byte(hdr>>16), 0x00)
	}
	return b
}

// hoBombChunk replaces chunk ci's object with bomb and its frame table with
// one frame that claims claim uncompressed bytes (checksum consistent with
// the bomb, so only the decode can tell).
func (h *hoEnv) hoBombChunk(m *manifest.Manifest, ci int, bomb []byte, claim int64) {
	h.t.Helper()
	sum := sha256.Sum256(bomb)
	c := &m.Chunks[ci]
	c.Frames = []manifest.FrameEntry{{CompressedOffset: 0, CompressedSize: int64(len(bomb)),
		UncompressedOffset: 0, UncompressedSize: claim, Checksum: hex.EncodeToString(sum[:])}}
	c.CompressedSize = int64(len(bomb))
	c.UncompressedSize = claim
	if err := os.WriteFile(h.objPath(h.chunkKey(m, ci)), bomb, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// hoRenameChunk moves chunk ci's object to a key ending in newExt
// (".tar" or ".tar.zst") and rewrites every reference to it.
func (h *hoEnv) hoRenameChunk(m *manifest.Manifest, ci int, oldExt, newExt string) {
	h.t.Helper()
	c := &m.Chunks[ci]
	oldS3, oldKey := c.S3Key, h.chunkKey(m, ci)
	newS3 := strings.TrimSuffix(oldS3, oldExt) + newExt
	c.S3Key = newS3
	for i := range m.Files {
		if m.Files[i].S3Key == oldS3 {
			m.Files[i].S3Key = newS3
		}
	}
	for i := range m.Shards {
		for j, k := range m.Shards[i].ChunkKeys {
			if k == oldS3 {
				m.Shards[i].ChunkKeys[j] = newS3
			}
		}
	}
	if err := os.Rename(h.objPath(oldKey), h.objPath(h.chunkKey(m, ci))); err != nil {
		h.t.Fatal(err)
	}
}

// errHoPanic marks a read that panicked (recovered by hoRead, so that the
// case is reported instead of killing the test binary). Panics in other
// goroutines of the read path still crash the binary.
var errHoPanic = errors.New("PANIC in the read path")

// hoReadResult is one read of a virtual file.
type hoReadResult struct {
	got []byte
	err error
}

// hoRead reads [off,off+n) of f, alternating Read and WriteTo.
func hoRead(ctx context.Context, a *Archive, f File, off, n int64, writerTo bool) (res hoReadResult) {
	defer func() {
		if p := recover(); p != nil {
			res = hoReadResult{err: fmt.Errorf("%w: %v", errHoPanic, p)}
		}
	}()
	r, err := a.Open(ctx, f, off, n)
	if err != nil {
		return hoReadResult{err: err}
	}
	defer r.Close()
	var out bytes.Buffer
	if writerTo {
		_, err = r.(io.WriterTo).WriteTo(&out)
	} else {
		buf := make([]byte, 3001)
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
	return hoReadResult{got: out.Bytes(), err: err}
}

// hoAllKeys lists every key of a (paged, to exercise List).
func hoAllKeys(a *Archive) []File {
	var out []File
	p := ListParams{MaxKeys: 7}
	for {
		res := a.List(p)
		for _, e := range res.Entries {
			out = append(out, e.File)
		}
		if !res.Truncated {
			return out
		}
		p.After = res.NextAfter
	}
}

// hoSafeKey reports why k is not a safe key for a virtual bucket or a
// store request, or "".
func hoSafeKey(k string) string {
	switch {
	case k == "":
		return "empty"
	case strings.HasPrefix(k, "/"):
		return "starts with /"
	case !utf8.ValidString(k):
		return "invalid UTF-8"
	case strings.ContainsAny(k, "\x00\\"):
		return "NUL or backslash"
	}
	for _, seg := range strings.Split(k, "/") {
		if seg == ".." {
			return `".." segment`
		}
	}
	for _, c := range []byte(k) {
		if c < 0x20 || c == 0x7f {
			return "control character"
		}
	}
	return ""
}

// hoCheckRequests asserts that the store was never asked for a key that
// could leave the bucket's directory, nor listed.
func hoCheckRequests(t testing.TB, f *backend.Faulty) {
	t.Helper()
	for _, r := range f.Log() {
		if why := hoSafeKey(r.Key); why != "" && r.Op != "list" {
			t.Errorf("store asked for %s %s/%q: %s", r.Op, r.Bucket, r.Key, why)
		}
		if r.Op == "list" {
			t.Errorf("store listed %s/%q on the read path", r.Bucket, r.Key)
		}
	}
}

// hoTotalAlloc is runtime.MemStats.TotalAlloc.
func hoTotalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// hoRow is one hostile case.
type hoRow struct {
	name  string
	files map[string][]byte // nil: hoBaseFiles
	pack  cargopack.Options // Bucket/Prefix/UploadID/ShardCount defaulted
	// edit tampers with the manifest (and may touch objects through h);
	// the result is written back. nil: the manifest is left as written.
	edit func(h *hoEnv, m *manifest.Manifest)
	// disk tampers with objects after edit (before Open).
	disk func(h *hoEnv, m *manifest.Manifest)
	opts Options

	// openErr: Open must fail, its error wrapping each of these and
	// naming the manifest key.
	openErr []error
	openHas []string // further substrings of the Open error

	// failKeys: whole reads of these keys must fail, wrapping each error
	// given, and naming archive, key and chunk. Keys whose name is
	// computed from the manifest are returned by failFn instead.
	failKeys map[string][]error
	failFn   func(h *hoEnv, m *manifest.Manifest) map[string][]error
	// partialFail: also a short read at the middle of each failKey fails.
	partialFail bool
	// serveKeys must read back byte-exact (whole and partial).
	serveKeys []string
	// alias maps a virtual key to the source Rel whose bytes it may serve
	// (paths rewritten in the manifest); keys not in files or alias must
	// fail to read.
	alias map[string]string
	// wantKeys: when not nil, the listing must be exactly these keys.
	wantKeys []string
	// afterOpen runs between Open and the reads.
	afterOpen func(t *testing.T, h *hoEnv, m *manifest.Manifest, a *Archive)
	maxAlloc  int64 // 0: hoAllocBound
	// mayRefuse: Open may fail instead (the case is about not escaping or
	// not panicking, and both outcomes are correct); the error must still
	// name the manifest key.
	mayRefuse bool
	// maxTime bounds the whole case (Open, reads, Verify); 0 = hoDeadline.
	maxTime time.Duration
}

// run executes one row.
func (row hoRow) run(t *testing.T) {
	files := row.files
	if files == nil {
		files = hoBaseFiles()
	}
	h := hoPack(t, t.TempDir(), files, row.pack)
	m := h.manifest()
	if row.edit != nil {
		row.edit(h, m)
		h.putManifest(m)
	}
	if row.disk != nil {
		row.disk(h, m)
	}
	var fails map[string][]error
	if row.failFn != nil {
		fails = row.failFn(h, m)
	} else {
		fails = row.failKeys
	}

	ctx, cancel := context.WithTimeout(context.Background(), hoDeadline)
	defer cancel()
	start := time.Now()
	fs := backend.NewFaulty(backend.NewFileStore(h.dir), backend.FaultConfig{})
	opts := row.opts
	opts.Name = hoName
	if opts.Cache == nil {
		opts.Cache = chunkio.NewFrameCache(16 << 20)
	}
	runtime.GC()
	alloc0 := hoTotalAlloc()
	a, err := Open(ctx, fs, h.bucket, h.mkey, opts)
	defer func() {
		hoCheckRequests(t, fs)
		limit := row.maxTime
		if limit == 0 {
			limit = hoDeadline
		}
		if el := time.Since(start); el > limit {
			t.Errorf("case took %v (bound %v)", el, limit)
		}
	}()

	if row.openErr != nil || (err != nil && row.mayRefuse) {
		if err == nil {
			a.Close()
			t.Fatalf("Open succeeded; want an error wrapping %v", row.openErr)
		}
		for _, want := range row.openErr {
			if !errors.Is(err, want) {
				t.Errorf("Open error does not wrap %v: %v", want, err)
			}
		}
		for _, s := range append([]string{h.mkey}, row.openHas...) {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Open error does not name %q: %v", s, err)
			}
		}
		if d := hoTotalAlloc() - alloc0; row.maxAlloc >= 0 && int64(d) > hoMaxAlloc(row) {
			t.Errorf("Open allocated %d bytes (bound %d)", d, hoMaxAlloc(row))
		}
		return
	}
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer a.Close()
	if row.afterOpen != nil {
		row.afterOpen(t, h, m, a)
	}

	listed := hoAllKeys(a)
	var names []string
	for _, f := range listed {
		names = append(names, f.Key)
		if why := hoSafeKey(f.Key); why != "" {
			t.Errorf("listed key %q: %s", f.Key, why)
		}
	}
	if row.wantKeys != nil {
		want := slices.Clone(row.wantKeys)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("listing = %q, want %q", names, want)
		}
	}
	for k := range fails {
		if !slices.Contains(names, k) {
			t.Errorf("key %s should be listed (and fail to read); listing %q", k, names)
		}
	}
	for _, k := range row.serveKeys {
		if !slices.Contains(names, k) {
			t.Errorf("key %s should be listed and served; listing %q", k, names)
		}
	}

	for i, f := range listed {
		src, known := files[f.Key]
		if r, ok := row.alias[f.Key]; ok {
			src, known = files[r], true
		}
		wantFail, mustFail := fails[f.Key]
		mustServe := slices.Contains(row.serveKeys, f.Key)
		reads := [][2]int64{{0, f.Size}}
		if f.Size > 2 {
			mid := f.Size / 2
			reads = append(reads, [2]int64{mid - 1, min(16, f.Size-mid+1)})
		}
		for j, rg := range reads {
			res := hoRead(ctx, a, f, rg[0], rg[1], (i+j)%2 == 0)
			what := fmt.Sprintf("read %s [%d,+%d)", f.Key, rg[0], rg[1])
			if res.err == nil {
				switch {
				case int64(len(res.got)) != rg[1]:
					t.Errorf("%s: no error but %d bytes", what, len(res.got))
				case !known:
					t.Errorf("%s: served %d bytes of a key with no source", what, len(res.got))
				case rg[0]+rg[1] > int64(len(src)) || !bytes.Equal(res.got, src[rg[0]:rg[0]+rg[1]]):
					t.Errorf("%s: WRONG BYTES served", what)
				case mustFail && (j == 0 || row.partialFail):
					t.Errorf("%s: served (correctly) but must fail", what)
				}
				continue
			}
			// An error: it must name archive, key and (for chunk
			// errors) the chunk.
			if errors.Is(res.err, errHoPanic) {
				t.Errorf("%s: %v", what, res.err)
				continue
			}
			msg := res.err.Error()
			t.Logf("%s: refused: %v", what, res.err)
			for _, s := range []string{hoName, f.Key} {
				if !strings.Contains(msg, s) {
					t.Errorf("%s: error does not name %q: %v", what, s, res.err)
				}
			}
			if exts := a.fileExtents(f.idx); len(exts) == 1 && !errors.Is(res.err, ErrBadRange) {
				if ck := a.chunks[exts[0].chunk].Key; !strings.Contains(msg, ck) {
					t.Errorf("%s: error does not name chunk %s: %v", what, ck, res.err)
				}
			}
			if mustServe {
				t.Errorf("%s: must be served: %v", what, res.err)
			}
			if mustFail && j == 0 {
				for _, want := range wantFail {
					if !errors.Is(res.err, want) {
						t.Errorf("%s: error does not wrap %v: %v", what, want, res.err)
					}
				}
			}
		}
	}

	// Verify (wharf verify) must find every failing key and never blame
	// a key that is served.
	vstart := time.Now()
	problems := map[string]string{}
	var chunkProblems int
	if _, err := a.Verify(ctx, func(p VerifyProblem) {
		if p.Key == "" {
			chunkProblems++
			if !strings.Contains(p.Detail, p.Chunk) && p.Chunk == "" {
				t.Errorf("Verify: chunk problem names no chunk: %+v", p)
			}
			return
		}
		problems[p.Key] = p.Detail
	}); err != nil {
		t.Errorf("Verify: %v", err)
	}
	for k := range fails {
		if _, ok := problems[k]; !ok {
			t.Errorf("Verify did not report %s (problems: %v)", k, problems)
		}
	}
	for _, k := range row.serveKeys {
		if d, ok := problems[k]; ok {
			t.Errorf("Verify reported served key %s: %s", k, d)
		}
	}
	if row.edit == nil && row.disk == nil && row.afterOpen == nil && (len(problems) > 0 || chunkProblems > 0) {
		t.Errorf("Verify reported problems on an untampered archive: %v", problems)
	}
	if el := time.Since(vstart); el > 5*time.Second {
		t.Logf("Verify took %v", el)
	}
	if d := hoTotalAlloc() - alloc0; int64(d) > hoMaxAlloc(row) {
		t.Errorf("Open, reads and Verify allocated %d bytes (bound %d)", d, hoMaxAlloc(row))
	}
}

func hoMaxAlloc(row hoRow) int64 {
	if row.maxAlloc > 0 {
		return row.maxAlloc
	}
	return hoAllocBound
}

// hoFramed is the base framed shape: 16 KiB frames, one chunk.
var hoFramed = cargopack.Options{FrameSize: 16 << 10}

// hoPlain forces plain .tar chunks.
var hoPlain = cargopack.Options{PlainTar: func(string) bool { return true }}

// hoOffset sets the archive_offset of rel.
func hoOffset(t testing.TB, m *manifest.Manifest, rel string, off int64) {
	hoEntry(t, m, rel).ArchiveOffset = &off
}

func hoFramesRows() []hoRow {
	allServed := []string{"a.txt", "b.bin", "dir/c.txt", "dir/e.txt", "z.txt"}
	return []hoRow{
		{name: "untampered framed archive is served", pack: hoFramed, serveKeys: allServed, wantKeys: allServed},
		{name: "untampered plain tar archive is served", pack: hoPlain, serveKeys: allServed},
		{name: "untampered stream zstd archive is served", serveKeys: allServed},
		{
			name: "frame claims 1 TiB (bomb claim): other frames served, memory bounded", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				ci := h.chunkOf(m, "z.txt")
				hoResize(m, ci, hoFrameAt(&m.Chunks[ci], *hoEntry(h.t, m, "z.txt").ArchiveOffset), 1<<40)
			},
			// Files outside the lying frame are served; z.txt is served
			// too (streamed, and verified by its sha256) or refused.
			serveKeys: []string{"a.txt", "b.bin"},
		},
		{
			name: "last frame claims 1 TiB", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				c := &m.Chunks[0]
				hoResize(m, 0, len(c.Frames)-1, 1<<40)
			},
			serveKeys: []string{"a.txt"},
		},
		{
			name: "zero bomb, frame honestly claims 1 GiB: read fails, bounded", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				h.hoBombChunk(m, 0, hoZeroBomb(1<<30), 1<<30)
			},
			failKeys: map[string][]error{"a.txt": {ErrWrongMember}, "b.bin": {ErrWrongMember}, "z.txt": {ErrWrongMember}},
		},
		{
			name: "zero bomb decodes to 1 GiB, frame claims the real tar length: decode stops at the claim", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				claim := m.Chunks[0].Frames[len(m.Chunks[0].Frames)-1].UncompressedOffset + m.Chunks[0].Frames[len(m.Chunks[0].Frames)-1].UncompressedSize
				h.hoBombChunk(m, 0, hoZeroBomb(1<<30), claim)
			},
			failKeys: map[string][]error{"a.txt": {ErrCorrupt}, "b.bin": {ErrCorrupt}, "z.txt": {ErrCorrupt}},
		},
		{
			name: "zero bomb as a giant frame whose claim is short of its 256 MiB", pack: hoFramed,
			opts: Options{MaxFrameBytes: 1 << 10},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				claim := m.Chunks[0].Frames[len(m.Chunks[0].Frames)-1].UncompressedOffset + m.Chunks[0].Frames[len(m.Chunks[0].Frames)-1].UncompressedSize
				h.hoBombChunk(m, 0, hoZeroBomb(256<<20), claim)
			},
			failKeys: map[string][]error{"a.txt": nil, "b.bin": nil, "z.txt": nil},
		},
		{
			name: "frame decodes to more than it claims", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				ci := h.chunkOf(m, "dir/c.txt")
				fi := hoFrameAt(&m.Chunks[ci], *hoEntry(h.t, m, "dir/c.txt").ArchiveOffset)
				hoResize(m, ci, fi, m.Chunks[ci].Frames[fi].UncompressedSize-700)
			},
			failFn: func(h *hoEnv, m *manifest.Manifest) map[string][]error {
				ci := h.chunkOf(m, "dir/c.txt")
				fi := hoFrameAt(&m.Chunks[ci], *hoEntry(h.t, m, "dir/c.txt").ArchiveOffset)
				return map[string][]error{"dir/c.txt": nil, hoKeysInFrame(m, ci, fi)[0]: nil}
			},
		},
		{
			name: "frame decodes to less than it claims", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				ci := h.chunkOf(m, "a.txt")
				hoResize(m, ci, 0, m.Chunks[ci].Frames[0].UncompressedSize+700)
			},
			failKeys: map[string][]error{"a.txt": {ErrCorrupt}},
		},
		{
			name: "frames overlap in the object (in order)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				f := m.Chunks[0].Frames
				f[1].CompressedOffset = f[0].CompressedOffset + f[0].CompressedSize/2
			},
			openErr: []error{manifest.ErrInvalid},
		},
		{
			name: "frames overlap in the object (listed in reverse)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				f := m.Chunks[0].Frames
				f[1].CompressedOffset = f[0].CompressedOffset + 1
				slices.Reverse(f)
			},
			openErr: []error{manifest.ErrInvalid},
		},
		{
			name: "frame offsets swapped between two frames (compressed order differs from uncompressed)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				f := m.Chunks[0].Frames
				f[0].CompressedOffset, f[1].CompressedOffset = f[1].CompressedOffset, f[0].CompressedOffset
			},
			openErr: []error{manifest.ErrInvalid},
		},
		{
			name: "frame past the real object end (compressed_size raised too)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				c := &m.Chunks[0]
				c.Frames[len(c.Frames)-1].CompressedOffset += 1 << 20
				c.CompressedSize += 1 << 20
			},
			failFn: func(h *hoEnv, m *manifest.Manifest) map[string][]error {
				c := &m.Chunks[0]
				out := map[string][]error{}
				for _, k := range hoKeysInFrame(m, 0, len(c.Frames)-1) {
					out[k] = []error{backend.ErrInvalidRange}
				}
				return out
			},
			serveKeys: []string{"a.txt"},
		},
		{
			// manifest.CheckFrames is the one frame-table rule: the
			// manifest's own validation refuses it now (ErrInvalid), as the
			// resolver did before (ErrInvalidTree).
			name: "frame past compressed_size", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				c := &m.Chunks[0]
				c.Frames[len(c.Frames)-1].CompressedOffset += 1 << 20
			},
			openErr: []error{manifest.ErrInvalid},
		},
		{
			name: "uncompressed spans not contiguous", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.Chunks[0].Frames[1].UncompressedOffset += 7
			},
			openErr: []error{manifest.ErrInvalid},
		},
		{
			name: "uncompressed spans overlap", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.Chunks[0].Frames[1].UncompressedOffset -= 7
			},
			openErr: []error{manifest.ErrInvalid},
		},
		{name: "frame compressed_size 0", pack: hoFramed,
			edit:    func(h *hoEnv, m *manifest.Manifest) { m.Chunks[0].Frames[0].CompressedSize = 0 },
			openErr: []error{manifest.ErrInvalid}},
		{name: "frame uncompressed_size 0", pack: hoFramed,
			edit:    func(h *hoEnv, m *manifest.Manifest) { m.Chunks[0].Frames[1].UncompressedSize = 0 },
			openErr: []error{manifest.ErrInvalid}},
		{name: "frame negative compressed_offset", pack: hoFramed,
			edit:    func(h *hoEnv, m *manifest.Manifest) { m.Chunks[0].Frames[0].CompressedOffset = -5 },
			openErr: []error{manifest.ErrInvalid}},
		{name: "frame negative uncompressed_size", pack: hoFramed,
			edit:    func(h *hoEnv, m *manifest.Manifest) { m.Chunks[0].Frames[0].UncompressedSize = -512 },
			openErr: []error{manifest.ErrInvalid}},
		{name: "frame sizes overflow int64", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				f := m.Chunks[0].Frames
				f[len(f)-1].UncompressedSize = 1<<63 - 1
			},
			openErr: []error{}},
		{name: "frame checksum not hex", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.Chunks[0].Frames[0].Checksum = "zz" + m.Chunks[0].Frames[0].Checksum[2:]
			},
			openErr: []error{manifest.ErrInvalid}},
		{name: "frame checksum of another frame", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.Chunks[0].Frames[0].Checksum = m.Chunks[0].Frames[1].Checksum
			},
			failKeys: map[string][]error{"a.txt": {ErrChecksum}}, partialFail: true},
		{name: "negative chunk compressed_size", pack: hoFramed,
			edit:    func(h *hoEnv, m *manifest.Manifest) { m.Chunks[0].CompressedSize = -1 },
			openErr: []error{manifest.ErrInvalid}},
	}
}

func hoOffsetRows() []hoRow {
	return []hoRow{
		{
			name: "archive_offset past the chunk end (framed)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				c := m.Chunks[0].Frames
				hoOffset(h.t, m, "a.txt", c[len(c)-1].UncompressedOffset+c[len(c)-1].UncompressedSize+100)
			},
			openErr: []error{manifest.ErrInvalid}, openHas: []string{"a.txt"},
		},
		{
			name: "archive_offset past the chunk end (plain tar)", pack: hoPlain,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoOffset(h.t, m, "a.txt", m.Chunks[0].CompressedSize+100)
			},
			failKeys: map[string][]error{"a.txt": {backend.ErrInvalidRange}}, partialFail: true,
			serveKeys: []string{"b.bin", "z.txt"},
		},
		{
			name: "archive_offset past the chunk end (stream zstd)",
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoOffset(h.t, m, "a.txt", 1<<20)
			},
			failKeys: map[string][]error{"a.txt": {ErrCorrupt}}, partialFail: true,
			serveKeys: []string{"b.bin", "z.txt"},
		},
		{
			name: "negative archive_offset", pack: hoFramed,
			edit:    func(h *hoEnv, m *manifest.Manifest) { hoOffset(h.t, m, "a.txt", -512) },
			openErr: []error{manifest.ErrInvalid},
		},
		{
			// z.txt is read after dir/e.txt (listing order), so the
			// header at z.txt's offset is checked against dir/e.txt
			// first; the other order is in hoIssue7Rows (bug 1).
			name: "archive_offset points at another member (framed)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoOffset(h.t, m, "dir/e.txt", *hoEntry(h.t, m, "z.txt").ArchiveOffset)
			},
			failKeys: map[string][]error{"dir/e.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.txt", "z.txt"},
		},
		{
			name: "archive_offset points at another member of the same size (plain tar)", pack: hoPlain,
			files: map[string][]byte{"a.txt": hoText(1, 3000), "b.txt": hoText(2, 3000), "c.txt": hoText(3, 3000)},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				// b.txt keeps its sha256 (without it: hoIssue7Rows,
				// bug 1).
				hoOffset(h.t, m, "b.txt", *hoEntry(h.t, m, "c.txt").ArchiveOffset)
			},
			failKeys: map[string][]error{"b.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.txt", "c.txt"},
		},
		{
			name: "archive_offset points into a header (framed)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoOffset(h.t, m, "z.txt", *hoEntry(h.t, m, "z.txt").ArchiveOffset-200)
			},
			failKeys: map[string][]error{"z.txt": {ErrWrongMember}}, partialFail: true,
		},
		{
			name: "archive_offset points into a header (plain tar, no checksum)", pack: hoPlain,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				fe := hoEntry(h.t, m, "z.txt")
				hoOffset(h.t, m, "z.txt", *fe.ArchiveOffset-512)
				fe.Checksum = ""
			},
			failKeys: map[string][]error{"z.txt": {ErrWrongMember}}, partialFail: true,
		},
		{
			name: "archive_offset one byte off (stream zstd, no checksum)",
			edit: func(h *hoEnv, m *manifest.Manifest) {
				fe := hoEntry(h.t, m, "z.txt")
				hoOffset(h.t, m, "z.txt", *fe.ArchiveOffset+1)
				fe.Checksum = ""
			},
			failKeys: map[string][]error{"z.txt": {ErrWrongMember}}, partialFail: true,
		},
		{
			name: "size smaller than the tar header says (no checksum)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				fe := hoEntry(h.t, m, "z.txt")
				fe.Size--
				fe.Checksum = ""
			},
			failKeys: map[string][]error{"z.txt": {ErrWrongMember}}, partialFail: true,
		},
		{
			name: "size larger than the tar header says (plain tar)", pack: hoPlain,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Size += 10
			},
			failKeys: map[string][]error{"a.txt": {ErrWrongMember}}, partialFail: true,
		},
		{
			name: "size disagrees with the tar header, no archive_offset (tar walk)", pack: hoPlain,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				fe := hoEntry(h.t, m, "a.txt")
				fe.ArchiveOffset = nil
				fe.Size -= 10
				fe.Checksum = ""
			},
			failKeys: map[string][]error{"a.txt": nil}, partialFail: true,
		},
		{
			name: "archive_offset absent: tar walk finds every member", pack: hoPlain,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				for i := range m.Files {
					m.Files[i].ArchiveOffset = nil
				}
			},
			serveKeys: []string{"a.txt", "b.bin", "dir/c.txt", "dir/e.txt", "z.txt"},
		},
		{
			name: "archive_offset absent and path names no member", pack: hoPlain,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				fe := hoEntry(h.t, m, "a.txt")
				fe.ArchiveOffset = nil
				fe.Path = strings.TrimSuffix(fe.Path, "a.txt") + "ghost.txt"
			},
			failKeys: map[string][]error{"ghost.txt": {ErrNotInChunk}},
		},
	}
}

func hoCountRows() []hoRow {
	long := strings.Repeat("d/", 100) + "f.txt"
	return []hoRow{
		{name: "more files than MaxFiles", opts: Options{Limits: manifest.Limits{MaxFiles: 4}},
			openErr: []error{manifest.ErrTooLarge}},
		{name: "exactly MaxFiles", opts: Options{Limits: manifest.Limits{MaxFiles: 5}},
			serveKeys: []string{"a.txt"}},
		{name: "more chunks than MaxChunks", pack: cargopack.Options{ChunkSize: 4000},
			opts: Options{Limits: manifest.Limits{MaxChunks: 2}}, openErr: []error{manifest.ErrTooLarge}},
		{name: "more frames than MaxFrames", pack: hoFramed, opts: Options{Limits: manifest.Limits{MaxFrames: 2}},
			openErr: []error{manifest.ErrTooLarge}},
		{name: "deep path (100 segments) is served", files: map[string][]byte{long: hoText(9, 1000), "x": hoText(8, 10)},
			pack: hoFramed, serveKeys: []string{long, "x"}},
		{name: "deep path over MaxPathBytes", files: map[string][]byte{long: hoText(9, 1000)},
			pack: hoFramed, opts: Options{Limits: manifest.Limits{MaxPathBytes: 150}},
			openErr: []error{manifest.ErrInvalid}},
		{name: "64 KiB path over the default MaxPathBytes", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = m.SourcePath + "/" + strings.Repeat("x", 64<<10)
			},
			openErr: []error{manifest.ErrInvalid}},
		{name: "version 3.0", edit: func(h *hoEnv, m *manifest.Manifest) { m.Version = "3.0" },
			openErr: []error{manifest.ErrVersion}},
		{name: "version banana", edit: func(h *hoEnv, m *manifest.Manifest) { m.Version = "banana" },
			openErr: []error{manifest.ErrVersion}},
		{name: "version empty", edit: func(h *hoEnv, m *manifest.Manifest) { m.Version = "" },
			openErr: []error{manifest.ErrVersion}},
		{name: "version 0.9", edit: func(h *hoEnv, m *manifest.Manifest) { m.Version = "0.9" },
			openErr: []error{manifest.ErrVersion}},
		{name: "encrypted wrapper stored under manifest.json.gz", pack: cargopack.Options{EncryptedManifest: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				data, err := os.ReadFile(h.objPath(h.mkey))
				if err != nil {
					h.t.Fatal(err)
				}
				h.mkey = strings.Replace(h.mkey, "manifest.encrypted.json.gz", "manifest.json.gz", 1)
				if err := os.WriteFile(h.objPath(h.mkey), data, 0o644); err != nil {
					h.t.Fatal(err)
				}
			},
			openErr: []error{manifest.ErrEncrypted}},
		{name: "manifest is an empty object", disk: hoRawManifest(nil), openErr: []error{manifest.ErrInvalid}},
		{name: "manifest is JSON null", disk: hoRawManifest([]byte("null")), openErr: []error{}},
		{name: "manifest is a JSON array", disk: hoRawManifest([]byte("[1,2,3]")), openErr: []error{manifest.ErrInvalid}},
		{name: "manifest JSON truncated", disk: hoRawManifest([]byte(`{"version":"2.1","files":[{"path":"a`)), openErr: []error{manifest.ErrInvalid}},
		{name: "manifest gzip truncated",
			disk: func(h *hoEnv, m *manifest.Manifest) {
				p := h.objPath(h.mkey)
				st, _ := os.Stat(p)
				if err := os.Truncate(p, st.Size()/2); err != nil {
					h.t.Fatal(err)
				}
			},
			openErr: []error{manifest.ErrInvalid}},
		{name: "manifest with deeply nested JSON", disk: hoRawManifest([]byte(`{"version":"2.1","x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`)),
			openErr: []error{}},
		{name: "encrypted manifest wrapper", pack: cargopack.Options{EncryptedManifest: true},
			openErr: []error{manifest.ErrEncrypted}},
		{name: "encrypted manifest wrapper (plain json)", pack: cargopack.Options{EncryptedManifest: true, PlainManifest: true},
			openErr: []error{manifest.ErrEncrypted}},
	}
}

// hoRawManifest stores data (gzipped) as the manifest object; nil stores
// an empty object.
func hoRawManifest(data []byte) func(h *hoEnv, m *manifest.Manifest) {
	return func(h *hoEnv, m *manifest.Manifest) {
		if data == nil {
			if err := os.WriteFile(h.objPath(h.mkey), nil, 0o644); err != nil {
				h.t.Fatal(err)
			}
			return
		}
		h.putJSON(h.mkey, data)
	}
}

// hoPathRow rewrites a.txt's path to p and expects an Open error, or
// (mayRefuse) a served-or-failed read under a safe key.
func hoPathRow(name, p string, openErr []error, alias map[string]string) hoRow {
	return hoRow{
		name: "path " + name, pack: hoFramed,
		edit: func(h *hoEnv, m *manifest.Manifest) {
			hoEntry(h.t, m, "a.txt").Path = strings.ReplaceAll(p, "$S", m.SourcePath)
		},
		openErr: openErr,
		alias:   alias,
	}
}

func hoPathRows() []hoRow {
	rows := []hoRow{
		hoPathRow(`".."`, "..", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow(`"a/../../etc/passwd"`, "a/../../etc/passwd", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow(`"$S/../../etc/passwd"`, "$S/../../etc/passwd", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow(`"$S/dir/../../x"`, "$S/dir/../../x", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow(`"..\\..\\x" (backslashes)`, `..\..\x`, []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow("with NUL", "$S/a\x00.txt", []error{manifest.ErrInvalid}, nil),
		hoPathRow("with a control character", "$S/a\x01.txt", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow("with DEL", "$S/a\x7f.txt", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow("with a newline", "$S/a\n.txt", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow("empty", "", []error{manifest.ErrInvalid}, nil),
		hoPathRow(`"/" only`, "/", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow("equal to source_path with slash", "$S/", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		{
			// A single-file upload's path equals source_path: the key is
			// the base name; the tar member is named otherwise here.
			name: "path equal to source_path", pack: hoFramed,
			edit:     func(h *hoEnv, m *manifest.Manifest) { hoEntry(h.t, m, "a.txt").Path = m.SourcePath },
			failKeys: map[string][]error{"src": {ErrWrongMember}},
		},
		{
			// Absolute, outside source_path: served under "etc/passwd" at
			// most, never above the bucket; the tar member is named
			// otherwise, so the read is refused.
			name: "path absolute outside source_path", pack: hoFramed,
			edit:      func(h *hoEnv, m *manifest.Manifest) { hoEntry(h.t, m, "a.txt").Path = "/etc/passwd" },
			failKeys:  map[string][]error{"etc/passwd": {ErrWrongMember}},
			serveKeys: []string{"b.bin"},
		},
		{
			name: `path "C:\x" (Windows volume)`, pack: hoFramed,
			edit:      func(h *hoEnv, m *manifest.Manifest) { hoEntry(h.t, m, "a.txt").Path = `C:\x` },
			failKeys:  map[string][]error{"x": {ErrWrongMember}},
			serveKeys: []string{"b.bin"},
		},
		{
			name: "path with Windows separators under source_path", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = strings.ReplaceAll(m.SourcePath+"/sub/a.txt", "/", `\`)
			},
			alias: map[string]string{"sub/a.txt": "a.txt"},
		},
		{
			name: "paths collide after sanitizing (./)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = m.SourcePath + "/./z.txt"
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"z.txt"},
		},
		{
			name: "paths collide after sanitizing (// and backslash)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = m.SourcePath + `\dir//e.txt`
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"dir/e.txt"},
		},
		{
			name: "paths collide: absolute outside source and relative", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = "/z.txt"
			},
			openErr: []error{ErrInvalidTree},
		},
		{
			name: "same path listed twice", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = hoEntry(h.t, m, "z.txt").Path
			},
			openErr: []error{ErrInvalidTree},
		},
		{
			name: "source_path is / and paths are relative traversals", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.SourcePath = "/"
				hoEntry(h.t, m, "a.txt").Path = "/../a.txt"
			},
			openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath},
		},
		{
			name: "source_path with traversal does not lift keys", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.SourcePath = "/cargopack/src/../../.."
			},
			mayRefuse: true,
			alias: map[string]string{"cargopack/src/a.txt": "a.txt", "cargopack/src/b.bin": "b.bin",
				"cargopack/src/dir/c.txt": "dir/c.txt", "cargopack/src/dir/e.txt": "dir/e.txt", "cargopack/src/z.txt": "z.txt"},
			serveKeys: []string{"cargopack/src/a.txt", "cargopack/src/z.txt"},
		},
		{
			name: "deleted_paths with traversal", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.DeletedPaths = []string{"../../etc/passwd"}
			},
			openErr: []error{ErrInvalidTree},
		},
		{
			name: "chunk s3_key escapes the bucket directory", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				old := m.Chunks[0].S3Key
				m.Chunks[0].S3Key = "../../../../../../../../etc/passwd.tar.zst"
				for i := range m.Files {
					if m.Files[i].S3Key == old {
						m.Files[i].S3Key = m.Chunks[0].S3Key
					}
				}
			},
			openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath},
		},
		{
			name: "direct object s3_key escapes the bucket directory", pack: cargopack.Options{Direct: true},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").S3Key = "../../../../../../../../etc/hostname"
			},
			openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath}, openHas: []string{"a.txt"},
		},
		{
			name: "prefix with traversal", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.Prefix = "../../../../../../.."
			},
			openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath},
		},
		{
			name: "s3_key as URL of another bucket", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				old := m.Chunks[0].S3Key
				m.Chunks[0].S3Key = "s3://other-bucket/../../x/chunk.tar.zst"
				for i := range m.Files {
					if m.Files[i].S3Key == old {
						m.Files[i].S3Key = m.Chunks[0].S3Key
					}
				}
			},
			openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath},
		},
	}
	return rows
}

// hoRawPathRows put raw bytes (invalid UTF-8, \u escapes) into the JSON.
func hoRawPathRows() []hoRow {
	mk := func(name, raw string, openErr []error, alias map[string]string) hoRow {
		return hoRow{
			name: "raw JSON path " + name, pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = "@@PLACEHOLDER@@"
			},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				js, err := json.Marshal(m)
				if err != nil {
					h.t.Fatal(err)
				}
				js = bytes.Replace(js, []byte("@@PLACEHOLDER@@"), []byte(strings.ReplaceAll(raw, "$S", m.SourcePath)), 1)
				h.putJSON(h.mkey, js)
			},
			openErr:   openErr,
			alias:     alias,
			mayRefuse: openErr == nil && alias == nil,
		}
	}
	return []hoRow{
		// encoding/json semantics: invalid UTF-8 becomes U+FFFD, so the
		// key is valid UTF-8. The entry is still a.txt's (its tar name
		// matches after Go's PAX ASCII folding), so serving a.txt's
		// verified bytes under the U+FFFD key is correct.
		mk("invalid UTF-8 bytes", "$S/a\xff\xfe.txt", nil, map[string]string{"a\ufffd\ufffd.txt": "a.txt"}),
		mk(`\u0000 escape`, `$S/a\u0000.txt`, []error{manifest.ErrInvalid}, nil),
		mk(`\u0001 escape`, `$S/a\u0001.txt`, []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		mk(`lone surrogate \ud800`, `$S/a\ud800.txt`, nil, map[string]string{"a\ufffd.txt": "a.txt"}),
		mk(`\u002e\u002e traversal`, `$S/\u002e\u002e/\u002e\u002e/etc/passwd`, []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		mk(`\u002f escaped slashes`, `\u002fcargopack\u002fsrc\u002fsub\u002fa.txt`, nil, map[string]string{"sub/a.txt": "a.txt"}),
	}
}

// hoDupFiles: the base files plus dup.txt, a copy of a.txt.
func hoDupFiles() map[string][]byte {
	f := hoBaseFiles()
	f["dup.txt"] = f["a.txt"]
	return f
}

func hoDupSplitRows() []hoRow {
	dupFiles := hoDupFiles
	splitFiles := map[string][]byte{"big.bin": hoRandom(7, 40000), "small.txt": hoText(8, 900)}
	split := cargopack.Options{FrameSize: 16 << 10, SplitSize: 12000}
	parts := func(m *manifest.Manifest) []int {
		var out []int
		for i := range m.Files {
			if strings.HasSuffix(m.Files[i].Path, "/big.bin") {
				out = append(out, i)
			}
		}
		slices.SortFunc(out, func(a, b int) int { return m.Files[a].PartIndex - m.Files[b].PartIndex })
		return out
	}
	return []hoRow{
		{name: "dedup untampered is served", files: dupFiles(), pack: cargopack.Options{FrameSize: 16 << 10, Dedup: true},
			serveKeys: []string{"a.txt", "dup.txt"}},
		{
			name: "duplicate whose original is missing", files: dupFiles(), pack: cargopack.Options{FrameSize: 16 << 10, Dedup: true},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.Files = slices.DeleteFunc(m.Files, func(fe manifest.FileEntry) bool { return strings.HasSuffix(fe.Path, "/a.txt") })
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"dup.txt"},
		},
		{
			name: "duplicate whose original's checksum differs", files: dupFiles(), pack: cargopack.Options{FrameSize: 16 << 10, Dedup: true},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				fe := hoEntry(h.t, m, "a.txt")
				fe.Checksum = strings.Repeat("0", 64)
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"dup.txt"},
		},
		{
			name: "duplicate that lies about its size", files: dupFiles(), pack: cargopack.Options{FrameSize: 16 << 10, Dedup: true},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "dup.txt").Size += 100
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"dup.txt"},
		},
		{
			name: "unpatched duplicate (s3_key \"\", chunk_id -1)", files: dupFiles(),
			pack:    cargopack.Options{FrameSize: 16 << 10, Dedup: true, DedupUnpatched: true},
			openErr: []error{ErrInvalidTree}, openHas: []string{"dup.txt"},
		},
		{name: "split untampered is served", files: splitFiles, pack: split, serveKeys: []string{"big.bin", "small.txt"}},
		{
			name: "split file with a missing part", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files = slices.Delete(m.Files, p[1], p[1]+1)
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"big.bin"},
		},
		{
			name: "split file with overlapping parts", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[2]].Offset -= 100
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"big.bin"},
		},
		{
			name: "split file with a gap between parts", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[1]].Length -= 100
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"big.bin"},
		},
		{
			name: "split file with a part beyond size", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[len(p)-1]].Length += 100
			},
			openErr: []error{}, openHas: []string{"big.bin"},
		},
		{
			name: "split file with a repeated part index", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[2]].PartIndex = 1
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"big.bin"},
		},
		{
			name: "split parts swapped (offsets follow, tar names do not)", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				a, b := &m.Files[p[0]], &m.Files[p[1]]
				a.S3Key, b.S3Key = b.S3Key, a.S3Key
				a.ArchiveOffset, b.ArchiveOffset = b.ArchiveOffset, a.ArchiveOffset
				a.ChunkID, b.ChunkID = b.ChunkID, a.ChunkID
				a.ShardID, b.ShardID = b.ShardID, a.ShardID
			},
			failKeys: map[string][]error{"big.bin": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"small.txt"},
		},
		{
			name: "split total_parts disagree", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[1]].TotalParts++
			},
			openErr: []error{}, openHas: []string{"big.bin"},
		},
		{
			name: "split part checksum wrong", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[1]].Checksum = strings.Repeat("ab", 32)
			},
			failKeys: map[string][]error{"big.bin": {ErrChecksum}},
		},
	}
}

func hoObjectRows() []hoRow {
	return []hoRow{
		{
			name: "chunk object missing", pack: hoFramed,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				if err := os.Remove(h.objPath(h.chunkKey(m, 0))); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"a.txt": {backend.ErrNotFound}, "z.txt": {backend.ErrNotFound}}, partialFail: true,
		},
		{
			name: "framed chunk truncated to half", pack: hoFramed,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				p := h.objPath(h.chunkKey(m, 0))
				st, _ := os.Stat(p)
				if err := os.Truncate(p, st.Size()/2); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"z.txt": nil}, partialFail: true, serveKeys: []string{"a.txt"},
		},
		{
			name: "framed chunk zero-length", pack: hoFramed,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				if err := os.Truncate(h.objPath(h.chunkKey(m, 0)), 0); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"a.txt": nil, "b.bin": nil, "dir/c.txt": nil, "dir/e.txt": nil, "z.txt": nil}, partialFail: true,
		},
		{
			name: "plain tar chunk truncated (last member cut)", pack: hoPlain,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				off := *hoEntry(h.t, m, "z.txt").ArchiveOffset
				if err := os.Truncate(h.objPath(h.chunkKey(m, 0)), off+100); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"z.txt": nil}, serveKeys: []string{"a.txt"},
		},
		{
			name: "plain tar chunk zero-length", pack: hoPlain,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				if err := os.Truncate(h.objPath(h.chunkKey(m, 0)), 0); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"a.txt": nil, "z.txt": nil}, partialFail: true,
		},
		{
			name: "stream zstd chunk truncated",
			disk: func(h *hoEnv, m *manifest.Manifest) {
				p := h.objPath(h.chunkKey(m, 0))
				st, _ := os.Stat(p)
				if err := os.Truncate(p, st.Size()-20); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"z.txt": nil},
		},
		{
			name: "stream zstd chunk zero-length",
			disk: func(h *hoEnv, m *manifest.Manifest) {
				if err := os.Truncate(h.objPath(h.chunkKey(m, 0)), 0); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"a.txt": nil, "z.txt": nil}, partialFail: true,
		},
		{
			name: "plain tar with a flipped byte in a member's data", pack: hoPlain,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				off := *hoEntry(h.t, m, "b.bin").ArchiveOffset + 20000 // b.bin's middle
				hoFlip(h.t, h.objPath(h.chunkKey(m, 0)), off)
			},
			failKeys: map[string][]error{"b.bin": {ErrChecksum}}, partialFail: true,
			serveKeys: []string{"a.txt", "z.txt"},
		},
		{
			name: "plain tar with a flipped byte in a member's header", pack: hoPlain,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				off := *hoEntry(h.t, m, "z.txt").ArchiveOffset - 512 + 3 // in the name field
				hoFlip(h.t, h.objPath(h.chunkKey(m, 0)), off)
			},
			failKeys: map[string][]error{"z.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.txt"},
		},
		{
			name: "framed chunk with a flipped byte", pack: hoFramed,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				f := m.Chunks[0].Frames[0]
				hoFlip(h.t, h.objPath(h.chunkKey(m, 0)), f.CompressedOffset+f.CompressedSize/2)
			},
			failKeys: map[string][]error{"a.txt": {ErrChecksum}}, partialFail: true,
		},
		{
			name: "stream zstd chunk with a flipped byte",
			disk: func(h *hoEnv, m *manifest.Manifest) {
				p := h.objPath(h.chunkKey(m, 0))
				st, _ := os.Stat(p)
				hoFlip(h.t, p, st.Size()/2)
			},
			failKeys: map[string][]error{"z.txt": nil},
		},
		{
			name: "plain tar member retyped to a symlink (header checksum fixed)", pack: hoPlain,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				off := *hoEntry(h.t, m, "z.txt").ArchiveOffset - 512
				hoEditHeader(h.t, h.objPath(h.chunkKey(m, 0)), off, func(hdr []byte) { hdr[156] = '2' })
			},
			failKeys: map[string][]error{"z.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.txt"},
		},
		{
			name: "plain tar member retyped to a symlink, no archive_offset (tar walk)", pack: cargopack.Options{PlainTar: hoPlain.PlainTar, Pre492: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				// Pre492 manifests carry no offsets: find z.txt's header
				// in the object by its name field.
				p := h.objPath(h.chunkKey(m, 0))
				data, err := os.ReadFile(p)
				if err != nil {
					h.t.Fatal(err)
				}
				name := hoEntry(h.t, m, "z.txt").Path
				off := int64(-1)
				for o := 0; o+512 <= len(data); o += 512 {
					if string(bytes.TrimRight(data[o:o+100], "\x00")) == name {
						off = int64(o)
					}
				}
				if off < 0 {
					h.t.Fatalf("no header named %s", name)
				}
				hoEditHeader(h.t, p, off, func(hdr []byte) { hdr[156] = '2' })
			},
			// archive/tar treats a symlink as header-only, so the walk
			// then hits z.txt's data as a header: the whole chunk is
			// refused (a.txt may be too, before or after the walk).
			failKeys: map[string][]error{"z.txt": {ErrCorrupt}}, partialFail: true,
		},
		{
			name: "plain tar member size field changed (header checksum fixed)", pack: hoPlain,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				off := *hoEntry(h.t, m, "a.txt").ArchiveOffset - 512
				hoEditHeader(h.t, h.objPath(h.chunkKey(m, 0)), off, func(hdr []byte) {
					copy(hdr[124:136], fmt.Sprintf("%011o\x00", 2999))
				})
			},
			failKeys: map[string][]error{"a.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"z.txt"},
		},
		{
			name: "stream zstd chunk replaced by a 256 MiB zero bomb",
			disk: func(h *hoEnv, m *manifest.Manifest) {
				if err := os.WriteFile(h.objPath(h.chunkKey(m, 0)), hoZeroBomb(256<<20), 0o644); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"a.txt": nil, "z.txt": nil}, partialFail: true,
		},
		{
			// 64 MiB here; the 1 GiB version is in hoIssue7Rows
			// (bug 7).
			name: "stream zstd chunk, no offsets, replaced by a 64 MiB zero bomb (tar walk)", pack: cargopack.Options{Pre492: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				if err := os.WriteFile(h.objPath(h.chunkKey(m, 0)), hoZeroBomb(64<<20), 0o644); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"a.txt": nil, "z.txt": nil}, partialFail: true,
		},
		{
			name: "framed chunk: frame header declares a 1 TiB content size (window > decoder limit)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				// FHD 0xE0: single segment, 8-byte content size, so
				// the window is the content size: 1 TiB.
				b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 0, 1, 0, 0}
				hdr := uint32(1) | uint32(1<<1) | uint32(128<<10)<<3
				b = append(b, byte(hdr), byte(hdr>>8), byte(hdr>>16), 0)
				claim := m.Chunks[0].Frames[len(m.Chunks[0].Frames)-1].UncompressedOffset + m.Chunks[0].Frames[len(m.Chunks[0].Frames)-1].UncompressedSize
				h.hoBombChunk(m, 0, b, claim)
			},
			failKeys: map[string][]error{"a.txt": {ErrCorrupt}, "z.txt": {ErrCorrupt}}, partialFail: true,
		},
		{
			name: "direct object shorter than its manifest size", pack: cargopack.Options{Direct: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				p := h.objPath(manifest.ResolveObjectKey(h.bucket, m.Prefix, hoEntry(h.t, m, "b.bin").S3Key))
				if err := os.Truncate(p, 39000); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"b.bin": nil}, serveKeys: []string{"a.txt"},
		},
		{
			name: "direct object longer than its manifest size", pack: cargopack.Options{Direct: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				p := h.objPath(manifest.ResolveObjectKey(h.bucket, m.Prefix, hoEntry(h.t, m, "b.bin").S3Key))
				f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					h.t.Fatal(err)
				}
				f.Write([]byte("trailing garbage"))
				f.Close()
			},
			// The object is not the file: refused, even where the
			// bytes read would match (see also the FuzzHostileManifest
			// seed 88bb7a1d02157628: a chunk renamed away turned its
			// object into a "direct" split part with no checksum).
			failKeys: map[string][]error{"b.bin": {ErrCorrupt}}, partialFail: true,
			serveKeys: []string{"a.txt"},
		},
		{
			name: "direct object with a flipped byte", pack: cargopack.Options{Direct: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				hoFlip(h.t, h.objPath(manifest.ResolveObjectKey(h.bucket, m.Prefix, hoEntry(h.t, m, "b.bin").S3Key)), 20000)
			},
			failKeys: map[string][]error{"b.bin": {ErrChecksum}}, partialFail: true, serveKeys: []string{"a.txt"},
		},
		{
			name: "direct object missing", pack: cargopack.Options{Direct: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				if err := os.Remove(h.objPath(manifest.ResolveObjectKey(h.bucket, m.Prefix, hoEntry(h.t, m, "b.bin").S3Key))); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"b.bin": {backend.ErrNotFound}}, partialFail: true, serveKeys: []string{"a.txt"},
		},
		{
			name: "framed .tar.zst named .tar", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				h.hoRenameChunk(m, 0, ".tar.zst", ".tar")
			},
			openErr: []error{ErrInvalidTree},
		},
		{
			name: "stream .tar.zst named .tar",
			edit: func(h *hoEnv, m *manifest.Manifest) {
				h.hoRenameChunk(m, 0, ".tar.zst", ".tar")
				for i := range m.Chunks {
					m.Chunks[i].Checksum = "" // only the tar header check is left
				}
			},
			failKeys: map[string][]error{"a.txt": nil, "b.bin": nil, "z.txt": nil}, partialFail: true,
		},
		{
			name: "plain .tar named .tar.zst", pack: hoPlain,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				h.hoRenameChunk(m, 0, ".tar", ".tar.zst")
			},
			failKeys: map[string][]error{"a.txt": {ErrCorrupt}, "b.bin": nil, "z.txt": nil}, partialFail: true,
		},
		{
			name: "chunk replaced by a different valid archive after Open", pack: hoFramed,
			opts: Options{Readahead: -1},
			afterOpen: func(t *testing.T, h *hoEnv, m *manifest.Manifest, a *Archive) {
				f, _ := a.Stat("a.txt")
				if r := hoRead(context.Background(), a, f, 0, f.Size, true); r.err != nil || !bytes.Equal(r.got, h.files["a.txt"]) {
					t.Fatalf("first read of a.txt: %v", r.err)
				}
				other := hoPack(t, t.TempDir(), map[string][]byte{"a.txt": hoText(77, 3000), "b.bin": hoRandom(78, 70000)}, hoFramed)
				data, err := os.ReadFile(other.objPath(other.res.ObjectKeys[0]))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(h.objPath(h.chunkKey(m, 0)), data, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"z.txt": {backend.ErrChanged}, "b.bin": {backend.ErrChanged}},
		},
		{
			name: "chunk replaced by a different valid archive before Open", pack: hoFramed,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				other := hoPack(h.t, h.t.(*testing.T).TempDir(), map[string][]byte{"a.txt": hoText(77, 3000), "b.bin": hoRandom(78, 70000)}, hoFramed)
				data, err := os.ReadFile(other.objPath(other.res.ObjectKeys[0]))
				if err != nil {
					h.t.Fatal(err)
				}
				if err := os.WriteFile(h.objPath(h.chunkKey(m, 0)), data, 0o644); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"a.txt": {ErrChecksum}, "z.txt": nil}, partialFail: true,
		},
		{
			name: "chunk object is a directory", pack: hoFramed,
			disk: func(h *hoEnv, m *manifest.Manifest) {
				p := h.objPath(h.chunkKey(m, 0))
				if err := os.Remove(p); err != nil {
					h.t.Fatal(err)
				}
				if err := os.Mkdir(p, 0o755); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"a.txt": nil, "z.txt": nil}, partialFail: true,
		},
	}
}

// hoEditHeader rewrites the 512-byte ustar header at off of the plain tar
// object at p with edit, then recomputes its checksum field, so that only
// the semantic change remains (as a hostile writer would produce).
func hoEditHeader(t testing.TB, p string, off int64, edit func(hdr []byte)) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := make([]byte, 512)
	if _, err := f.ReadAt(hdr, off); err != nil {
		t.Fatal(err)
	}
	edit(hdr)
	copy(hdr[148:156], "        ")
	var sum int64
	for _, b := range hdr {
		sum += int64(b)
	}
	copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
	if _, err := f.WriteAt(hdr, off); err != nil {
		t.Fatal(err)
	}
}

// hoFlip XORs 0xFF into the byte at off of the file at p.
func hoFlip(t testing.TB, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestHostileArchives(t *testing.T) {
	groups := []struct {
		name string
		rows []hoRow
	}{
		{"frames", hoFramesRows()},
		{"offsets", hoOffsetRows()},
		{"counts", hoCountRows()},
		{"paths", hoPathRows()},
		{"rawpaths", hoRawPathRows()},
		{"dupsplit", hoDupSplitRows()},
		{"objects", hoObjectRows()},
		{"issue7", hoIssue7Rows()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, row := range g.rows {
				t.Run(row.name, row.run)
			}
		})
	}
}

// TestHostileJSONSize: just over MaxJSONBytes is refused, exactly at it
// opens (the limit is on the gunzipped JSON).
func TestHostileJSONSize(t *testing.T) {
	h := hoPack(t, t.TempDir(), hoBaseFiles(), hoFramed)
	m := h.manifest()
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	h.putJSON(h.mkey, js)
	n := int64(len(js))
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{n, true}, {n - 1, false}, {n / 2, false}} {
		fs := backend.NewFaulty(backend.NewFileStore(h.dir), backend.FaultConfig{})
		a, err := Open(context.Background(), fs, h.bucket, h.mkey, Options{Name: hoName, Limits: manifest.Limits{MaxJSONBytes: tc.limit}})
		switch {
		case tc.ok && err != nil:
			t.Errorf("limit %d (JSON %d bytes): %v", tc.limit, n, err)
		case !tc.ok && err == nil:
			t.Errorf("limit %d (JSON %d bytes): opened", tc.limit, n)
		case !tc.ok && (!errors.Is(err, manifest.ErrTooLarge) || !strings.Contains(err.Error(), h.mkey)):
			t.Errorf("limit %d: error %v does not wrap ErrTooLarge or name %s", tc.limit, err, h.mkey)
		}
		if a != nil {
			a.Close()
		}
		hoCheckRequests(t, fs)
	}
	// A gzip bomb: 64 MiB of spaces in front of the JSON, gzipped to
	// ~64 KiB, against a 1 MiB JSON limit: refused without inflating it all.
	pad := bytes.Repeat([]byte(" "), 64<<20)
	h.putJSON(h.mkey, append(pad, js...))
	runtime.GC()
	a0 := hoTotalAlloc()
	_, err = Open(context.Background(), backend.NewFileStore(h.dir), h.bucket, h.mkey, Options{Name: hoName, Limits: manifest.Limits{MaxJSONBytes: 1 << 20}})
	if !errors.Is(err, manifest.ErrTooLarge) {
		t.Errorf("gzip bomb: %v, want ErrTooLarge", err)
	}
	if d := hoTotalAlloc() - a0; d > 32<<20 {
		t.Errorf("gzip bomb: Open allocated %d bytes", d)
	}
}

// TestHostile100kManifestOpens: a manifest of 100,000 entries (direct
// objects, which Open never touches) opens and lists within seconds.
func TestHostile100kManifestOpens(t *testing.T) {
	h := hoPack(t, t.TempDir(), map[string][]byte{"a.txt": hoText(1, 100)}, cargopack.Options{Direct: true})
	m := h.manifest()
	proto := m.Files[0]
	const n = 100_000
	m.Files = make([]manifest.FileEntry, n)
	for i := range m.Files {
		fe := proto
		rel := fmt.Sprintf("d%03d/f%06d.txt", i%512, i)
		fe.Path = m.SourcePath + "/" + rel
		fe.S3Key = path.Dir(proto.S3Key) + "/" + rel
		m.Files[i] = fe
	}
	m.TotalFiles = n
	h.putManifest(m)
	start := time.Now()
	a, err := Open(context.Background(), backend.NewFileStore(h.dir), h.bucket, h.mkey, Options{Name: hoName})
	el := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Files() != n {
		t.Fatalf("Files() = %d, want %d", a.Files(), n)
	}
	if k := len(hoAllKeysFast(a)); k != n {
		t.Fatalf("listed %d keys", k)
	}
	t.Logf("100k-entry manifest: Open %v, Open+List %v", el, time.Since(start))
	if el > 4*time.Second {
		t.Errorf("Open of a 100k-entry manifest took %v", el)
	}
}

func hoAllKeysFast(a *Archive) []string {
	var out []string
	p := ListParams{MaxKeys: 1000}
	for {
		res := a.List(p)
		for _, e := range res.Entries {
			out = append(out, e.Name())
		}
		if !res.Truncated {
			return out
		}
		p.After = res.NextAfter
	}
}

// hoChainPack writes upload id with previous prev into dir.
func hoChainPack(t *testing.T, dir, id, prev string, files map[string][]byte) *hoEnv {
	return hoPack(t, dir, files, cargopack.Options{FrameSize: 16 << 10, UploadID: id, PreviousManifestID: prev, SyncType: "incremental"})
}

func TestHostileChains(t *testing.T) {
	f1 := map[string][]byte{"a.txt": hoText(1, 500)}
	f2 := map[string][]byte{"b.txt": hoText(2, 500)}
	cases := []struct {
		name  string
		build func(t *testing.T, dir string) *hoEnv
		lim   manifest.Limits
		ok    []string // keys served (nil: Open must fail with ErrBrokenChain)
		has   []string
	}{
		{name: "cycle A->B->A", build: func(t *testing.T, dir string) *hoEnv {
			hoChainPack(t, dir, "20250304-bbbbbbbb", "20250304-aaaaaaaa", f2)
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-bbbbbbbb", f1)
		}, has: []string{"20250304-aaaaaaaa", "cycle"}},
		{name: "self reference", build: func(t *testing.T, dir string) *hoEnv {
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-aaaaaaaa", f1)
		}, has: []string{"cycle"}},
		{name: "missing ancestor", build: func(t *testing.T, dir string) *hoEnv {
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-deadbeef", f1)
		}, has: []string{"20250304-deadbeef"}},
		{name: "ancestor with traversal id", build: func(t *testing.T, dir string) *hoEnv {
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "../../../../etc", f1)
		}, has: []string{"../../../../etc"}},
		{name: "ancestor is another upload's manifest", build: func(t *testing.T, dir string) *hoEnv {
			// B's manifest is stored where C would be: upload_id disagrees.
			b := hoChainPack(t, dir, "20250304-bbbbbbbb", "", f2)
			cKey := strings.Replace(b.mkey, "20250304-bbbbbbbb", "20250304-cccccccc", 1)
			if err := os.MkdirAll(filepath.Dir(b.objPath(cKey)), 0o755); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(b.objPath(b.mkey))
			os.WriteFile(b.objPath(cKey), data, 0o644)
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-cccccccc", f1)
		}, has: []string{"20250304-cccccccc"}},
		{name: "chain deeper than the limit", lim: manifest.Limits{MaxChainDepth: 2}, build: func(t *testing.T, dir string) *hoEnv {
			hoChainPack(t, dir, "20250304-00000001", "", map[string][]byte{"1.txt": hoText(1, 10)})
			hoChainPack(t, dir, "20250304-00000002", "20250304-00000001", map[string][]byte{"2.txt": hoText(2, 10)})
			hoChainPack(t, dir, "20250304-00000003", "20250304-00000002", map[string][]byte{"3.txt": hoText(3, 10)})
			return hoChainPack(t, dir, "20250304-00000004", "20250304-00000003", map[string][]byte{"4.txt": hoText(4, 10)})
		}, has: []string{"limit"}},
		{name: "chain at the limit opens", lim: manifest.Limits{MaxChainDepth: 3}, build: func(t *testing.T, dir string) *hoEnv {
			hoChainPack(t, dir, "20250304-00000001", "", map[string][]byte{"1.txt": hoText(1, 10)})
			hoChainPack(t, dir, "20250304-00000002", "20250304-00000001", map[string][]byte{"2.txt": hoText(2, 10)})
			hoChainPack(t, dir, "20250304-00000003", "20250304-00000002", map[string][]byte{"3.txt": hoText(3, 10)})
			return hoChainPack(t, dir, "20250304-00000004", "20250304-00000003", map[string][]byte{"4.txt": hoText(4, 10)})
		}, ok: []string{"1.txt", "2.txt", "3.txt", "4.txt"}},
		{name: "ancestor has an unknown version", build: func(t *testing.T, dir string) *hoEnv {
			b := hoChainPack(t, dir, "20250304-bbbbbbbb", "", f2)
			m := b.manifest()
			m.Version = "3.0"
			b.putManifest(m)
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-bbbbbbbb", f1)
		}, has: []string{"20250304-bbbbbbbb"}},
		{name: "ancestor is encrypted", build: func(t *testing.T, dir string) *hoEnv {
			hoPack(t, dir, f2, cargopack.Options{UploadID: "20250304-bbbbbbbb", EncryptedManifest: true})
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-bbbbbbbb", f1)
		}, has: []string{"20250304-bbbbbbbb"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			h := tc.build(t, dir)
			files := map[string][]byte{}
			for i := 1; i <= 4; i++ {
				files[fmt.Sprintf("%d.txt", i)] = hoText(uint64(i), 10)
			}
			ctx, cancel := context.WithTimeout(context.Background(), hoDeadline)
			defer cancel()
			fs := backend.NewFaulty(backend.NewFileStore(dir), backend.FaultConfig{})
			a, err := Open(ctx, fs, h.bucket, h.mkey, Options{Name: hoName, Limits: tc.lim})
			defer hoCheckRequests(t, fs)
			if tc.ok == nil {
				if err == nil {
					a.Close()
					t.Fatal("Open succeeded")
				}
				if !errors.Is(err, ErrBrokenChain) {
					t.Errorf("error does not wrap ErrBrokenChain: %v", err)
				}
				for _, s := range append([]string{h.mkey}, tc.has...) {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error does not name %q: %v", s, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			for _, k := range tc.ok {
				f, ok := a.Stat(k)
				if !ok {
					t.Errorf("%s not found", k)
					continue
				}
				r := hoRead(ctx, a, f, 0, f.Size, true)
				if r.err != nil || !bytes.Equal(r.got, files[k]) {
					t.Errorf("%s: %v (bytes equal: %v)", k, r.err, bytes.Equal(r.got, files[k]))
				}
			}
		})
	}
}

// hoDotdot is a row whose manifest edit puts a ".." segment into an object
// key: it must be refused at Open, naming the manifest, and the key never
// reaches the store (issue 7 bug 5, fixed).
func hoDotdot(name string, pack cargopack.Options, edit func(h *hoEnv, m *manifest.Manifest)) hoRow {
	return hoRow{name: name, pack: pack, edit: edit, openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath}}
}

// hoIssue7Rows are the hostile cases that revealed read-core bugs (issue 7),
// now fixed: they run with the rest of TestHostileArchives.
func hoIssue7Rows() []hoRow {
	return []hoRow{
		{
			// BUG 1: chunkReadState.hdrOK remembers a checked header by
			// offset only. Once a.txt's header was accepted, any other
			// file whose archive_offset equals a.txt's skips the check,
			// and a partial read of it (framed: frame-verified, so no
			// extent verification) serves a.txt's bytes.
			name: "archive_offset of another member already read (hdrOK keyed by offset only)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoOffset(h.t, m, "dir/e.txt", *hoEntry(h.t, m, "a.txt").ArchiveOffset)
			},
			failKeys: map[string][]error{"dir/e.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.txt"},
		},
		{
			// BUG 1b: the verified-extent cache (keyExtent) is keyed by
			// chunk offset and length only. b.txt points at a.txt's
			// data (same size); a.txt was read (and its extent verified
			// against a.txt's sha256) first, so b.txt's partial read is
			// served from that cache entry without checking b.txt's
			// own sha256 or its header (hdrOK, BUG 1).
			name: "plain tar: archive_offset of a same-size member already read (extent cache keyed by offset)", pack: hoPlain,
			files: map[string][]byte{"a.txt": hoText(1, 3000), "b.txt": hoText(2, 3000), "c.txt": hoText(3, 3000)},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoOffset(h.t, m, "b.txt", *hoEntry(h.t, m, "a.txt").ArchiveOffset)
			},
			failKeys: map[string][]error{"b.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.txt", "c.txt"},
		},
		{
			// BUG 1c: the worst form of BUG 1. b.txt has no sha256 and
			// points at a.txt's data (same size); a.txt was read first,
			// so b.txt's header check is skipped and a WHOLE read of
			// b.txt serves a.txt's bytes with no error.
			name: "plain tar, no checksum: whole read of a member pointing at one already read", pack: hoPlain,
			files: map[string][]byte{"a.txt": hoText(1, 3000), "b.txt": hoText(2, 3000), "c.txt": hoText(3, 3000)},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoOffset(h.t, m, "b.txt", *hoEntry(h.t, m, "a.txt").ArchiveOffset)
				hoEntry(h.t, m, "b.txt").Checksum = ""
			},
			failKeys: map[string][]error{"b.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.txt", "c.txt"},
		},
		{
			// BUG 1d: BUG 1 reached through s3_key. Split parts start
			// at the same offset (1536, after PAX and ustar headers) in
			// their own chunks; b.bin's part 1 is pointed at a.bin's
			// part-1 chunk. a.bin is read first, so the header at 1536
			// of that chunk is "known good" and a partial read of
			// b.bin's part 1 serves a.bin's bytes.
			name:  "split part s3_key pointing at another file's part chunk (same offset)",
			files: map[string][]byte{"a.bin": hoRandom(11, 30000), "b.bin": hoRandom(12, 30000)},
			pack:  cargopack.Options{FrameSize: 16 << 10, SplitSize: 15000},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				var pa, pb *manifest.FileEntry
				for i := range m.Files {
					fe := &m.Files[i]
					if fe.PartIndex == 1 && strings.HasSuffix(fe.Path, "/a.bin") {
						pa = fe
					}
					if fe.PartIndex == 1 && strings.HasSuffix(fe.Path, "/b.bin") {
						pb = fe
					}
				}
				if pa == nil || pb == nil || *pa.ArchiveOffset != *pb.ArchiveOffset {
					h.t.Fatalf("split layout changed")
				}
				pb.S3Key, pb.ChunkID, pb.ShardID = pa.S3Key, pa.ChunkID, pa.ShardID
			},
			failKeys: map[string][]error{"b.bin": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.bin"},
		},
		{
			name: "duplicate_of_hash names another file's content", files: hoDupFiles(), pack: cargopack.Options{FrameSize: 16 << 10, Dedup: true},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				fe := hoEntry(h.t, m, "z.txt")
				fe.IsDuplicate = true
				fe.DuplicateOfHash = hoEntry(h.t, m, "dir/e.txt").Checksum
				fe.Size = hoEntry(h.t, m, "dir/e.txt").Size
			},
			// Bug 2 (fixed): the original's bytes were served although
			// they contradict the duplicate's own checksum.
			openErr: []error{ErrInvalidTree}, openHas: []string{"z.txt", "duplicate_of_hash"},
		},
		{
			// Bug 3 (fixed): the compressed span was buffered whole.
			// Now an implausible span is refused unread, and any frame
			// whose span exceeds MaxFrameBytes is streamed.
			name: "frame claims a huge compressed span inside a huge (sparse) object", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				c := &m.Chunks[0]
				f := &c.Frames[len(c.Frames)-1]
				f.CompressedSize = 600 << 20
				c.CompressedSize = f.CompressedOffset + f.CompressedSize
				if err := os.Truncate(h.objPath(h.chunkKey(m, 0)), c.CompressedSize); err != nil {
					h.t.Fatal(err)
				}
			},
			failFn: func(h *hoEnv, m *manifest.Manifest) map[string][]error {
				c := &m.Chunks[0]
				out := map[string][]error{}
				for _, k := range hoKeysInFrame(m, 0, len(c.Frames)-1) {
					out[k] = []error{ErrCorrupt} // a 600 MiB span cannot hold one zstd frame of this size
				}
				return out
			},
			serveKeys: []string{"a.txt"},
		},
		hoDotdot("chunk s3_key with .. segments reaches the store", hoFramed, func(h *hoEnv, m *manifest.Manifest) {
			old := m.Chunks[0].S3Key
			m.Chunks[0].S3Key = "../../../../../../../../etc/passwd.tar.zst"
			for i := range m.Files {
				if m.Files[i].S3Key == old {
					m.Files[i].S3Key = m.Chunks[0].S3Key
				}
			}
		}),
		hoDotdot("direct s3_key with .. segments reaches the store", cargopack.Options{Direct: true}, func(h *hoEnv, m *manifest.Manifest) {
			hoEntry(h.t, m, "a.txt").S3Key = "../../../../../../../../etc/hostname"
		}),
		{
			// Bug 6 (fixed): two members named a.txt (b.txt's header
			// renamed), no offsets, no checksums: the tar walk kept the
			// last one and served b.txt's bytes as a.txt. An ambiguous
			// name in a walked chunk is now refused.
			name:  "duplicate member names in a chunk, no offsets or checksums (tar walk)",
			files: map[string][]byte{"a.txt": hoText(1, 3000), "b.txt": hoText(2, 3000)},
			pack:  cargopack.Options{PlainTar: hoPlain.PlainTar, Pre492: true, NoChecksums: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				p := h.objPath(h.chunkKey(m, 0))
				data, err := os.ReadFile(p)
				if err != nil {
					h.t.Fatal(err)
				}
				nameA, nameB := hoEntry(h.t, m, "a.txt").Path, hoEntry(h.t, m, "b.txt").Path
				for o := 0; o+512 <= len(data); o += 512 {
					if string(bytes.TrimRight(data[o:o+100], "\x00")) == nameB {
						hoEditHeader(h.t, p, int64(o), func(hdr []byte) {
							clear(hdr[0:100])
							copy(hdr[0:100], nameA)
						})
					}
				}
			},
			failKeys: map[string][]error{"a.txt": {ErrCorrupt}, "b.txt": {ErrNotInChunk}},
		},
		{
			// Bug 7 (fixed; CPU amplification, no wrong bytes): an
			// unframed pre-#492 chunk replaced by a 32 KiB zstd frame
			// of 1 GiB of zeros. Each read started a tar walk that
			// decoded the whole stream to check the object sha256, and
			// the failed walk was not remembered (10 reads + Verify
			// took ~10 s). Now the decode stops past a bound computed
			// from the chunk's manifest entries, and a walk that failed
			// on the data is remembered for the chunk.
			name: "stream zstd chunk, no offsets, 1 GiB zero bomb: decoded once, and only up to a bound", pack: cargopack.Options{Pre492: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				if err := os.WriteFile(h.objPath(h.chunkKey(m, 0)), hoZeroBomb(1<<30), 0o644); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"a.txt": nil, "z.txt": nil}, partialFail: true,
			maxTime: 3 * time.Second,
		},
	}
}

// hoMutate applies one random mutation to m. withBugs enables the
// mutations that hit issue 7's (fixed) bugs: an archive_offset copied from another
// member, an s3_key copied from another chunk (split parts all start at
// offset 1536 of their chunks, so this lands on another member at an
// offset whose header was already accepted: bug 1), and duplicate_of_hash
// naming another file's checksum (bug 2).
func hoMutate(r *rand.Rand, m *manifest.Manifest, withBugs bool) string {
	num := func(v int64) int64 {
		switch r.IntN(11) {
		case 0:
			return v + 1
		case 1:
			return v - 1
		case 2:
			return v + 512
		case 3:
			return v - 512
		case 4:
			return 0
		case 5:
			return -1
		case 6:
			return v * 2
		case 7:
			return v / 2
		case 8:
			return 1 << 40
		case 9:
			return v + int64(r.IntN(64<<10))
		}
		return int64(r.IntN(int(max(v, 1)) * 2))
	}
	str := func(v string) string {
		switch r.IntN(6) {
		case 0:
			return ""
		case 1:
			return v + "x"
		case 2:
			if v != "" {
				return v[:len(v)-1]
			}
			return "y"
		case 3:
			if v != "" {
				i := r.IntN(len(v))
				return v[:i] + string(v[i]^1) + v[i+1:]
			}
			return "z"
		case 4:
			return "../" + v
		}
		return strings.ToUpper(v)
	}
	nf, nc := len(m.Files), len(m.Chunks)
	switch k := r.IntN(16); {
	case k < 8 && nf > 0:
		fe := &m.Files[r.IntN(nf)]
		switch r.IntN(9) {
		case 0:
			fe.Size = num(fe.Size)
			return "file size"
		case 1:
			if fe.ArchiveOffset == nil || r.IntN(4) == 0 {
				fe.ArchiveOffset = nil
				return "file archive_offset nil"
			}
			v := num(*fe.ArchiveOffset)
			fe.ArchiveOffset = &v
			return "file archive_offset"
		case 2:
			if r.IntN(2) == 0 {
				fe.Path = str(fe.Path)
			} else {
				fe.Path = m.Files[r.IntN(nf)].Path
			}
			return "file path"
		case 3:
			fe.Checksum = str(fe.Checksum)
			return "file checksum"
		case 4:
			if withBugs && nc > 0 && r.IntN(2) == 0 {
				fe.S3Key = m.Chunks[r.IntN(nc)].S3Key
				return "file s3_key of another chunk"
			}
			fe.S3Key = str(fe.S3Key)
			return "file s3_key"
		case 5:
			fe.Offset, fe.Length = num(fe.Offset), num(fe.Length)
			return "file offset/length"
		case 6:
			fe.PartIndex, fe.TotalParts = int(num(int64(fe.PartIndex))), int(num(int64(fe.TotalParts)))
			return "file part_index/total_parts"
		case 7:
			fe.IsDuplicate = !fe.IsDuplicate
			if withBugs && r.IntN(2) == 0 {
				o := &m.Files[r.IntN(nf)]
				fe.DuplicateOfHash, fe.Size = o.Checksum, o.Size
			}
			return "file is_duplicate"
		case 8:
			if withBugs {
				o := m.Files[r.IntN(nf)]
				if o.ArchiveOffset != nil {
					v := *o.ArchiveOffset
					fe.ArchiveOffset = &v
					fe.Size = o.Size
					return "file archive_offset of another member"
				}
			}
			fe.ModTime = fe.ModTime.Add(time.Duration(num(3600)) * time.Second)
			return "file mod_time"
		}
	case k < 14 && nc > 0:
		c := &m.Chunks[r.IntN(nc)]
		nfr := len(c.Frames)
		switch r.IntN(8) {
		case 0:
			c.CompressedSize = num(c.CompressedSize)
			return "chunk compressed_size"
		case 1:
			c.UncompressedSize = num(c.UncompressedSize)
			return "chunk uncompressed_size"
		case 2:
			if withBugs {
				c.S3Key = m.Chunks[r.IntN(nc)].S3Key
				return "chunk s3_key of another chunk"
			}
			c.S3Key = str(c.S3Key)
			return "chunk s3_key"
		case 3:
			c.Checksum = str(c.Checksum)
			return "chunk checksum"
		case 4:
			if nfr > 0 {
				f := &c.Frames[r.IntN(nfr)]
				switch r.IntN(5) {
				case 0:
					f.CompressedOffset = num(f.CompressedOffset)
				case 1:
					f.CompressedSize = num(f.CompressedSize)
				case 2:
					f.UncompressedOffset = num(f.UncompressedOffset)
				case 3:
					f.UncompressedSize = num(f.UncompressedSize)
				case 4:
					f.Checksum = str(f.Checksum)
				}
				return "frame field"
			}
		case 5:
			if nfr > 1 {
				i, j := r.IntN(nfr), r.IntN(nfr)
				c.Frames[i], c.Frames[j] = c.Frames[j], c.Frames[i]
				return "frames swapped"
			}
		case 6:
			if nfr > 0 {
				i := r.IntN(nfr)
				c.Frames = slices.Delete(c.Frames, i, i+1)
				return "frame deleted"
			}
		case 7:
			if nfr > 0 {
				i := r.IntN(nfr)
				c.Frames = slices.Insert(c.Frames, i, c.Frames[i])
				return "frame repeated"
			}
		}
		c.CompressedSize = num(c.CompressedSize)
		return "chunk compressed_size"
	}
	switch r.IntN(4) {
	case 0:
		m.SourcePath = str(m.SourcePath)
		return "source_path"
	case 1:
		m.Prefix = str(m.Prefix)
		return "prefix"
	case 2:
		if nf > 0 {
			m.DeletedPaths = append(m.DeletedPaths, m.Files[r.IntN(nf)].Path)
		}
		return "deleted_paths"
	}
	m.CompressionType = str(m.CompressionType)
	return "compression_type"
}

// hoShape is one archive shape for the mutation loop and the fuzz target.
type hoShape struct {
	name  string
	files map[string][]byte
	opt   cargopack.Options
}

func hoShapes() []hoShape {
	return []hoShape{
		{"framed", hoBaseFiles(), hoFramed},
		{"plain", hoBaseFiles(), hoPlain},
		{"stream", hoBaseFiles(), cargopack.Options{}},
		{"split+dedup", hoDupFiles(), cargopack.Options{FrameSize: 16 << 10, SplitSize: 15000, Dedup: true}},
		{"direct", hoBaseFiles(), cargopack.Options{Direct: true}},
	}
}

// hoRoundStats counts the outcomes of mutation rounds.
type hoRoundStats struct {
	opened, refused, served, failed int
}

// hoRound applies 1-3 random mutations to base (the manifest as written,
// JSON), stores the result, opens it and reads every key whole and by one
// random range. Open may fail; a read may fail; bytes served must be
// exactly those of a source file whose manifest entry maps to that key.
// Errors must name the manifest key (Open) or the archive and file key
// (reads). fs and cache may be shared between rounds (withBugs).
func hoRound(t testing.TB, h *hoEnv, base []byte, r *rand.Rand, withBugs bool, fs *backend.Faulty, cache *chunkio.FrameCache, label string, st *hoRoundStats) {
	var m manifest.Manifest
	if err := json.Unmarshal(base, &m); err != nil {
		t.Fatal(err)
	}
	orig := make([]string, len(m.Files))
	for i := range m.Files {
		orig[i], _ = manifest.RelativeKey(m.SourcePath, m.Files[i].Path)
	}
	baseFiles := slices.Clone(m.Files) // as written: checksums of the sources
	var what []string
	for n := 1 + r.IntN(3); n > 0; n-- {
		what = append(what, hoMutate(r, &m, withBugs))
	}
	desc := fmt.Sprintf("%s (%s)", label, strings.Join(what, ", "))
	if testing.Verbose() {
		t.Logf("%s: %s", desc, hoDiff(base, &m))
	}
	h.putManifest(&m)
	allowed := map[string][][]byte{}
	for i := range m.Files {
		if k, err := manifest.RelativeKey(m.SourcePath, m.Files[i].Path); err == nil {
			allowed[k] = append(allowed[k], h.files[orig[i]])
			// A duplicate says "my bytes are those of the content with
			// hash duplicate_of_hash": serving that content is what the
			// manifest describes (a duplicate whose own checksum names
			// other content is refused at Open).
			if fe := &m.Files[i]; fe.IsDuplicate && fe.DuplicateOfHash != "" {
				for j := range baseFiles {
					if strings.EqualFold(baseFiles[j].Checksum, fe.DuplicateOfHash) {
						allowed[k] = append(allowed[k], h.files[orig[j]])
					}
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hoDeadline)
	defer cancel()
	defer hoCheckRequests(t, fs)
	a, err := Open(ctx, fs, h.bucket, h.mkey, Options{Name: hoName, Cache: cache})
	if err != nil {
		st.refused++
		if !strings.Contains(err.Error(), h.mkey) {
			t.Errorf("%s: Open error does not name the manifest: %v", desc, err)
		}
		return
	}
	defer a.Close()
	st.opened++
	for _, f := range hoAllKeys(a) {
		if why := hoSafeKey(f.Key); why != "" {
			t.Errorf("%s: listed key %q: %s", desc, f.Key, why)
		}
		rgs := [][2]int64{{0, f.Size}}
		if f.Size > 0 {
			off := r.Int64N(f.Size)
			rgs = append(rgs, [2]int64{off, 1 + r.Int64N(f.Size-off)})
		}
		for _, rg := range rgs {
			res := hoRead(ctx, a, f, rg[0], rg[1], r.IntN(2) == 0)
			if errors.Is(res.err, errHoPanic) {
				t.Errorf("%s: read %s [%d,+%d): %v", desc, f.Key, rg[0], rg[1], res.err)
				continue
			}
			if res.err != nil {
				st.failed++
				if msg := res.err.Error(); !strings.Contains(msg, hoName) || !strings.Contains(msg, f.Key) {
					t.Errorf("%s: read %s: error does not name archive and key: %v", desc, f.Key, res.err)
				}
				continue
			}
			ok := false
			for _, src := range allowed[f.Key] {
				if int64(len(src)) >= rg[0]+rg[1] && int64(len(res.got)) == rg[1] && bytes.Equal(res.got, src[rg[0]:rg[0]+rg[1]]) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s: read %s [%d,+%d): WRONG BYTES served (%d bytes)", desc, f.Key, rg[0], rg[1], len(res.got))
			}
			st.served++
		}
	}
}

// hoDiff describes how m differs from the manifest JSON base, entry by
// entry, for reproducing a failing round.
func hoDiff(base []byte, m *manifest.Manifest) string {
	var b manifest.Manifest
	if err := json.Unmarshal(base, &b); err != nil {
		return err.Error()
	}
	var out []string
	cmp := func(what string, x, y any) {
		jx, _ := json.Marshal(x)
		jy, _ := json.Marshal(y)
		if !bytes.Equal(jx, jy) {
			out = append(out, fmt.Sprintf("%s: %s -> %s", what, jx, jy))
		}
	}
	for i := range max(len(b.Files), len(m.Files)) {
		var x, y any
		if i < len(b.Files) {
			x = b.Files[i]
		}
		if i < len(m.Files) {
			y = m.Files[i]
		}
		cmp(fmt.Sprintf("files[%d]", i), x, y)
	}
	for i := range max(len(b.Chunks), len(m.Chunks)) {
		var x, y any
		if i < len(b.Chunks) {
			x = b.Chunks[i]
		}
		if i < len(m.Chunks) {
			y = m.Chunks[i]
		}
		cmp(fmt.Sprintf("chunks[%d]", i), x, y)
	}
	cmp("source_path", b.SourcePath, m.SourcePath)
	cmp("prefix", b.Prefix, m.Prefix)
	cmp("deleted_paths", b.DeletedPaths, m.DeletedPaths)
	cmp("compression_type", b.CompressionType, m.CompressionType)
	return strings.Join(out, "; ")
}

// hoMutationLoop runs deterministic mutation rounds over every shape
// (seeded, at most 300 rounds per shape and about 7 s in all).
func hoMutationLoop(t *testing.T, withBugs bool) {
	const rounds = 300
	budget := 7 * time.Second
	start := time.Now()
	var st hoRoundStats
	// Normally every round gets its own chunkio.FrameCache and store. withBugs
	// shares one cache and one store across the rounds of a shape, as a
	// server does when a manifest is replaced and the archive reopened
	// (cached frames were keyed by frame index: issue 7 bug 4).
	shared := chunkio.NewFrameCache(16 << 20)
	for si, sh := range hoShapes() {
		h := hoPack(t, t.TempDir(), sh.files, sh.opt)
		base, err := json.Marshal(h.manifest())
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(si)+1, 0x5eed))
		sharedStore := backend.NewFaulty(backend.NewFileStore(h.dir), backend.FaultConfig{})
		for round := 0; round < rounds && time.Since(start) < budget; round++ {
			fs, cache := backend.NewFaulty(backend.NewFileStore(h.dir), backend.FaultConfig{}), chunkio.NewFrameCache(16<<20)
			if withBugs {
				fs, cache = sharedStore, shared
			}
			hoRound(t, h, base, r, withBugs, fs, cache, fmt.Sprintf("%s round %d", sh.name, round), &st)
		}
	}
	t.Logf("mutation loop: %v; %d opened, %d refused at Open; %d reads served exact, %d refused",
		time.Since(start).Round(time.Millisecond), st.opened, st.refused, st.served, st.failed)
}

// FuzzHostileManifest drives the same mutations from fuzzer input: seed
// selects the random mutations, shape the archive shape.
//
//	go test ./archiveview -run '^$' -fuzz FuzzHostileManifest -fuzztime=10s
func FuzzHostileManifest(f *testing.F) {
	for seed := uint64(0); seed < 8; seed++ {
		f.Add(seed, uint8(seed))
	}
	shapes := hoShapes()
	envs := make([]*hoEnv, len(shapes))
	bases := make([][]byte, len(shapes))
	for i, sh := range shapes {
		envs[i] = hoPack(f, f.TempDir(), sh.files, sh.opt)
		m := envs[i].manifest()
		var err error
		if bases[i], err = json.Marshal(m); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, seed uint64, shape uint8) {
		i := int(shape) % len(shapes)
		h := *envs[i]
		h.t = t
		r := rand.New(rand.NewPCG(seed, uint64(shape)))
		var st hoRoundStats
		hoRound(t, &h, bases[i], r, false, backend.NewFaulty(backend.NewFileStore(h.dir), backend.FaultConfig{}),
			chunkio.NewFrameCache(16<<20), fmt.Sprintf("%s seed %d", shapes[i].name, seed), &st)
	})
}

func TestHostileManifestMutations(t *testing.T) {
	hoMutationLoop(t, false)
}

// TestHostileManifestMutationsShared runs the mutation loop with the
// mutations that hit issue 7's bugs (archive_offset and s3_key of another
// member, duplicate_of_hash naming another file's content) and one store
// and one chunkio.FrameCache shared by every round of a shape, as a server does
// when a manifest is replaced and the archive reopened.
func TestHostileManifestMutationsShared(t *testing.T) {
	hoMutationLoop(t, true)
}

// hoPoison: an honest archive A and a hostile manifest B (another upload in
// the same bucket and prefix) that lists A's chunk with two frames swapped:
// each frame's span and checksum are real, only their order in the tar
// stream is a lie. Both are opened on one store with one chunkio.FrameCache, as a
// server does. B is read first; then every read of A must still be exact.
// (Issue 7 bug 4, fixed: frames were cached by (store, bucket, object, frame
// index), so B's frame k, A's frame k+1 verified against its own checksum,
// was served to A as A's frame k: wrong bytes, or with frames of different
// lengths a slice-bounds panic in framedSource.next.)
func hoPoison(t *testing.T, sizes bool) {
	files := hoBaseFiles()
	dir := t.TempDir()
	h := hoPack(t, dir, files, hoFramed)
	mb := h.manifest()
	c := &mb.Chunks[0]
	ob := *hoEntry(t, mb, "b.bin").ArchiveOffset
	k := hoFrameAt(c, ob+16384+100) // a frame inside b.bin, after its header's frame
	if sizes {
		// The last two frames: 17408 and 6656 bytes with these files.
		// B's frame k decodes to 6656 bytes (an exact-size buffer); A
		// slices it as its 17408-byte frame k.
		k = len(c.Frames) - 2
		if c.Frames[k].UncompressedSize <= c.Frames[k+1].UncompressedSize {
			t.Fatalf("frame layout changed: %+v", c.Frames)
		}
	}
	if k < 1 || k+1 >= len(c.Frames) {
		t.Fatalf("frame layout: k=%d of %d", k, len(c.Frames))
	}
	fa, fb := c.Frames[k], c.Frames[k+1]
	c.Frames[k] = manifest.FrameEntry{CompressedOffset: fb.CompressedOffset, CompressedSize: fb.CompressedSize,
		UncompressedOffset: fa.UncompressedOffset, UncompressedSize: fb.UncompressedSize, Checksum: fb.Checksum}
	c.Frames[k+1] = manifest.FrameEntry{CompressedOffset: fa.CompressedOffset, CompressedSize: fa.CompressedSize,
		UncompressedOffset: fa.UncompressedOffset + fb.UncompressedSize, UncompressedSize: fa.UncompressedSize, Checksum: fa.Checksum}
	idA := mb.UploadID
	mb.UploadID = "20250304-b0b0b0b0"
	js, err := json.Marshal(mb)
	if err != nil {
		t.Fatal(err)
	}
	keyB := strings.Replace(h.mkey, idA, mb.UploadID, 1)
	h.putJSON(keyB, js)

	ctx, cancel := context.WithTimeout(context.Background(), hoDeadline)
	defer cancel()
	fs := backend.NewFaulty(backend.NewFileStore(dir), backend.FaultConfig{})
	cache := chunkio.NewFrameCache(16 << 20)
	b, err := Open(ctx, fs, h.bucket, keyB, Options{Name: "hostile-b", Cache: cache, Readahead: -1})
	if err != nil {
		t.Fatalf("Open B: %v", err)
	}
	defer b.Close()
	a, err := Open(ctx, fs, h.bucket, h.mkey, Options{Name: hoName, Cache: cache, Readahead: -1})
	if err != nil {
		t.Fatalf("Open A: %v", err)
	}
	defer a.Close()
	for _, f := range hoAllKeys(b) {
		hoRead(ctx, b, f, 0, f.Size, true) // outcome irrelevant: B is hostile
	}
	for _, f := range hoAllKeys(a) {
		src := files[f.Key]
		for _, rg := range [][2]int64{{f.Size / 2, min(64, f.Size/2)}, {0, f.Size}, {f.Size - 10, 10}} {
			res := hoRead(ctx, a, f, rg[0], rg[1], true)
			switch {
			case res.err != nil:
				t.Errorf("honest archive A: read %s [%d,+%d): %v", f.Key, rg[0], rg[1], res.err)
			case !bytes.Equal(res.got, src[rg[0]:rg[0]+rg[1]]):
				t.Errorf("honest archive A: read %s [%d,+%d): WRONG BYTES served", f.Key, rg[0], rg[1])
			}
		}
	}
}

// TestHostileTraversalChain: a previous_manifest_id that is not one key
// segment ("../../../../etc") is refused at Open, and the store is never
// asked for a key with a ".." segment (issue 7 bug 5).
func TestHostileTraversalChain(t *testing.T) {
	dir := t.TempDir()
	h := hoChainPack(t, dir, "20250304-aaaaaaaa", "../../../../etc", map[string][]byte{"a.txt": hoText(1, 500)})
	fs := backend.NewFaulty(backend.NewFileStore(dir), backend.FaultConfig{})
	a, err := Open(context.Background(), fs, h.bucket, h.mkey, Options{Name: hoName})
	if err == nil {
		a.Close()
		t.Fatal("Open succeeded")
	}
	if !errors.Is(err, ErrBrokenChain) || !errors.Is(err, manifest.ErrUnsafePath) || !strings.Contains(err.Error(), h.mkey) {
		t.Errorf("Open error: %v", err)
	}
	hoCheckRequests(t, fs)
}

// TestHostileCachePoisoning: a hostile manifest over an honest archive's
// chunk, read first through the same store and chunkio.FrameCache, never changes
// what the honest archive serves (issue 7 bug 4: frames were cached by
// index, and a decoded buffer was sliced without a length check).
func TestHostileCachePoisoning(t *testing.T) {
	t.Run("frames swapped", func(t *testing.T) { hoPoison(t, false) })
	t.Run("frames swapped, other frame sizes (was a slice-bounds panic)", func(t *testing.T) { hoPoison(t, true) })
}

// TestHostileRanges: ranges outside a file are refused before any backend
// request, naming the key, whatever the overflow.
func TestHostileRanges(t *testing.T) {
	h := hoPack(t, t.TempDir(), hoBaseFiles(), hoFramed)
	fs := backend.NewFaulty(backend.NewFileStore(h.dir), backend.FaultConfig{})
	a, err := Open(context.Background(), fs, h.bucket, h.mkey, Options{Name: hoName})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	f, ok := a.Stat("b.bin")
	if !ok {
		t.Fatal("b.bin not found")
	}
	const maxI = 1<<63 - 1
	before := fs.Requests("")
	for _, rg := range [][2]int64{{-1, 1}, {0, -1}, {0, f.Size + 1}, {f.Size, 1}, {f.Size + 1, 0}, {maxI, 1}, {1, maxI}, {maxI, maxI}, {-maxI, maxI}, {f.Size - 1, 2}} {
		r, err := a.Open(context.Background(), f, rg[0], rg[1])
		if err == nil {
			r.Close()
			t.Errorf("Open(%d, %d) accepted", rg[0], rg[1])
			continue
		}
		if !errors.Is(err, ErrBadRange) || !strings.Contains(err.Error(), "b.bin") {
			t.Errorf("Open(%d, %d): %v", rg[0], rg[1], err)
		}
	}
	if n := fs.Requests("") - before; n != 0 {
		t.Errorf("refused ranges made %d store requests", n)
	}
	// A forged File (not from Stat/List) cannot read past its extents.
	forged := f
	forged.Size = f.Size * 4
	if r, err := a.Open(context.Background(), forged, 0, forged.Size); err == nil {
		got, rerr := io.ReadAll(r)
		r.Close()
		if rerr == nil {
			t.Errorf("forged File with Size %d served %d bytes", forged.Size, len(got))
		}
	}
}
