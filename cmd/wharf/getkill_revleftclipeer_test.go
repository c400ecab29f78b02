package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestGetKilledLeavesNoTempForever: a get killed with SIGKILL while it
// writes leaves its .wharf-get-*.tmp files; the next run into the same
// directory removes each of them (named on stderr), never takes one for a
// file, and writes the whole tree. A temporary name that is not get's
// (another program's ".wharf-get-x.tmp", a user's "x.tmp") is left alone.
// Before, the killed run's temporary files stayed for good.
func TestGetKilledLeavesNoTempForever(t *testing.T) {
	s3 := newSlowS3(t, "bkt")
	files := map[string][]byte{}
	for i := range 12 {
		b := make([]byte, 40<<10)
		for j := range b {
			b[j] = byte(i*7 + j*13)
		}
		files[fmt.Sprintf("d%d/sub/f%02d.bin", i%3, i)] = b
	}
	url := s3.pack(t, files, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-kill", FrameSize: 4 << 10, ChunkSize: 64 << 10})
	s3.delay.Store(int64(150 * time.Millisecond))
	// killOne starts a get into a new directory, SIGKILLs it once a
	// temporary file has bytes, and returns the directory and the
	// temporary files left. The kill can land just after that file was
	// renamed into place (its window is an fsync; under load the poll
	// sees it late): then nothing is left to test with, and the run is
	// made again, at most 5 times.
	killOne := func() (out string, keep, left []string) {
		out = t.TempDir()
		if err := os.MkdirAll(filepath.Join(out, "d1"), 0o755); err != nil {
			t.Fatal(err)
		}
		keep = []string{filepath.Join(out, "d1", ".wharf-get-x.tmp"), filepath.Join(out, "x.tmp")}
		for _, p := range keep {
			if err := os.WriteFile(p, []byte("not get's"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := wharfCmd(ctx, append(append([]string{"get", "-q", "--parallel", "4"}, s3.flags()...), url, "/", "-o", out)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		temps := func() []string {
			var found []string
			filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
				if err == nil && isTempName(fi.Name()) && fi.Size() > 0 {
					found = append(found, p)
				}
				return nil
			})
			return found
		}
		deadline := time.Now().Add(30 * time.Second)
		for len(temps()) == 0 {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("no temporary file with bytes appeared in 30 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup runs
			t.Fatal(err)
		}
		_ = cmd.Wait()
		return out, keep, temps()
	}
	var out string
	var keep, left []string
	for try := 1; len(left) == 0; try++ {
		if try > 5 {
			t.Fatal("in 5 runs, the killed get left no temporary file to test with")
		}
		out, keep, left = killOne()
	}

	s3.delay.Store(0)
	var stderr strings.Builder
	var stdout strings.Builder
	if err := getCmd(context.Background(), append(append([]string{"-q"}, s3.flags()...), url, "/", "-o", out), &stdout, &stderr); err != nil {
		t.Fatalf("the next get: %v\n%s", err, stderr.String())
	}
	for _, p := range left {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the killed get's %s is still there", p)
		} else if !strings.Contains(stderr.String(), "removed "+p) {
			t.Errorf("the removal of %s is not named:\n%s", p, stderr.String())
		}
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s, not get's, was removed", p)
		}
		os.Remove(p)
	}
	noTempFiles(t, out)
	for k, b := range files {
		if got, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(k))); err != nil || string(got) != string(b) {
			t.Errorf("%s: %d bytes (%v), want the archive's %d", k, len(got), err, len(b))
		}
	}
}

// TestGetSweepSparesLiveTemp: a temporary file a live get holds (its
// lock) is not removed by another get's sweep of the directory, however
// old; one no get holds is, however young; and a get whose new file was
// swept before it locked it makes another.
func TestGetSweepSparesLiveTemp(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	mk := func(name string, data string, age time.Duration) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		os.Chtimes(p, old, old)
		return p
	}
	live := mk(".wharf-get-00000000000000aa.tmp", "half", 2*time.Hour)
	lf, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if ok, err := lockTemp(lf); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	stale := mk(".wharf-get-00000000000000cc.tmp", "", 0)
	var stderr strings.Builder
	g := &getter{root: root, dir: dir, stderr: &stderr}
	g.sweep(".")
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("%s, held by a live get, removed: %v", live, err)
	}
	if _, err := os.Lstat(stale); err == nil {
		t.Errorf("%s, held by no get, kept", stale)
	}
	tf, tmp, err := g.createTemp(".")
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	g.sweep(".")
	if _, err := os.Lstat(filepath.Join(dir, tmp)); err != nil {
		t.Errorf("a sweep removed a live get's new temporary file: %v", err)
	}
}
