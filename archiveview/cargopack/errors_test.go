package cargopack

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// liar is a File whose Open yields a different number of bytes than Size.
func liar(rel string, size int64, actual []byte) File {
	return File{Rel: rel, Size: size, ModTime: testMTime, Mode: 0o644,
		Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(actual)), nil }}
}

func TestWriteErrors(t *testing.T) {
	ok := FromMap(map[string][]byte{"a.txt": []byte("hello")}, testMTime)
	boom := errors.New("disk on fire")
	cases := []struct {
		name  string
		files []File
		opt   Options
		want  string
	}{
		{"no-bucket", ok, Options{Bucket: "-"}, ""},
		{"bad-version", ok, Options{Version: "3.0"}, `unsupported manifest version "3.0"`},
		{"direct-split", ok, Options{Direct: true, SplitSize: 10}, "exclusive"},
		{"short-file", []File{liar("short.txt", 100, []byte("tiny"))}, Options{FrameSize: 4096}, "short.txt"},
		{"long-file", []File{liar("long.txt", 3, []byte("much longer"))}, Options{}, "long.txt: file longer"},
		{"short-direct", []File{liar("sd.txt", 100, []byte("tiny"))}, Options{Direct: true}, "sd.txt"},
		{"long-direct", []File{liar("ld.txt", 2, []byte("abc"))}, Options{Direct: true}, "ld.txt: file longer"},
		{"short-dedup", []File{liar("dd.txt", 100, []byte("tiny"))}, Options{Dedup: true}, "dd.txt"},
		{"open-fails", []File{{Rel: "x.txt", Size: 1, Open: func() (io.ReadCloser, error) { return nil, boom }}}, Options{}, "disk on fire"},
		{"dup-rel", append(FromMap(map[string][]byte{"a": nil}, testMTime), FromMap(map[string][]byte{"a": nil}, testMTime)...), Options{}, `duplicate path "a"`},
		{"abs-rel", FromMap(map[string][]byte{"/etc/passwd": nil}, testMTime), Options{}, "invalid relative path"},
		{"dotdot-rel", FromMap(map[string][]byte{"a/../b": nil}, testMTime), Options{}, "invalid relative path"},
		{"bad-upload-id", ok, Options{UploadID: "a/b"}, "invalid upload id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opt.Bucket == "-" {
				tc.opt.Bucket = ""
				tc.want = "Bucket is required"
			} else {
				tc.opt.Bucket = "b"
			}
			dir := t.TempDir()
			_, err := Write(context.Background(), DirSink(dir), tc.files, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if errors.Is(err, boom) != (tc.name == "open-fails") {
				t.Errorf("errors.Is(boom) wrong for %v", err)
			}
			// Nothing half-written is left as a finished upload: no manifest.
			filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
				if err == nil && strings.Contains(p, "manifest.json") {
					t.Errorf("manifest %s written despite the error", p)
				}
				return nil
			})
		})
	}
}

func TestSinkFailureNamesKey(t *testing.T) {
	dir := t.TempDir()
	// A regular file where the bucket directory should be makes every Put fail.
	if err := os.WriteFile(filepath.Join(dir, "b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Write(context.Background(), DirSink(dir), FromMap(map[string][]byte{"a.txt": []byte("x")}, testMTime),
		Options{Bucket: "b", UploadID: "u", Prefix: "p"})
	if err == nil || !strings.Contains(err.Error(), "p/uploads/u/shard-0/chunk-0.tar.zst") {
		t.Fatalf("error %v does not name the chunk key", err)
	}
}

func TestDirSinkRejectsBadKeys(t *testing.T) {
	s := DirSink(t.TempDir())
	for _, key := range []string{"a/../../x", "./a", "", "dir/"} {
		if err := s.Put(context.Background(), "b", key, strings.NewReader("x"), 1); err == nil {
			t.Errorf("Put(%q) succeeded", key)
		}
	}
	if err := s.Put(context.Background(), "b", "k", strings.NewReader("xyz"), 2); err == nil {
		t.Error("Put with a size mismatch succeeded")
	}
	if err := s.Put(context.Background(), "../b", "k", strings.NewReader("x"), 1); err == nil {
		t.Error("Put with a bad bucket succeeded")
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	_, err := Write(ctx, DirSink(dir), FromMap(map[string][]byte{"a": []byte("x")}, testMTime), Options{Bucket: "b"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestEmptyUpload(t *testing.T) {
	p := pack(t, map[string][]byte{}, Options{Prefix: ""})
	if len(p.m.Files) != 0 || len(p.m.Chunks) != 0 || p.m.Files == nil || p.m.Chunks == nil {
		t.Fatalf("files %v chunks %v", p.m.Files, p.m.Chunks)
	}
	if p.res.ManifestKey != "uploads/20260102-test/manifest.json.gz" {
		t.Errorf("manifest key %q with empty prefix", p.res.ManifestKey)
	}
	_ = time.Second
}
