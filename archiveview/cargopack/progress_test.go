package cargopack

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

// TestProgressAddsUpToTheFiles: Options.Progress sums to the files' total
// size for every shape (framed, split parts, plain tar, direct, duplicates).
func TestProgressAddsUpToTheFiles(t *testing.T) {
	files := map[string][]byte{"empty": {}}
	var total int64
	for i := 0; i < 12; i++ {
		b := bytes.Repeat([]byte(fmt.Sprintf("file %d ", i)), 3000*(i+1))
		files[fmt.Sprintf("d/f%02d.txt", i)] = b
		total += int64(len(b))
	}
	files["d/copy.txt"] = files["d/f03.txt"]
	total += int64(len(files["d/copy.txt"]))
	for _, c := range []struct {
		name string
		opt  Options
	}{
		{"framed", Options{FrameSize: 16 << 10, ChunkSize: 64 << 10}},
		{"split", Options{FrameSize: 16 << 10, ChunkSize: 64 << 10, SplitSize: 50 << 10}},
		{"plain", Options{PlainTar: func(string) bool { return true }}},
		{"direct", Options{Direct: true}},
		{"dedup", Options{FrameSize: 16 << 10, Dedup: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sum int64
			calls := 0
			opt := c.opt
			opt.Bucket, opt.UploadID = "b", "u-progress"
			opt.Progress = func(n int64) {
				if n <= 0 {
					t.Errorf("increment %d", n)
				}
				sum += n
				calls++
			}
			if _, err := Write(context.Background(), DirSink(t.TempDir()), FromMap(files, time.Unix(1e9, 0)), opt); err != nil {
				t.Fatal(err)
			}
			if sum != total || calls < len(files)-1 {
				t.Fatalf("progress summed to %d in %d calls, want %d in at least %d", sum, calls, total, len(files)-1)
			}
		})
	}
}
