package cargopack

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// needTool waits a while for a system tool being installed, then fails.
// It never skips: the independent reader is the point of the test.
func needTool(t *testing.T, name string) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not installed (needed for the independent-reader test; apt-get install zstd tar)", name)
		}
		time.Sleep(3 * time.Second)
	}
}

// independentSources is a tree with every shape the CLI tools must read:
// text, incompressible data, a PNG-named file, an empty file, a long and a
// non-ASCII name, nested directories, and a large file.
func independentSources() map[string][]byte {
	long := strings.Repeat("deep-directory-name/", 6) + strings.Repeat("x", 90) + ".txt"
	return map[string][]byte{
		"README.md":            textBytes(1, 3000),
		"data/a.csv":           textBytes(2, 70000),
		"data/b.json":          textBytes(3, 512),
		"data/empty":           {},
		"data/noise.bin":       randBytes(4, 40000),
		"img/pic.png":          append([]byte("\x89PNG\r\n\x1a\n"), randBytes(5, 9000)...),
		"naïve/ünïcödé ✓.txt":  textBytes(6, 1234),
		long:                   textBytes(7, 600),
		"big/large.log":        textBytes(8, 300000),
		"big/large-noise.dat":  randBytes(9, 200000),
		"exact/block-size.txt": textBytes(10, 1024),
	}
}

// TestIndependentReader extracts every chunk with Debian's zstd and GNU tar
// and compares each extracted file with its source, for each archive shape.
func TestIndependentReader(t *testing.T) {
	zstdBin := needTool(t, "zstd")
	tarBin := needTool(t, "tar")
	cases := []struct {
		name string
		opt  Options
	}{
		{"framed-2.1", Options{FrameSize: 16 << 10, ChunkSize: 256 << 10, Prefix: "backups"}},
		{"framed-no-subframes", Options{FrameSize: 16 << 10, NoSubFrames: true}},
		{"unframed", Options{ChunkSize: 128 << 10}},
		{"plain-tar", Options{PlainTar: func(string) bool { return true }, ChunkSize: 200 << 10}},
		{"split", Options{FrameSize: 8 << 10, SplitSize: 64 << 10, ChunkSize: 100 << 10}},
		{"relative-paths-v2.0", Options{RelativePaths: true, Version: "2.0"}},
		{"dedup-v1.0", Options{Dedup: true, Version: "1.0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := independentSources()
			if tc.opt.Dedup {
				src["copy/of-readme.md"] = src["README.md"]
			}
			p := pack(t, src, tc.opt)
			out := t.TempDir()
			var names []string
			for i, c := range p.m.Chunks {
				obj := filepath.Join(p.dir, p.opt.Bucket, filepath.FromSlash(p.storedKey(t, c.S3Key)))
				tarPath := obj
				if strings.HasSuffix(c.S3Key, ".tar.zst") {
					tarPath = filepath.Join(t.TempDir(), fmt.Sprintf("chunk%d.tar", i))
					cmd := exec.Command(zstdBin, "-q", "-dc", obj)
					stdout, err := cmd.Output()
					if err != nil {
						t.Fatalf("zstd -dc %s: %v", c.S3Key, err)
					}
					if err := os.WriteFile(tarPath, stdout, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				var stderr bytes.Buffer
				cmd := exec.Command(tarBin, "-tvf", tarPath)
				cmd.Stderr = &stderr
				list, err := cmd.Output()
				if err != nil {
					t.Fatalf("tar -tv %s: %v\n%s", c.S3Key, err, stderr.Bytes())
				}
				lines := strings.Split(strings.TrimSpace(string(list)), "\n")
				names = append(names, lines...)
				if x, err := exec.Command(tarBin, "-xf", tarPath, "-C", out).CombinedOutput(); err != nil {
					t.Fatalf("tar -x %s: %v\n%s", c.S3Key, err, x)
				}
			}
			// Every stored (non-duplicate) entry is one tar member.
			want := 0
			for _, e := range p.m.Files {
				if !e.IsDuplicate {
					want++
				}
			}
			if len(names) != want {
				t.Fatalf("tar lists %d members, manifest has %d stored entries:\n%s", len(names), want, strings.Join(names, "\n"))
			}
			// Reassemble each source file from what tar extracted.
			parts := map[string][]manifest.FileEntry{}
			for _, e := range p.m.Files {
				if !e.IsDuplicate {
					parts[e.Path] = append(parts[e.Path], e)
				}
			}
			checked := 0
			for path, es := range parts {
				sort.Slice(es, func(i, j int) bool { return es[i].PartIndex < es[j].PartIndex })
				var got []byte
				onDisk := filepath.Join(out, filepath.FromSlash(strings.TrimPrefix(path, "/")))
				if es[0].TotalParts > 1 {
					for k := range es {
						b, err := os.ReadFile(fmt.Sprintf("%s.part%d", onDisk, k))
						if err != nil {
							t.Fatalf("part %d of %s: %v", k, path, err)
						}
						got = append(got, b...)
					}
				} else {
					b, err := os.ReadFile(onDisk)
					if err != nil {
						t.Fatalf("extracted %s: %v", path, err)
					}
					got = b
				}
				if !bytes.Equal(got, p.src[p.relOf(path)]) {
					t.Errorf("%s: extracted %d bytes differ from the %d source bytes", path, len(got), len(p.src[p.relOf(path)]))
				}
				checked++
			}
			// Duplicates resolve to an extracted original with equal bytes.
			for _, e := range p.m.Files {
				if e.IsDuplicate {
					if !bytes.Equal(p.src[p.relOf(e.Path)], p.src["README.md"]) {
						t.Errorf("duplicate %s does not equal its original", e.Path)
					}
				}
			}
			dups := 0
			for _, e := range p.m.Files {
				if e.IsDuplicate {
					dups++
				}
			}
			if checked != len(p.src)-dups {
				t.Errorf("checked %d extracted files, want %d", checked, len(p.src)-dups)
			}
		})
	}
}
