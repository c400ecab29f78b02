package manifest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestResolveObjectKey(t *testing.T) {
	tests := []struct {
		name, bucket, prefix, key, want string
	}{
		{"prefix-relative (current writer)", "bkt", "backups", "uploads/u1/shard-0/chunk-0.tar.zst", "backups/uploads/u1/shard-0/chunk-0.tar.zst"},
		{"prefix-included (fixtures, docs)", "bkt", "backups", "backups/uploads/u1/shard-0/chunk-0.tar.zst", "backups/uploads/u1/shard-0/chunk-0.tar.zst"},
		{"bucket-qualified", "bkt", "backups", "bkt/backups/uploads/u1/c.tar", "backups/uploads/u1/c.tar"},
		{"bucket-qualified, no prefix inside", "bkt", "backups", "bkt/uploads/u1/c.tar", "uploads/u1/c.tar"},
		{"s3 URL", "bkt", "backups", "s3://bkt/backups/uploads/u1/c.tar", "backups/uploads/u1/c.tar"},
		{"s3 URL, prefix-relative key", "bkt", "backups", "s3://bkt/uploads/u1/c.tar", "backups/uploads/u1/c.tar"},
		{"https virtual-hosted URL", "bkt", "backups", "https://bkt.s3.amazonaws.com/backups/uploads/u1/c.tar", "backups/uploads/u1/c.tar"},
		{"https path-style URL", "bkt", "backups", "https://s3.amazonaws.com/bkt/backups/uploads/u1/c.tar", "backups/uploads/u1/c.tar"},
		{"leading slash", "bkt", "backups", "/backups/uploads/u1/c.tar", "backups/uploads/u1/c.tar"},
		{"leading slash, relative", "bkt", "backups", "/uploads/u1/c.tar", "backups/uploads/u1/c.tar"},
		{"prefix with slashes", "bkt", "/backups/", "uploads/u1/c.tar", "backups/uploads/u1/c.tar"},
		{"prefix with slashes, included", "bkt", "backups/", "backups/uploads/u1/c.tar", "backups/uploads/u1/c.tar"},
		{"empty prefix", "bkt", "", "uploads/u1/c.tar", "uploads/u1/c.tar"},
		{"empty prefix, leading slash (Sprintf with empty prefix)", "bkt", "", "/uploads/u1/c.tar", "uploads/u1/c.tar"},
		{"empty prefix, bucket-qualified", "bkt", "", "bkt/uploads/u1/c.tar", "uploads/u1/c.tar"},
		{"prefix is a string prefix but not a segment", "bkt", "back", "backups/uploads/u1/c.tar", "back/backups/uploads/u1/c.tar"},
		{"key equals prefix", "bkt", "backups", "backups", "backups"},
		{"multi-segment prefix (writers/)", "bkt", "base/writers/w1", "uploads/u1/c.tar", "base/writers/w1/uploads/u1/c.tar"},
		{"not a scheme: slash before ://", "bkt", "p", "a/b://c", "p/a/b://c"},
		{"empty bucket never strips", "", "p", "/x/y", "p/x/y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResolveObjectKey(tt.bucket, tt.prefix, tt.key); got != tt.want {
				t.Errorf("ResolveObjectKey(%q, %q, %q) = %q, want %q", tt.bucket, tt.prefix, tt.key, got, tt.want)
			}
		})
	}
}

