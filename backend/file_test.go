package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fileFixture lays out DIR/store/<bucket>/... plus a secret file next to the
// store root that no key may reach.
func fileFixture(t *testing.T) (s *FileStore, root string, files map[string][]byte, secret []byte) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "store")
	secret = []byte("TOP SECRET, outside the store")
	if err := os.WriteFile(filepath.Join(dir, "secret"), secret, 0o644); err != nil {
		t.Fatal(err)
	}
	files = map[string][]byte{
		"a/b.bin":   randBytes(10, 70000),
		"a-b":       randBytes(11, 10),
		"a0":        randBytes(12, 11),
		"a/c":       randBytes(13, 12),
		"a/b/c":     randBytes(14, 13),
		"a/b-":      randBytes(15, 14),
		"b":         randBytes(16, 15),
		"z/y/x":     randBytes(17, 16),
		"empty":     {},
		"sp ace/ü?": randBytes(18, 17),
	}
	for k, v := range files {
		p := filepath.Join(root, "bkt", filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, v, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := []struct{ name, target string }{
		{"store/bkt/link-out", "../../secret"},
		{"store/bkt/a/link-abs", filepath.Join(dir, "secret")},
		{"store/bkt/link-in", "a/b.bin"},
		{"store/bkt/dirlink", "a"},
		{"store/evil", ".."},
	}
	for _, l := range links {
		if err := os.Symlink(l.target, filepath.Join(dir, filepath.FromSlash(l.name))); err != nil {
			t.Fatal(err)
		}
	}
	return NewFileStore(root), root, files, secret
}

func TestFileReadRangeExact(t *testing.T) {
	s, _, files, _ := fileFixture(t)
	data := files["a/b.bin"]
	size := int64(len(data))
	tests := []struct{ off, n int64 }{{0, 1}, {0, size}, {size - 1, 1}, {1000, 50000}, {65535, 2}}
	for _, key := range []string{"a/b.bin", "link-in", "dirlink/b.bin"} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/%d+%d", key, tc.off, tc.n), func(t *testing.T) {
				got, info, err := readAllRange(s, "bkt", key, tc.off, tc.n, "")
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, data[tc.off:tc.off+tc.n]) {
					t.Fatal("bytes differ from source")
				}
				if info.Size != size || info.Key != key || info.ETag == "" {
					t.Fatalf("info %+v", info)
				}
			})
		}
	}
	rc, info, err := s.Get(context.Background(), "bkt", "sp ace/ü?")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, files["sp ace/ü?"]) || info.Size != 17 {
		t.Fatalf("Get: %d bytes, %v, %+v", len(got), err, info)
	}
	rc, _, err = s.Get(context.Background(), "bkt", "empty")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(rc); err != nil || len(got) != 0 {
		t.Fatalf("empty: %d bytes, %v", len(got), err)
	}
	rc.Close()
}

func TestFileErrors(t *testing.T) {
	s, _, files, secret := fileFixture(t)
	size := int64(len(files["a/b.bin"]))
	st, err := s.Stat(context.Background(), "bkt", "a/b.bin")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		bucket, key string
		off, n      int64
		ifMatch     string
		want        error
	}{
		{"ok", "bkt", "a/b.bin", 0, 10, "", nil},
		{"if-match ok", "bkt", "a/b.bin", 0, 10, st.ETag, nil},
		{"if-match quoted", "bkt", "a/b.bin", 0, 10, `"` + st.ETag + `"`, nil},
		{"if-match wrong", "bkt", "a/b.bin", 0, 10, "1-2", ErrChanged},
		{"start past end", "bkt", "a/b.bin", size, 1, "", ErrInvalidRange},
		{"end past end", "bkt", "a/b.bin", size - 5, 6, "", ErrInvalidRange},
		{"huge length", "bkt", "a/b.bin", 1, 1 << 62, "", ErrInvalidRange},
		{"zero length", "bkt", "a/b.bin", 0, 0, "", ErrInvalidRange},
		{"negative offset", "bkt", "a/b.bin", -1, 2, "", ErrInvalidRange},
		{"missing key", "bkt", "nope", 0, 1, "", ErrNotFound},
		{"missing bucket", "nobkt", "a/b.bin", 0, 1, "", ErrNotFound},
		{"directory", "bkt", "a", 0, 1, "", ErrNotFound},
		{"file as directory", "bkt", "b/x", 0, 1, "", ErrNotFound},
		// Escape attempts: none may reach the secret next to the store.
		{"dotdot", "bkt", "../../secret", 0, 5, "", ErrNotFound},
		{"inner dotdot", "bkt", "a/../../../secret", 0, 5, "", ErrNotFound},
		{"dotdot to sibling key", "bkt", "a/../b", 0, 5, "", ErrNotFound},
		{"dot segment", "bkt", "./a/b.bin", 0, 5, "", ErrNotFound},
		{"double slash", "bkt", "a//b.bin", 0, 5, "", ErrNotFound},
		{"trailing slash", "bkt", "a/", 0, 5, "", ErrNotFound},
		{"absolute", "bkt", "/etc/passwd", 0, 5, "", ErrNotFound},
		{"NUL", "bkt", "a/b.bin\x00", 0, 5, "", ErrNotFound},
		{"empty key", "bkt", "", 0, 5, "", ErrNotFound},
		{"symlink out (relative)", "bkt", "link-out", 0, 5, "", ErrAccessDenied},
		{"symlink out (absolute)", "bkt", "a/link-abs", 0, 5, "", ErrAccessDenied},
		{"bucket symlink out", "evil", "secret", 0, 5, "", ErrAccessDenied},
		{"bucket dotdot", "..", "secret", 0, 5, "", ErrNotFound},
		{"bucket with slash", "bkt/a", "b.bin", 0, 5, "", ErrNotFound},
		{"bucket empty", "", "a/b.bin", 0, 5, "", ErrNotFound},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := readAllRange(s, tc.bucket, tc.key, tc.off, tc.n, tc.ifMatch)
			wantErr(t, err, tc.want, tc.bucket, tc.key)
			if tc.want == nil && !bytes.Equal(got, files["a/b.bin"][tc.off:tc.off+tc.n]) {
				t.Fatal("bytes differ from source")
			}
			if bytes.Contains(got, secret[:5]) {
				t.Fatal("read the secret")
			}
			if tc.want == nil || errors.Is(tc.want, ErrInvalidRange) || errors.Is(tc.want, ErrChanged) {
				return
			}
			// Get and Stat refuse the same names.
			rc, _, err := s.Get(ctx, tc.bucket, tc.key)
			if rc != nil {
				rc.Close()
			}
			wantErr(t, err, tc.want, tc.bucket, tc.key)
			_, err = s.Stat(ctx, tc.bucket, tc.key)
			wantErr(t, err, tc.want, tc.bucket, tc.key)
		})
	}
}

