package archiveview

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
)

// unframedShapes are the shapes no frame checksum covers, with a file
// larger than the small-extent limit (SmallVerifyBytes is 64 KiB here).
func unframedShapes() []rpShape {
	plain := func(string) bool { return true }
	return []rpShape{
		{name: "plain-tar", opt: cargopack.Options{PlainTar: plain}},
		{name: "direct", opt: cargopack.Options{Direct: true}},
		{name: "stream-zstd", opt: cargopack.Options{FrameSize: 0}},
		{name: "giant-frame", opt: cargopack.Options{FrameSize: 64 << 10, NoSubFrames: true}, opts: Options{MaxFrameBytes: 128 << 10}},
	}
}

// ufObject is the object holding key's bytes, and where in it a flip
// lands inside the file (for zstd kinds: somewhere in the compressed
// middle of the file's frame or stream).
func ufObject(t *testing.T, ra *rpArchive, key string) (path string, flipAt int64) {
	t.Helper()
	c, e := rpChunkOf(t, ra, key)
	path = filepath.Join(ra.dir, rpBucket, filepath.FromSlash(c.Key))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	switch c.Kind {
	case chunkio.Direct:
		return path, e.Length * 3 / 4
	case chunkio.PlainTar:
		return path, e.Off + e.Length*3/4
	}
	if n := len(c.Frames); n > 0 {
		lo, _, err := chunkio.CoverFrames(c.Frames, e.Off, e.Off+e.Length)
		if err != nil {
			t.Fatal(err)
		}
		f := c.Frames[lo]
		return path, f.COff + f.CSize*3/4
	}
	return path, fi.Size() * 3 / 4
}

// TestUnframedRangedReadsVerified: in every shape without frame checksums,
// a ranged read of part of a large file is served only after the file's
// (or object's, or giant frame's) bytes were checked whole: a flipped byte
// anywhere in them makes a ranged read far from the flip fail, never serve
// a clean wrong-or-right answer; a clean archive is read whole once for the
// first ranged read and never again; TrustUnframed skips the check.
func TestUnframedRangedReadsVerified(t *testing.T) {
	files := map[string][]byte{"big.txt": rpText(41, 900<<10), "small.txt": rpText(42, 3000)}
	for _, sh := range unframedShapes() {
		t.Run(sh.name, func(t *testing.T) {
			opts := sh.opts
			opts.SmallVerifyBytes = 64 << 10
			opts.Readahead = -1
			ra := rpNew(t, files, sh.opt, opts)
			want := files["big.txt"]
			off, n := int64(10), int64(5000) // far from the flip at 3/4

			// Clean: the first ranged read reads the whole unit once.
			ra.faulty.Reset()
			got, err := ra.read(t, "big.txt", off, n, true)
			if err != nil || !bytes.Equal(got, want[off:off+n]) {
				t.Fatalf("clean ranged read: %v", err)
			}
			first := ra.faulty.BytesReturned()
			ra.faulty.Reset()
			got, err = ra.read(t, "big.txt", 700<<10, n, false)
			if err != nil || !bytes.Equal(got, want[700<<10:700<<10+n]) {
				t.Fatalf("second ranged read: %v", err)
			}
			second := ra.faulty.BytesReturned()
			t.Logf("%s: first ranged read %d backend bytes, second %d", sh.name, first, second)
			if first < int64(len(want))/8 { // compressed kinds read their compressed bytes
				t.Errorf("first ranged read fetched %d bytes: the file was not read whole", first)
			}

			// Damaged: a fresh archive (no verified state) refuses every
			// ranged read of the file.
			path, at := ufObject(t, ra, "big.txt")
			hoFlip(t, path, at)
			for _, trust := range []bool{false, true} {
				o := opts
				o.TrustUnframed = trust
				rb := rpOpenDir(t, ra.dir, ra.res, files, o)
				got, err := rb.read(t, "big.txt", off, n, true)
				switch {
				case !trust && err == nil:
					t.Fatalf("damaged %s: ranged read far from the flip served %d bytes with no error", sh.name, len(got))
				case !trust && !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrCorrupt):
					t.Fatalf("damaged %s: %v, want a checksum or corruption error", sh.name, err)
				case trust && sh.name != "giant-frame" && sh.name != "stream-zstd" && (err != nil || !bytes.Equal(got, want[off:off+n])):
					// Trusting S3 for these shapes serves the untouched
					// range as it is (zstd kinds may still fail to decode).
					t.Fatalf("damaged %s with TrustUnframed: %v", sh.name, err)
				}
				if !trust {
					// The whole-file read fails too (checked as it streams).
					if got, err := rb.read(t, "big.txt", 0, int64(len(want)), true); err == nil {
						t.Fatalf("damaged %s: whole read served %d bytes", sh.name, len(got))
					}
				}
			}
		})
	}
}