func TestRelativeKey(t *testing.T) {
	tests := []struct {
		name, source, path, want string
		wantErr                  bool
	}{
		{"absolute walked path", "/home/u/project", "/home/u/project/data/a.txt", "data/a.txt", false},
		{"source trailing slash ignored", "/home/u/project/", "/home/u/project/data/a.txt", "data/a.txt", false},
		{"segment boundary", "/home/u/proj", "/home/u/project/a.txt", "home/u/project/a.txt", false},
		{"single-file upload", "/home/u/file.bin", "/home/u/file.bin", "file.bin", false},
		{"relative root", "src", "src/a.txt", "a.txt", false},
		{"docs form, not under source", "/tmp/src", "data/a.txt", "data/a.txt", false},
		{"not under source, absolute", "/a", "/b/c.txt", "b/c.txt", false},
		{"root source", "/", "/etc/x", "etc/x", false},
		{"empty source", "", "/x/y", "x/y", false},
		{"windows backslashes", `C:\Users\u\data`, `C:\Users\u\data\sub\f.txt`, "sub/f.txt", false},
		{"windows volume kept when not under source", `D:\x`, `C:\other\f.txt`, "other/f.txt", false},
		{"dot and empty segments", "/s", "/s/./a//b/./c", "a/b/c", false},
		{"trailing slash on path", "/s", "/s/a/b/", "a/b", false},
		{"dots inside a name are fine", "/s", "/s/a..b/...", "a..b/...", false},
		{"unicode", "/s", "/s/日本/é.txt", "日本/é.txt", false},
		{"dotdot segment", "/s", "/s/a/../../etc/passwd", "", true},
		{"dotdot leading", "", "../x", "", true},
		{"dotdot via backslash", "/s", `/s/a\..\..\x`, "", true},
		{"NUL", "/s", "/s/a\x00b", "", true},
		{"control char", "/s", "/s/a\nb", "", true},
		{"DEL", "/s", "/s/a\x7fb", "", true},
		{"invalid UTF-8", "/s", "/s/a\xffb", "", true},
		{"U+FFFE (no XML can carry it)", "/s", "/s/a\uFFFEb", "", true},
		{"U+FFFF (no XML can carry it)", "/s", "/s/\uFFFF", "", true},
		{"U+FFFD is an ordinary character", "/s", "/s/a\uFFFDb", "a\uFFFDb", false},
		{"empty", "/s", "", "", true},
		{"only slashes and dots", "/s", "/s/./", "", true},
		{"source itself is root dir", "/", "/", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RelativeKey(tt.source, tt.path)
			if tt.wantErr {
				if err == nil || !errors.Is(err, ErrUnsafePath) {
					t.Fatalf("RelativeKey(%q, %q) = %q, %v; want ErrUnsafePath", tt.source, tt.path, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("RelativeKey(%q, %q) = %q, %v; want %q", tt.source, tt.path, got, err, tt.want)
			}
		})
	}
}

func TestManifestKeyCandidates(t *testing.T) {
	tests := []struct {
		prefix, id string
		want       []string
	}{
		{"backups", "u1", []string{
			"backups/uploads/u1/manifest.json.gz", "backups/uploads/u1/manifest.json",
			"backups/uploads/u1/manifest.encrypted.json.gz", "backups/uploads/u1/manifest.encrypted.json"}},
		{"backups/", "u1", []string{
			"backups/uploads/u1/manifest.json.gz", "backups/uploads/u1/manifest.json",
			"backups//uploads/u1/manifest.json.gz", "backups//uploads/u1/manifest.json",
			"backups/uploads/u1/manifest.encrypted.json.gz", "backups/uploads/u1/manifest.encrypted.json"}},
		{"", "u1", []string{
			"uploads/u1/manifest.json.gz", "uploads/u1/manifest.json",
			"/uploads/u1/manifest.json.gz", "/uploads/u1/manifest.json",
			"uploads/u1/manifest.encrypted.json.gz", "uploads/u1/manifest.encrypted.json"}},
		{"a/b", "20260721-0a1b2c3d", []string{
			"a/b/uploads/20260721-0a1b2c3d/manifest.json.gz", "a/b/uploads/20260721-0a1b2c3d/manifest.json",
			"a/b/uploads/20260721-0a1b2c3d/manifest.encrypted.json.gz", "a/b/uploads/20260721-0a1b2c3d/manifest.encrypted.json"}},
	}
	for _, tt := range tests {
		if got := ManifestKeyCandidates(tt.prefix, tt.id); !slices.Equal(got, tt.want) {
			t.Errorf("ManifestKeyCandidates(%q, %q) =\n %q\nwant\n %q", tt.prefix, tt.id, got, tt.want)
		}
	}
}

func TestUploadDir(t *testing.T) {
	tests := []struct {
		key, dir, id string
		ok           bool
	}{
		{"backups/uploads/u1/manifest.json.gz", "backups", "u1", true},
		{"backups/uploads/u1/manifest.json", "backups", "u1", true},
		{"uploads/u1/manifest.json.gz", "", "u1", true},
		{"/uploads/u1/manifest.json.gz", "", "u1", true},
		{"backups//uploads/u1/manifest.json.gz", "backups/", "u1", true},
		{"base/writers/w1/uploads/u1/manifest.json.gz", "base/writers/w1", "u1", true},
		{"a/uploads/b/uploads/u1/manifest.json.gz", "a/uploads/b", "u1", true},
		{"backups/uploads/u1/manifest.partial.json.gz", "", "", false},
		{"backups/uploads/u1/manifest.encrypted.json.gz", "", "", false},
		{"backups/u1/manifest.json.gz", "", "", false},
		{"backups/uploads//manifest.json.gz", "", "", false},
		{"manifest.json.gz", "", "", false},
		{"myuploads/u1/manifest.json.gz", "", "", false},
	}
	for _, tt := range tests {
		dir, id, ok := UploadDir(tt.key)
		if dir != tt.dir || id != tt.id || ok != tt.ok {
			t.Errorf("UploadDir(%q) = %q, %q, %v; want %q, %q, %v", tt.key, dir, id, ok, tt.dir, tt.id, tt.ok)
		}
		if ok && !slices.Contains(ManifestKeyCandidates(dir, id), tt.key) {
			t.Errorf("ManifestKeyCandidates(UploadDir(%q)) = %q lacks the key itself", tt.key, ManifestKeyCandidates(dir, id))
		}
	}
}

func FuzzRelativeKey(f *testing.F) {
	for _, s := range [][2]string{
		{"/home/u/project", "/home/u/project/data/a.txt"}, {"/s/", "/s"}, {"", "../x"}, {`C:\a`, `C:\a\b\..\c`},
		{"/s", "/s/./a//b"}, {"/", "/"}, {"src", "src/a\x00"}, {"/s", "/s/a\xff"}, {"/s", "/s/..."}, {"x", `x\\y`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, source, p string) {
		key, err := RelativeKey(source, p)
		// AppendRelativeKey appends exactly RelativeKey's answer after what
		// dst holds, and leaves dst's content alone on error.
		dst := []byte("prefix|")
		got, aerr := AppendRelativeKey(dst, source, p)
		if (aerr == nil) != (err == nil) || string(got[:len(dst)]) != "prefix|" ||
			err == nil && string(got[len(dst):]) != key || err != nil && len(got) != len(dst) {
			t.Fatalf("AppendRelativeKey(%q, %q) = %q, %v; RelativeKey = %q, %v", source, p, got, aerr, key, err)
		}
		if err != nil {
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("error %v does not wrap ErrUnsafePath", err)
			}
			return
		}
		if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "//") || strings.Contains(key, `\`) {
			t.Fatalf("RelativeKey(%q, %q) = %q: empty, leading /, // or backslash", source, p, key)
		}
		for seg := range strings.SplitSeq(key, "/") {
			if seg == ".." || seg == "." || seg == "" {
				t.Fatalf("RelativeKey(%q, %q) = %q: bad segment %q", source, p, key, seg)
			}
		}
		if !utf8.ValidString(key) || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xFFFE || r == 0xFFFF }) {
			t.Fatalf("RelativeKey(%q, %q) = %q: invalid UTF-8 or control character", source, p, key)
		}
		if again, err := RelativeKey("", key); err != nil || again != key {
			t.Fatalf("not idempotent: %q -> %q, %v", key, again, err)
		}
	})
}

func FuzzResolveObjectKey(f *testing.F) {
	for _, s := range [][3]string{
		{"bkt", "backups", "uploads/u/c.tar"}, {"bkt", "backups/", "backups/uploads/u/c.tar"},
		{"bkt", "", "/uploads/u/c.tar"}, {"bkt", "p", "s3://bkt/p/x"}, {"bkt", "p", "https://h/bkt/x"},
		{"bkt", "p", "bkt/x"}, {"", "", ""}, {"b", "p", "a/b://c"}, {"b", "p", "://x"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, bucket, prefix, key string) {
		got := ResolveObjectKey(bucket, prefix, key)
		if strings.HasPrefix(got, "/") {
			t.Fatalf("ResolveObjectKey(%q, %q, %q) = %q has a leading /", bucket, prefix, key, got)
		}
		p := strings.Trim(prefix, "/")
		// The prefix-included form is kept verbatim.
		if p != "" && !strings.HasPrefix(key, "/") {
			if in := p + "/" + key; ResolveObjectKey(bucket, prefix, in) != in && !strings.Contains(in, "://") {
				t.Fatalf("prefix-included key %q not kept: %q", in, ResolveObjectKey(bucket, prefix, in))
			}
		}
		// A plain relative key (no URL, no bucket qualifier) gets the prefix.
		if p != "" && !strings.Contains(key, "://") && (bucket == "" || !strings.HasPrefix(strings.TrimLeft(key, "/"), bucket+"/")) {
			if got != p && !strings.HasPrefix(got, p+"/") {
				t.Fatalf("ResolveObjectKey(%q, %q, %q) = %q lacks the prefix", bucket, prefix, key, got)
			}
		}
	})
}

// FuzzUploadDir: UploadDir's split agrees with ManifestKeyCandidates, and
// KeyRoot of such a key confines something and holds the upload's own
// chunk keys (the slash forms confined nothing or nothing of their own
// before 6be2fbf).
func FuzzUploadDir(f *testing.F) {
	for _, s := range []string{"backups/uploads/u1/manifest.json.gz", "/uploads/u/manifest.json", "a//uploads/x/manifest.json", "/p/uploads/u/manifest.json.gz",
		"uploads/manifest.json", "x/uploads//manifest.json.gz", "manifest.json"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		dir, id, ok := UploadDir(key)
		if !ok {
			return
		}
		if id == "" || strings.Contains(id, "/") {
			t.Fatalf("UploadDir(%q) = id %q", key, id)
		}
		if !slices.Contains(ManifestKeyCandidates(dir, id), key) {
			t.Fatalf("UploadDir(%q) = %q, %q, but ManifestKeyCandidates gives %q", key, dir, id, ManifestKeyCandidates(dir, id))
		}
		// The upload's confinement: never the whole bucket, and its own
		// chunk keys (recorded relative to the prefix the key's folder
		// gives) lie under it.
		root := KeyRoot(key)
		if root == "" {
			t.Fatalf("KeyRoot(%q) confines nothing", key)
		}
		if own := ResolveObjectKey("bkt", dir, "uploads/"+id+"/shard-0/chunk-0.tar.zst"); !Confined(root, nil, own) {
			t.Fatalf("KeyRoot(%q) = %q does not hold the upload's own chunk key %q", key, root, own)
		}
	})
}

func TestCheckObjectKeyAndUploadID(t *testing.T) {
	for _, tt := range []struct {
		key string
		ok  bool
	}{
		{"hp/uploads/x/shard-0/chunk-0.tar.zst", true},
		{"a..b/c", true},
		{"..a/b", true},
		{"", false},
		{"..", false},
		{"hp/../x", false},
		{"hp/../../../etc/passwd.tar.zst", false},
		{"x/..", false},
		{ResolveObjectKey("b", "hp", "../../etc/passwd"), false},
		{ResolveObjectKey("b", "hp/../..", "uploads/x/chunk.tar"), false},
	} {
		err := CheckObjectKey(tt.key)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrUnsafePath)) {
			t.Errorf("CheckObjectKey(%q) = %v, want ok %v", tt.key, err, tt.ok)
		}
	}
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{"20250304-a0a0a0a0", true},
		{"a..b", true},
		{"", false},
		{".", false},
		{"..", false},
		{"../../../../etc", false},
		{"a/b", false},
		{`a\b`, false},
	} {
		err := CheckUploadID(tt.id)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrUnsafePath)) {
			t.Errorf("CheckUploadID(%q) = %v, want ok %v", tt.id, err, tt.ok)
		}
	}
}
