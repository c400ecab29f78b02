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
// segment (the request log of a faults.Faulty wrapper is inspected).
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
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
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
func hoCheckRequests(t testing.TB, f *faults.Faulty) {
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
	fs := faults.NewFaulty(backend.NewFileStore(h.dir), faults.FaultConfig{})
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
			if exts := a.fileExtents(index.Ordinal(f)); len(exts) == 1 && !errors.Is(res.err, ErrBadRange) {
				if ck := a.tree.Chunks[exts[0].Chunk].Key; !strings.Contains(msg, ck) {
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