func TestFileETagAndChange(t *testing.T) {
	s, root, _, _ := fileFixture(t)
	ctx := context.Background()
	p := filepath.Join(root, "bkt", "b")
	st1, err := s.Stat(ctx, "bkt", "b")
	if err != nil {
		t.Fatal(err)
	}
	st2, _ := s.Stat(ctx, "bkt", "b")
	if st1.ETag != st2.ETag {
		t.Fatalf("unstable ETag %q vs %q", st1.ETag, st2.ETag)
	}
	// Open a read, then rewrite the file shorter: the open read must fail
	// rather than return short bytes.
	rc, _, err := s.ReadRange(ctx, "bkt", "b", 0, 15, st1.ETag)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 3); err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rc)
	rc.Close()
	wantErr(t, err, ErrBadResponse, "bkt", "b")

	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	st3, _ := s.Stat(ctx, "bkt", "b")
	if st3.ETag == st1.ETag || st3.Size != 3 {
		t.Fatalf("rewritten file: %+v, before %+v", st3, st1)
	}
	_, _, err = readAllRange(s, "bkt", "b", 0, 2, st1.ETag)
	wantErr(t, err, ErrChanged, "bkt", "b")
}

func TestFileList(t *testing.T) {
	s, _, files, _ := fileFixture(t)
	var all []string
	for k := range files {
		all = append(all, k)
	}
	all = append(all, "link-in") // a symlink to a file inside the bucket
	slices.Sort(all)
	filter := func(prefix string) []string {
		var out []string
		for _, k := range all {
			if strings.HasPrefix(k, prefix) {
				out = append(out, k)
			}
		}
		return out
	}
	// Prefixes that name directories whole start the walk deeper; through a
	// directory link, a file, a missing level or an odd segment they list
	// what the whole walk would (the filter below).
	for _, prefix := range []string{"", "a", "a/", "a/b", "a/b/", "a/b/c", "a-", "z/y/x", "z/y/", "zz", "sp ace/",
		"dirlink/", "dirlink/b/", "b/", "b/x", "nope/x/", "a//b", "./a/", "a/../a/", "link-in/"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			var got []string
			err := s.List(context.Background(), "bkt", prefix, func(oi ObjectInfo) error {
				got = append(got, oi.Key)
				if want, ok := files[oi.Key]; ok && oi.Size != int64(len(want)) {
					return fmt.Errorf("%s: size %d", oi.Key, oi.Size)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := filter(prefix); !slices.Equal(got, want) {
				t.Fatalf("listed %q\nwant   %q", got, want)
			}
		})
	}
	err := s.List(context.Background(), "nobkt", "", func(ObjectInfo) error { return nil })
	wantErr(t, err, ErrNotFound, "nobkt", "")
	err = s.List(context.Background(), "evil", "", func(ObjectInfo) error { return nil })
	wantErr(t, err, ErrAccessDenied, "evil", "")
}

func TestOpenStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url     string
		wantDir string // FileStore dir, "" for S3Store
		ok      bool
	}{
		{"file://" + dir, dir, true},
		{"file://" + rel, dir, true},
		{"file://" + filepath.Join(dir, "missing"), "", false},
		{"file://" + filepath.Join(dir, "f"), "", false},
		{"file://", "", false},
		{"s3://", "", true},
		{"s3://ignored-host", "", true},
		{"http://example.com", "", false},
		{"/plain/path", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			st, err := OpenStore(context.Background(), tc.url, S3Config{Region: "us-east-1", Anonymous: true})
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), tc.url) {
					t.Fatalf("err = %v, want an error naming %q", err, tc.url)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch s := st.(type) {
			case *FileStore:
				if s.Dir() != tc.wantDir {
					t.Fatalf("dir %q, want %q", s.Dir(), tc.wantDir)
				}
			case *S3Store:
				if tc.wantDir != "" {
					t.Fatal("got an S3Store")
				}
			}
		})
	}
}

// FuzzValidFileKey: every key the FileStore accepts is already clean and
// relative, so joining it under the bucket directory can never leave it.
func FuzzValidFileKey(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "a/../../x", "/abs", "a//b", "./a", "a/.", "a\x00b", "..", "...", "a/..b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if validFileKey(key) != nil {
			return
		}
		if path.Clean(key) != key || path.IsAbs(key) || key == ".." || strings.HasPrefix(key, "../") {
			t.Fatalf("accepted unclean key %q", key)
		}
		base := "/store/bkt"
		if p := path.Join(base, key); !strings.HasPrefix(p, base+"/") {
			t.Fatalf("key %q escapes to %q", key, p)
		}
	})
}
