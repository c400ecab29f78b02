package archiveview

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

func TestVerifyCleanArchives(t *testing.T) {
	for _, sh := range rpShapes() {
		t.Run(sh.name, func(t *testing.T) {
			files := sh.files()
			ra := rpNew(t, files, sh.opt, sh.opts)
			var problems []VerifyProblem
			st, err := ra.a.Verify(context.Background(), func(p VerifyProblem) { problems = append(problems, p) })
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != 0 || st.Problems != 0 {
				t.Fatalf("problems on a clean archive: %+v", problems)
			}
			if st.Files != int64(len(files)) {
				t.Errorf("verified %d files, want %d", st.Files, len(files))
			}
			var total int64
			for _, b := range files {
				total += int64(len(b))
			}
			if st.Bytes != total {
				t.Errorf("verified %d bytes, want %d", st.Bytes, total)
			}
			if st.Frames != int64(ra.res.Frames) {
				t.Errorf("verified %d frames, want %d", st.Frames, ra.res.Frames)
			}
		})
	}
}

// TestVerifyFindsCorruption flips one stored byte of a chunk object on disk
// and expects Verify to name the chunk (and the files in it).
func TestVerifyFindsCorruption(t *testing.T) {
	for _, sh := range []rpShape{
		{name: "framed", opt: cargopack.Options{FrameSize: 64 << 10}},
		{name: "stream", opt: cargopack.Options{}},
		{name: "plain", opt: cargopack.Options{PlainTar: func(string) bool { return true }}},
		{name: "direct", opt: cargopack.Options{Direct: true}},
	} {
		t.Run(sh.name, func(t *testing.T) {
			files := rpTree(21)
			ra := rpNew(t, files, sh.opt, Options{})
			c, e := rpChunkOf(t, ra, "big/large.txt")
			p := filepath.Join(ra.dir, rpBucket, filepath.FromSlash(c.Key))
			obj, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			at := int64(len(obj) / 2)
			if sh.name == "plain" || sh.name == "direct" {
				at = e.Off + 1234
			}
			obj[at] ^= 0x55
			if err := os.WriteFile(p, obj, 0o644); err != nil {
				t.Fatal(err)
			}
			var problems []VerifyProblem
			st, err := ra.a.Verify(context.Background(), func(p VerifyProblem) { problems = append(problems, p) })
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) == 0 || st.Problems != int64(len(problems)) {
				t.Fatalf("corruption not found (stats %+v)", st)
			}
			named := false
			for _, p := range problems {
				if p.Chunk == c.Key {
					named = true
				}
			}
			t.Logf("%d problems, first: key %q chunk %q: %s", len(problems), problems[0].Key, problems[0].Chunk, problems[0].Detail)
			if !named {
				t.Fatalf("no problem names chunk %s", c.Key)
			}
			fileNamed := false
			for _, p := range problems {
				if p.Key == "big/large.txt" && (strings.Contains(p.Detail, "sha256") || strings.Contains(p.Detail, "corrupt")) {
					fileNamed = true
				}
			}
			if !fileNamed {
				t.Fatalf("big/large.txt not reported")
			}
		})
	}
}

// TestVerifyProgress: the progress increments of a whole verification add
// up to VerifyBytes (chunks' stored sizes plus files' sizes), on a clean
// archive and on one with a corrupt chunk; a cancelled verification stops
// short of it.
func TestVerifyProgress(t *testing.T) {
	for _, corrupt := range []bool{false, true} {
		files := rpTree(21)
		ra := rpNew(t, files, cargopack.Options{FrameSize: 64 << 10}, Options{})
		var want int64
		for _, b := range files {
			want += int64(len(b))
		}
		want += ra.res.CompressedBytes
		if got := ra.a.VerifyBytes(); got != want {
			t.Fatalf("VerifyBytes %d, want files + stored chunks = %d", got, want)
		}
		if corrupt {
			c, _ := rpChunkOf(t, ra, "big/large.txt")
			p := filepath.Join(ra.dir, rpBucket, filepath.FromSlash(c.Key))
			obj, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			obj[len(obj)/2] ^= 0x55
			if err := os.WriteFile(p, obj, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var sum, calls int64
		st, err := ra.a.VerifyWith(context.Background(), VerifyOptions{Progress: func(n int64) {
			if n <= 0 {
				t.Errorf("progress increment %d", n)
			}
			sum += n
			calls++
		}})
		if err != nil {
			t.Fatal(err)
		}
		if corrupt != (st.Problems > 0) {
			t.Fatalf("corrupt=%v: %d problems", corrupt, st.Problems)
		}
		if sum != want || calls < int64(len(files)) {
			t.Fatalf("corrupt=%v: progress summed to %d in %d calls, want %d in at least %d", corrupt, sum, calls, want, len(files))
		}
	}

	ra := rpNew(t, rpTree(21), cargopack.Options{FrameSize: 64 << 10}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var sum int64
	_, err := ra.a.VerifyWith(ctx, VerifyOptions{Progress: func(n int64) {
		sum += n
		if sum > ra.res.CompressedBytes {
			cancel() // during the file phase
		}
	}})
	if err == nil || sum >= ra.a.VerifyBytes() {
		t.Fatalf("cancelled verification: err %v, progress %d of %d", err, sum, ra.a.VerifyBytes())
	}
}