// TestVerifiedObjectReplaced: after a unit was verified, a replaced object
// is never trusted: later reads carry If-Match with the ETag the check saw.
func TestVerifiedObjectReplaced(t *testing.T) {
	files := map[string][]byte{"big.txt": rpText(43, 600<<10)}
	ra := rpNew(t, files, cargopack.Options{Direct: true}, Options{SmallVerifyBytes: 64 << 10, Readahead: -1})
	if _, err := ra.read(t, "big.txt", 100, 1000, true); err != nil {
		t.Fatal(err)
	}
	path, _ := ufObject(t, ra, "big.txt")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[5] ^= 1
	if err := os.WriteFile(path+".new", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil { // a new object: new mtime, new ETag
		t.Fatal(err)
	}
	// The FileStore's ETag is mtime and size. A rewrite in the same tick of
	// the kernel's file clock (a few ms) keeps the mtime, and this test
	// takes about 10 ms: give the new object a later mtime, as any later
	// upload would have, or the test fails about once in a hundred runs.
	if err := os.Chtimes(path, time.Time{}, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := ra.read(t, "big.txt", 100_000, 1000, true); !errors.Is(err, backend.ErrChanged) {
		t.Fatalf("read after the object was replaced: %v, want backend.ErrChanged", err)
	}
}

// TestVerifiedUnitsPersist: checked units survive a restart through the
// persistent index, pinned to the ETag the check saw: the restarted archive
// serves ranged reads without reading the object whole again.
func TestVerifiedUnitsPersist(t *testing.T) {
	files := map[string][]byte{"big.txt": rpText(44, 700<<10)}
	ra := rpNew(t, files, cargopack.Options{PlainTar: func(string) bool { return true }}, Options{SmallVerifyBytes: 64 << 10, Readahead: -1})
	if _, err := ra.read(t, "big.txt", 100, 1000, true); err != nil {
		t.Fatal(err)
	}
	if len(ra.a.set.VerifiedUnits()) == 0 {
		t.Fatal("no verified unit after a ranged read")
	}
	var idx bytes.Buffer
	if err := ra.a.WriteIndex(&idx); err != nil {
		t.Fatal(err)
	}
	b, err := OpenIndex(context.Background(), ra.faulty, &idx, Options{Name: "re", SmallVerifyBytes: 64 << 10, Readahead: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ra.faulty.Reset()
	f, _ := b.Stat("big.txt")
	r, err := b.Open(context.Background(), f, 500_000, 2000)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := got.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !bytes.Equal(got.Bytes(), files["big.txt"][500_000:502_000]) {
		t.Fatal("wrong bytes after the restart")
	}
	if n := ra.faulty.BytesReturned(); n > 4096 {
		t.Errorf("restarted archive read %d backend bytes for a 2000-byte range: the verified unit was not kept", n)
	}
}

// TestInfoUnverifiable: files no checksum covers are counted and named;
// an archive with checksums has none.
func TestInfoUnverifiable(t *testing.T) {
	files := map[string][]byte{"a.txt": rpText(1, 5000), "b/c.txt": rpText(2, 300_000)}
	for _, tc := range []struct {
		name string
		opt  cargopack.Options
		want int
	}{
		{"framed with checksums", cargopack.Options{FrameSize: 64 << 10}, 0},
		{"direct with checksums", cargopack.Options{Direct: true}, 0},
		{"framed without checksums", cargopack.Options{FrameSize: 64 << 10, NoChecksums: true}, 2},
		{"direct without checksums", cargopack.Options{Direct: true, NoChecksums: true}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ra := rpNew(t, files, tc.opt, Options{})
			in := ra.a.Info()
			if in.Unverifiable != tc.want || len(in.UnverifiableSample) != tc.want {
				t.Fatalf("unverifiable %d %v, want %d", in.Unverifiable, in.UnverifiableSample, tc.want)
			}
		})
	}
}
