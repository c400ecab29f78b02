package chunkio

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

// rawTarBlock is a ustar header block written by hand (the writer of
// archive/tar refuses GNU sparse records).
func rawTarBlock(name string, typeflag byte, size int64) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:108], "0000644\x00")
	copy(b[108:116], "0000000\x00")
	copy(b[116:124], "0000000\x00")
	copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	copy(b[136:148], "00000000000\x00")
	b[156] = typeflag
	copy(b[257:265], "ustar\x0000")
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func padBlock(b []byte) []byte {
	if r := len(b) % 512; r != 0 {
		b = append(b, make([]byte, 512-r)...)
	}
	return b
}

// paxRecord is one "len key=value\n" record.
func paxRecord(k, v string) string {
	n := len(k) + len(v) + 3
	for {
		s := fmt.Sprintf("%d %s=%s\n", n, k, v)
		if len(s) == n {
			return s
		}
		n = len(s)
	}
}

// sparseTar is a plain tar holding one GNU sparse member (PAX 1.0) named
// name: 10 bytes, a hole of 5 then "hello".
func sparseTar(name string) []byte {
	recs := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", name) + paxRecord("GNU.sparse.realsize", "10")
	data := padBlock([]byte("1\n5\n5\n")) // one data run: 5 bytes at offset 5
	data = append(data, "hello"...)
	var obj []byte
	obj = append(obj, rawTarBlock("./PaxHeaders/sparse.bin", tar.TypeXHeader, int64(len(recs)))...)
	obj = append(obj, padBlock([]byte(recs))...)
	obj = append(obj, rawTarBlock("./GNUSparseFile.0/sparse.bin", tar.TypeReg, int64(len(data)))...)
	obj = append(obj, padBlock(data)...)
	return append(obj, make([]byte, 1024)...)
}

// TestTarWalkRefusesSparse: a GNU sparse member in PAX form (1.0: the
// sparse map at the start of the member's data) is a regular member to
// archive/tar, whose Size is the expanded length; its stored bytes are
// not its content (holes are not stored). The walk refuses it (ErrCorrupt)
// rather than giving an offset: on the old code it gave offset 2048 and
// length 10, whose bytes ("hello" and tar padding) differ from what any
// tar extractor gives ("\0\0\0\0\0hello"), served as the file where no
// checksum covers it.
func TestTarWalkRefusesSparse(t *testing.T) {
	const name = "/src/sparse.bin"
	obj := sparseTar(name)

	// What archive/tar makes of it (the fixture is the shape meant).
	tr := tar.NewReader(bytes.NewReader(obj))
	hdr, err := tr.Next()
	if err != nil || hdr.Name != name || hdr.Size != 10 || hdr.Typeflag != tar.TypeReg {
		t.Fatalf("fixture: %+v, %v", hdr, err)
	}
	content, err := io.ReadAll(tr)
	if err != nil || string(content) != "\x00\x00\x00\x00\x00hello" {
		t.Fatalf("fixture: content %q, %v", content, err)
	}

	dir := t.TempDir()
	key := "s/uploads/u/shard-0/chunk-0.tar"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	set := NewSet(backend.NewFileStore(dir), "bkt", []Chunk{{Key: key, Kind: PlainTar, Size: int64(len(obj))}}, Options{Readahead: -1})
	t.Cleanup(set.Close)
	off, size, err := set.tarOffset(context.Background(), 0, name)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("sparse member: offset %d, length %d (bytes %q), %v; want ErrCorrupt", off, size, obj[min(off, int64(len(obj))):min(off+size, int64(len(obj)))], err)
	}
}

// TestTarWalkTruncatedMember: a plain-tar chunk whose member's data runs
// past the object's end (a truncated upload, or a lying size field) is a
// corrupt chunk (ErrCorrupt, remembered), not an unclassified error. On
// the old code the walk failed with "partReader: seek to 1049087 outside
// [0,2048]", wrapping no sentinel: an internal error, the walk redone by
// every read.
func TestTarWalkTruncatedMember(t *testing.T) {
	obj := append(rawTarBlock("/src/big", tar.TypeReg, 1<<20), make([]byte, 1536)...)
	dir := t.TempDir()
	key := "s/uploads/u/shard-0/chunk-0.tar"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	set := NewSet(backend.NewFileStore(dir), "bkt", []Chunk{{Key: key, Kind: PlainTar, Size: int64(len(obj))}}, Options{Readahead: -1})
	t.Cleanup(set.Close)
	for _, name := range []string{"/src/big", "/src/other"} {
		if _, _, err := set.tarOffset(context.Background(), 0, name); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("walk for %s over a member running past the object's end: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestTarWalkNameOfLinkAndFile: a regular member and a link (or any other
// member) of the same name make the name ambiguous, as two regular
// members do: a tar extractor ends with the later one (here a hard link
// to another member, whose content differs), so the regular member's
// bytes are not "the" file. On the old code the walk ignored the link and
// served the regular member.
func TestTarWalkNameOfLinkAndFile(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []*tar.Header{
		{Name: "/src/other", Mode: 0o644, Size: 5, Typeflag: tar.TypeReg},
		{Name: "/src/a.txt", Mode: 0o644, Size: 5, Typeflag: tar.TypeReg},
		{Name: "/src/a.txt", Linkname: "/src/other", Mode: 0o644, Typeflag: tar.TypeLink},
		{Name: "/src/b.txt", Linkname: "/src/other", Mode: 0o644, Typeflag: tar.TypeSymlink},
		{Name: "/src/b.txt", Mode: 0o644, Size: 5, Typeflag: tar.TypeReg},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("hello"))
		}
	}
	tw.Close()
	obj := b.Bytes()
	dir := t.TempDir()
	key := "s/uploads/u/shard-0/chunk-0.tar"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	set := NewSet(backend.NewFileStore(dir), "bkt", []Chunk{{Key: key, Kind: PlainTar, Size: int64(len(obj))}}, Options{Readahead: -1})
	t.Cleanup(set.Close)
	for _, name := range []string{"/src/a.txt", "/src/b.txt"} {
		if off, _, err := set.tarOffset(context.Background(), 0, name); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s, a regular member and a link: offset %d, %v; want ErrCorrupt (ambiguous)", name, off, err)
		}
	}
	if _, _, err := set.tarOffset(context.Background(), 0, "/src/other"); err != nil {
		t.Fatalf("/src/other: %v", err)
	}
}
