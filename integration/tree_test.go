package integration

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// srcFile is one file of a test tree: its key (relative, "/"-separated) and
// how to make its bytes.
type srcFile struct {
	key  string
	data []byte
}

// treeMTime is the modification time given to every generated source file,
// so the packed manifests (and hence the served Last-Modified) are stable.
var treeMTime = time.Date(2024, 3, 14, 15, 9, 26, 535897932, time.UTC)

// words feed the compressible (text-like) generator.
var words = strings.Fields(`wharf cargo ship manifest chunk frame zstd tar
bucket object range listing prefix delimiter marker token signature region
harbour crane container manifest ledger berth quay pilot tide anchor keel`)

// textBytes returns size bytes of deterministic, compressible text.
func textBytes(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x77686172662d7478))
	var b bytes.Buffer
	b.Grow(size + 64)
	line := 0
	for b.Len() < size {
		fmt.Fprintf(&b, "%06d", line)
		for i := 0; i < 8; i++ {
			b.WriteByte(' ')
			b.WriteString(words[r.IntN(len(words))])
		}
		fmt.Fprintf(&b, " %08x\n", r.Uint32())
		line++
	}
	return b.Bytes()[:size]
}

// randomBytes returns size bytes of deterministic incompressible data.
func randomBytes(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x72616e646f6d2121))
	b := make([]byte, size)
	for i := 0; i+8 <= size; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := size &^ 7; i < size; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// pngBytes is random data behind a real PNG signature (already compressed).
func pngBytes(seed uint64, size int) []byte {
	b := randomBytes(seed, size)
	copy(b, []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	return b
}

// gzipBytes is a real gzip stream of random data.
func gzipBytes(seed uint64, size int) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	zw.Write(randomBytes(seed, size))
	zw.Close()
	return b.Bytes()
}

// longKey returns a key of exactly n bytes under dir, split in segments.
func longKey(dir string, n int) string {
	k := dir
	seg := 0
	for len(k) < n-10 {
		part := fmt.Sprintf("segment-%02d-%s/", seg, strings.Repeat("x", 30))
		if len(k)+len(part) > n-10 {
			break
		}
		k += part
		seg++
	}
	k += strings.Repeat("z", n-4-len(k)) + ".txt"
	return k
}

// Test trees. Each served bucket has a "final" source tree (what clients
// must see) written to disk under suite.srcRoot/<bucket>.

func mainTree() []srcFile {
	var fs []srcFile
	add := func(k string, b []byte) { fs = append(fs, srcFile{k, b}) }
	add("README.txt", textBytes(1, 2048))
	add("empty.txt", nil)
	add("nested/one.csv", textBytes(2, 12_345))
	add("nested/a/two.json", textBytes(3, 777))
	add("nested/a/b/three.txt", textBytes(4, 50_000))
	add("nested/a/b/c/d/e/deep.txt", textBytes(5, 4321))
	add("nested/x/y/noise.bin", randomBytes(6, 100_000))
	dup := textBytes(7, 64<<10)
	add("dups/copy-a.txt", dup)
	add("dups/copy-b.txt", dup)
	add("nested/copy-c.txt", dup)
	for i := 0; i < 2100; i++ {
		add(fmt.Sprintf("many/f%04d.txt", i), textBytes(uint64(1000+i), 20+i%280))
	}
	add("names/with space.txt", textBytes(10, 300))
	add("names/plus+sign.txt", textBytes(11, 301))
	add("names/a+b c.txt", textBytes(12, 302))
	add("names/100%.txt", textBytes(13, 303))
	add("names/a%41.txt", textBytes(14, 304))
	add("names/q&a=1.txt", textBytes(15, 305))
	add("names/ünïcødé-日本語.txt", textBytes(16, 306))
	add("names/dir with space/inner+file.txt", textBytes(17, 307))
	add(longKey("names/long/", 200), textBytes(18, 308))
	// Larger than 8 MiB (the CLIs' multipart threshold), not split.
	add("big/unsplit.bin", textBytes(19, 9<<20+12345))
	return fs
}

func mediaTree() []srcFile {
	return []srcFile{
		{"image-1.png", pngBytes(20, 300_000)},
		{"image-2.png", pngBytes(21, 123_457)},
		{"archive.gz", gzipBytes(22, 200_000)},
		{"photos/2024/photo.png", pngBytes(23, 65_536)},
		{"photos/2024/tiny.png", pngBytes(24, 20)},
	}
}

