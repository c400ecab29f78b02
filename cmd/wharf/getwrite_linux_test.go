//go:build linux

package main

import (
	"bytes"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestGetWriteErrorNamesKey: a write to DIR that fails (a full disk; here
// the file size limit, RLIMIT_FSIZE, with SIGXFSZ ignored so the write
// returns EFBIG) is named with the key and its real path, not only the
// temporary file's, and leaves no temporary file.
func TestGetWriteErrorNamesKey(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 128<<10) // 2 MiB
	st := t.TempDir()
	u, _ := packDir(t, st, map[string][]byte{"d/big.bin": big}, getMtime, cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "u-full", FrameSize: 64 << 10})
	out := t.TempDir()

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	lim := old
	lim.Cur = 1 << 20
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runGetCmd(t, "--store", "file://"+st, "-q", u, "/", "-o", out)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if err == nil {
		t.Fatalf("get wrote 2 MiB under a 1 MiB file size limit:\n%s", stderr)
	}
	want := "key d/big.bin: write " + filepath.Join(out, "d/big.bin")
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, "file too large") {
		t.Errorf("stderr does not say %q (file too large):\n%s", want, stderr)
	}
	noTempFiles(t, out)
}
