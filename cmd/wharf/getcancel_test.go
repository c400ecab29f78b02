package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestGetInterruptWhileCheckingPresent: Ctrl-C while get checks the
// sha256 of a large file already in DIR (the resume check reads it
// whole) stops get at once, not after the whole file was read; the file
// is left as it was.
func TestGetInterruptWhileCheckingPresent(t *testing.T) {
	const size = 1 << 30 // read in seconds, held sparse on disk
	st := t.TempDir()
	u, res := packDir(t, st, map[string][]byte{"big.bin": []byte("x")}, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-big", Direct: true})
	rewriteManifest(t, filepath.Join(st, "bkt", filepath.FromSlash(res.ManifestKey)), func(m map[string]any) {
		for _, f := range m["files"].([]any) {
			f.(map[string]any)["size"] = size
		}
	})
	out := t.TempDir()
	local := filepath.Join(out, "big.bin")
	f, err := os.Create(local)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- getCmd(ctx, []string{"--store", "file://" + st, "-q", u, "big.bin", "-o", out}, &bytes.Buffer{}, &stderr)
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("get ended before the interruption (the check did not read the file?): %v\n%s", err, stderr.String())
	default:
	}
	cancel()
	start := time.Now()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("get did not end a minute after the interruption")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("get took %v to stop after the interruption", took)
	}
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("get: %v, want an interruption\n%s", err, stderr.String())
	}
	if fi, err := os.Stat(local); err != nil || fi.Size() != size {
		t.Errorf("the file already there was changed: %v %v", fi, err)
	}
	noTempFiles(t, out)
}