func splitTree() []srcFile {
	return []srcFile{
		{"huge.bin", textBytes(30, 20<<20+777)},
		{"small.txt", textBytes(31, 1000)},
	}
}

// incBase is the first upload of the incremental chain; incDelta the
// second (changed and new files), incDeleted its tombstones; incFinal what
// the chain resolves to.
func incBase() []srcFile {
	return []srcFile{
		{"keep.txt", textBytes(40, 1000)},
		{"change.txt", textBytes(41, 2000)},
		{"gone.txt", textBytes(42, 3000)},
		{"sub/keep2.txt", textBytes(43, 4000)},
	}
}

func incDelta() []srcFile {
	return []srcFile{
		{"change.txt", textBytes(44, 2500)},
		{"added/new.txt", textBytes(45, 5000)},
	}
}

var incDeleted = []string{"gone.txt"}

func incFinal() []srcFile {
	m := map[string][]byte{}
	for _, f := range incBase() {
		m[f.key] = f.data
	}
	for _, k := range incDeleted {
		delete(m, k)
	}
	for _, f := range incDelta() {
		m[f.key] = f.data
	}
	var out []srcFile
	for k, v := range m {
		out = append(out, srcFile{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

func directTree() []srcFile {
	return []srcFile{
		{"d1.txt", textBytes(50, 1500)},
		{"sub/d2.csv", textBytes(51, 33_333)},
		{"sub/deeper/d3.bin", randomBytes(52, 50_000)},
		{"sub/with space+plus.txt", textBytes(53, 99)},
		{"zero.txt", nil},
	}
}

// writeTree writes files under dir with treeMTime.
func writeTree(dir string, files []srcFile) error {
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return err
		}
		if err := os.Chtimes(p, treeMTime, treeMTime); err != nil {
			return err
		}
	}
	return nil
}

// treeKeys walks dir and returns key → size for every regular file.
func treeKeys(dir string) (map[string]int64, error) {
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = info.Size()
		return nil
	})
	return out, err
}

// sortedKeys returns m's keys in byte order (S3 listing order).
func sortedKeys(m map[string]int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// assertSameTree compares the files under got with the source files under
// want (both directories) byte for byte and requires the same file set.
func assertSameTree(t *testing.T, client, got, want string) {
	t.Helper()
	gk, err := treeKeys(got)
	if err != nil {
		t.Fatalf("%s: walking download dir %s: %v", client, got, err)
	}
	wk, err := treeKeys(want)
	if err != nil {
		t.Fatalf("%s: walking source dir %s: %v", client, want, err)
	}
	missing, extra := diffKeys(wk, gk)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("%s: downloaded tree differs from source: %d missing %q, %d extra %q",
			client, len(missing), head(missing, 5), len(extra), head(extra, 5))
	}
	var n int64
	for k := range wk {
		assertSameFile(t, client, filepath.Join(got, filepath.FromSlash(k)), filepath.Join(want, filepath.FromSlash(k)))
		n += wk[k]
	}
	t.Logf("%s: %d files, %d bytes identical to the source tree", client, len(wk), n)
}

// assertSameFile compares two files byte for byte.
func assertSameFile(t *testing.T, client, got, want string) {
	t.Helper()
	g, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("%s: %v", client, err)
	}
	w, err := os.ReadFile(want)
	if err != nil {
		t.Fatalf("%s: %v", client, err)
	}
	assertSameBytes(t, client, got, g, w)
}

// assertSameBytes reports the first differing offset of got vs want.
func assertSameBytes(t *testing.T, client, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Fatalf("%s: %s: got %d bytes, want %d; first difference at byte %d", client, what, len(got), len(want), i)
}

// diffKeys returns keys in want but not in got, and in got but not in want.
func diffKeys(want, got map[string]int64) (missing, extra []string) {
	for k := range want {
		if _, ok := got[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// rollUp computes the expected delimiter listing of keys under prefix with
// delimiter "/": the direct keys and the common prefixes.
func rollUp(keys map[string]int64, prefix string) (files, prefixes []string) {
	seen := map[string]bool{}
	for k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		rest := k[len(prefix):]
		if i := strings.Index(rest, "/"); i >= 0 {
			p := prefix + rest[:i+1]
			if !seen[p] {
				seen[p] = true
				prefixes = append(prefixes, p)
			}
			continue
		}
		files = append(files, k)
	}
	sort.Strings(files)
	sort.Strings(prefixes)
	return files, prefixes
}
