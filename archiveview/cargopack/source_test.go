package cargopack

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func TestFromDir(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, data string, mode os.FileMode) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("b.txt", "bee", 0o644)
	write("a/z.txt", "zed", 0o600)
	write("a/b/c.sh", "#!/bin/sh\n", 0o755)
	write("a-file", "", 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	mt := time.Date(2024, 5, 6, 7, 8, 9, 987654321, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "b.txt"), mt, mt); err != nil {
		t.Fatal(err)
	}
	files, err := FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, f := range files {
		rels = append(rels, f.Rel)
	}
	// filepath.Walk order: lexical per directory ("a" < "a-file" < "b.txt").
	if got := strings.Join(rels, ","); got != "a/b/c.sh,a/z.txt,a-file,b.txt" {
		t.Fatalf("FromDir order %s", got)
	}
	if files[0].Mode.Perm() != 0o755 || files[1].Mode.Perm() != 0o600 {
		t.Errorf("modes %v %v", files[0].Mode, files[1].Mode)
	}
	if !files[3].ModTime.Equal(mt) {
		t.Errorf("mtime %v", files[3].ModTime)
	}

	// Pack it and check the tar headers CargoShip's FileInfoHeader would write.
	src := map[string][]byte{}
	for _, f := range files {
		b, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Rel)))
		src[f.Rel] = b
	}
	sink := t.TempDir()
	res, err := Write(context.Background(), DirSink(sink), files, Options{Bucket: "b", SourcePath: dir, UploadID: "u", FrameSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	p := &packed{dir: sink, res: res, m: res.Manifest, src: src, opt: Options{Bucket: "b", SourcePath: dir}}
	checkOffsets(t, p)
	hdrs, _ := tarHeaders(t, p.tarStream(t, p.m.Chunks[0]))
	if len(hdrs) != 4 {
		t.Fatalf("%d headers", len(hdrs))
	}
	uid, gid := os.Getuid(), os.Getgid()
	for i, h := range hdrs {
		f := files[i]
		if h.Name != dir+"/"+f.Rel {
			t.Errorf("tar name %q, want the absolute walked path", h.Name)
		}
		if h.Typeflag != tar.TypeReg || h.Mode != int64(f.Mode.Perm()) {
			t.Errorf("%s: typeflag %c mode %o", h.Name, h.Typeflag, h.Mode)
		}
		if !h.ModTime.Equal(f.ModTime.Round(time.Second)) {
			t.Errorf("%s: tar mtime %v, want %v rounded to the second", h.Name, h.ModTime, f.ModTime)
		}
		if h.Uid != uid || h.Gid != gid {
			t.Errorf("%s: uid/gid %d/%d, want %d/%d (FileInfoHeader fills ownership)", h.Name, h.Uid, h.Gid, uid, gid)
		}
	}
	// The manifest keeps the nanoseconds.
	if e := p.m.Files[3]; !e.ModTime.Equal(mt) {
		t.Errorf("manifest mod_time %v", e.ModTime)
	}
}

func TestPAXNames(t *testing.T) {
	long := strings.Repeat("n", 120) + "/" + strings.Repeat("m", 120) + ".txt"
	src := map[string][]byte{"ünï.txt": []byte("u"), long: []byte("l"), "plain.txt": []byte("p")}
	p := pack(t, src, Options{FrameSize: 4096, RelativePaths: true})
	checkOffsets(t, p)
	for _, e := range p.m.Files {
		if e.Path == "plain.txt" {
			continue
		}
		// A PAX 'x' header and its records precede the ustar header.
		hdrs, offs := tarHeaders(t, p.tarStream(t, p.chunkByKey(t, e.S3Key)))
		for i, h := range hdrs {
			if h.Name == e.Path {
				if h.Format != tar.FormatPAX {
					t.Errorf("%s: format %v, want PAX", e.Path, h.Format)
				}
				prev := int64(0)
				if i > 0 {
					prev = offs[i-1] + ((hdrs[i-1].Size + 511) &^ 511)
				}
				if offs[i]-prev < 1536 {
					t.Errorf("%s: %d header bytes, want PAX x header + records + ustar header", e.Path, offs[i]-prev)
				}
			}
		}
	}
}

// genReader yields n deterministic compressible bytes without holding them.
type genReader struct {
	r    *rand.Rand
	left int64
	line []byte
}

func newGen(seed uint64, n int64) *genReader {
	return &genReader{r: rand.New(rand.NewPCG(seed, 1)), left: n}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && g.left > 0 {
		if len(g.line) == 0 {
			g.line = []byte("row " + string(rune('a'+g.r.IntN(26))) + " value " + string(rune('0'+g.r.IntN(10))) + "\n")
		}
		k := copy(p[n:], g.line)
		if int64(k) > g.left {
			k = int(g.left)
		}
		g.line = g.line[k:]
		n += k
		g.left -= int64(k)
	}
	return n, nil
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestStreamingMemory packs a 96 MiB file produced on the fly and checks the
// heap never holds a chunk's or the file's worth of bytes, then verifies the
// archived bytes by streaming decode against a regenerated copy.
func TestStreamingMemory(t *testing.T) {
	const size = 96 << 20
	files := []File{{Rel: "huge.csv", Size: size, ModTime: testMTime, Mode: 0o644,
		Open: func() (io.ReadCloser, error) { return io.NopCloser(newGen(5, size)), nil }}}
	runtime.GC()
	base := heapBytes()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				if h := heapBytes(); h > peak.Load() {
					peak.Store(h)
				}
			}
		}
	}()
	dir := t.TempDir()
	res, err := Write(context.Background(), DirSink(dir), files, Options{Bucket: "b", UploadID: "u", FrameSize: 4 << 20})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if grew := int64(peak.Load()) - int64(base); grew > 40<<20 {
		t.Errorf("heap grew by %d MiB while packing a %d MiB file", grew>>20, size>>20)
	}
	c := res.Manifest.Chunks[0]
	if len(c.Frames) < 20 {
		t.Errorf("%d frames for 96 MiB at 4 MiB", len(c.Frames))
	}
	f, err := os.Open(filepath.Join(dir, "b", filepath.FromSlash(res.ObjectKeys[0])))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := zstd.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	off := *res.Manifest.Files[0].ArchiveOffset
	if _, err := io.CopyN(io.Discard, dec, off); err != nil {
		t.Fatal(err)
	}
	got, want := sha256.New(), sha256.New()
	if _, err := io.CopyN(got, dec, size); err != nil {
		t.Fatal(err)
	}
	io.Copy(want, newGen(5, size))
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Error("archived bytes differ from the generated source")
	}
}
