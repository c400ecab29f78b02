package s3api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api"
)

// TestReplacedDirectObjectRefusedBeforeFirstByte: a direct-upload object
// replaced (same size, other bytes) after the archive was opened over a
// storage-class listing is refused with an error status before any byte
// is sent, for a whole GET and for a range: the ETag the listing reported
// is sent as If-Match on the object's first GET. On the old code the GET
// answered 200 and the connection was cut after the bytes were streamed
// (the whole-object check fails only at the end). An untouched object of
// the same archive is still served exactly.
func TestReplacedDirectObjectRefusedBeforeFirstByte(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	files := map[string][]byte{"a.bin": randBytes(31, 12<<20), "b.bin": randBytes(32, 12<<20), "ok.bin": randBytes(33, 1<<20)}
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, testMTime),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := archiveview.Open(ctx, backend.NewFileStore(dir), "src", res.ManifestKey,
		archiveview.Options{Name: testBucket, StorageClasses: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	// Replace a.bin and b.bin with other bytes of the same size (and a
	// later mtime: the FileStore's ETag is mtime and size).
	for i, name := range []string{"a.bin", "b.bin"} {
		p := filepath.Join(dir, "src", "p", "uploads", "u1", "files", name)
		if err := os.WriteFile(p, randBytes(int64(41+i), 12<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: testAK, SecretKey: testSK}}, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3api.New(s3api.Config{
		Catalog:    catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}),
		Verifier:   v,
		Logger:     zerolog.Nop(),
		Registerer: prometheus.NewRegistry(),
	}))
	t.Cleanup(srv.Close)

	get := func(key, rng string) (int, []byte, error) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/"+testBucket+"/"+key, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	for _, tc := range []struct{ key, rng string }{{"a.bin", ""}, {"b.bin", "bytes=1048576-2097151"}} {
		code, body, err := get(tc.key, tc.rng)
		if err != nil {
			t.Fatalf("%s %q: status %d then %v (%d bytes): the response was cut, not refused", tc.key, tc.rng, code, err, len(body))
		}
		if code < 400 || len(body) > 4096 || !strings.Contains(string(body), "<Error>") {
			t.Fatalf("%s %q: status %d with %d bytes; want an S3 error before any byte of the object", tc.key, tc.rng, code, len(body))
		}
		if !strings.Contains(string(body), tc.key) {
			t.Errorf("%s: the error does not name the key: %s", tc.key, body)
		}
	}
	code, body, err := get("ok.bin", "")
	if err != nil || code != http.StatusOK || string(body) != string(files["ok.bin"]) {
		t.Fatalf("untouched ok.bin: status %d, %d bytes, %v", code, len(body), err)
	}
}
