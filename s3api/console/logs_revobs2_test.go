package console_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
	"github.com/wharf-s3/wharf/s3api/console"
)

// TestConsoleOneLinePerRequest: the console wrote a log line of its own
// per request beside the access line for a bucket whose archive failed
// to open (at error: any visitor polling the page flooded the errors,
// though the scan had logged the failure) and for a download its user
// left (at warn: one careless visitor paged whoever alerts on warnings).
// As on the S3 handlers, the access line is now the only line: it
// carries the open error (a warning, as a 500), and a download the
// client left is an info line with abort_cause "client".
func TestConsoleOneLinePerRequest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	big := make([]byte, 24<<20) // past any socket buffers: the copy meets the client's close
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	res := pack(t, dir, map[string][]byte{"big.bin": big}, cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: 1 << 20})
	a, err := archiveview.Open(ctx, backend.NewFileStore(dir), "src", res.ManifestKey, archiveview.Options{Name: "good"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	openErr := &catalog.OpenFailure{Bucket: "bad", Err: fmt.Errorf("manifest s3://src/p/manifest.json: not a manifest: %w", backend.ErrBadResponse)}
	cat := failingCatalog{good: a, err: openErr}
	v, _ := auth.New(auth.Config{Anonymous: true})
	logs := &syncBuf{}
	log := zerolog.New(logs)
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: log,
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: log})
		}}))
	defer srv.Close()

	// lines waits for n access lines and returns every line.
	lines := func(n int) []map[string]any {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(logs.String(), `"message":"request"`) < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			out = append(out, m)
		}
		return out
	}

	const n = 10
	for range n {
		resp, err := http.Get(srv.URL + "/-/console/b/bad")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("page of a failed bucket: %d", resp.StatusCode)
		}
	}
	got := lines(n)
	access := 0
	for _, m := range got {
		if m["message"] != "request" {
			t.Errorf("a failed bucket's page logged a line beside its access line: %v", m)
			continue
		}
		access++
		if e, _ := m["error"].(string); !strings.Contains(e, "not a manifest") || m["level"] != "warn" {
			t.Errorf("access line %v: want a warning carrying the open error", m)
		}
	}
	if access != n || len(got) != n {
		t.Errorf("%d pages of a failed bucket logged %d lines (%d access lines), want %d access lines and nothing else", n, len(got), access, n)
	}

	// A download its user leaves after the first bytes.
	before := len(got)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /-/console/dl/good?key=big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("download: %d", resp.StatusCode)
	}
	io.CopyN(io.Discard, resp.Body, 64<<10)
	conn.Close()
	got = lines(n + 1)[before:]
	if len(got) != 1 || got[0]["message"] != "request" || got[0]["level"] != "info" || got[0]["abort_cause"] != "client" {
		t.Errorf("a download its user left logged %d lines, want one access line at info with abort_cause client:", len(got))
		for _, m := range got {
			t.Errorf("  %v", m)
		}
	}
}

// TestConsoleBusyOneLine: a download refused because the read limits
// stayed full (chunkio.ErrBusy, wharf shedding load) wrote an error line
// beside its access line, an error line per request under overload. As
// on the S3 handlers, its access line (with the error) is the only one.
func TestConsoleBusyOneLine(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	res := pack(t, dir, map[string][]byte{"a.txt": []byte("hello\n")}, cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1"})
	var busy atomic.Bool
	st := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if busy.Load() && (r.Op == "range" || r.Op == "get") {
			return faults.Fault{Kind: faults.FaultError, Err: chunkio.ErrBusy}
		}
		return faults.Fault{}
	}})
	a, err := archiveview.Open(ctx, st, "src", res.ManifestKey, archiveview.Options{Name: "good"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	busy.Store(true)
	cat := catalog.NewStatic(map[string]*archiveview.Archive{"good": a})
	v, _ := auth.New(auth.Config{Anonymous: true})
	logs := &syncBuf{}
	log := zerolog.New(logs)
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: log,
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: log})
		}}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/-/console/dl/good?key=a.txt")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("download while the read limits are full: %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), `"message":"request"`) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"message":"request"`) || !strings.Contains(lines[0], "read limits") {
		t.Errorf("a download refused busy logged %d lines, want its access line only, carrying the error:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}
