package archiveview_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
)

// consoleLog is a zerolog console-format log (--log-format console) safe
// for concurrent writes.
type consoleLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (c *consoleLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

// TestOpenWarningsLogPrintable: an archive's warnings are logged as the
// message of their line, and they name manifest and chunk keys, which are
// a store listing's or an uploader's bytes (a key may hold a newline or
// an escape sequence: S3 allows any UTF-8, a file store any byte but '/';
// chunk keys are checked only for "..", emptiness and "/"). zerolog's
// console format (--log-format console, for people at a terminal) writes
// the message as is, so such a key forged log lines and sent escape
// sequences to the operator's terminal. The message's unprintable runes
// are now escaped ("\n", "\x1b", "\u202e"); fields were already quoted.
func TestOpenWarningsLogPrintable(t *testing.T) {
	dir := t.TempDir()
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"a.txt": []byte("hello\n")}, time.Unix(1700000000, 0)),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := os.ReadFile(filepath.Join(dir, "src", res.ManifestKey))
	if err != nil {
		t.Fatal(err)
	}
	src := stored
	if strings.HasSuffix(res.ManifestKey, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(stored))
		if err != nil {
			t.Fatal(err)
		}
		if src, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	// A checksum algorithm other than sha256 is a warning naming the
	// manifest's key.
	md5 := regexp.MustCompile(`"checksum_algorithm":\s*"sha256"`).ReplaceAll(src, []byte(`"checksum_algorithm": "md5"`))
	if bytes.Equal(md5, src) {
		t.Fatalf("manifest has no checksum_algorithm sha256: %.300s", src)
	}
	folder := "u1\n2026-12-02T00:00:00Z ERR forged line \x1b[2J\u202e"
	key := "p/uploads/" + folder + "/manifest.json"
	if err := os.MkdirAll(filepath.Join(dir, "src", "p", "uploads", folder), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", key), md5, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &consoleLog{}
	a, err := archiveview.Open(context.Background(), backend.NewFileStore(dir), "src", key,
		archiveview.Options{Name: "data", Logger: zerolog.New(zerolog.ConsoleWriter{Out: logs, NoColor: true})})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	out := logs.b.String()
	if !strings.Contains(out, "is not sha256") {
		t.Fatalf("no checksum warning logged:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.Contains(line, " INF ") && !strings.Contains(line, " WRN ") {
			t.Errorf("a log line that zerolog did not write (forged by a key): %q", line)
		}
	}
	for _, bad := range []string{"\x1b", "\u202e"} {
		if strings.Contains(out, bad) {
			t.Errorf("the log carries %q from a key raw:\n%q", bad, out)
		}
	}
}
