package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api"
	"github.com/wharf-s3/wharf/s3api/console"
)

// failingCatalog serves one good bucket and one whose archive failed to
// open with err.
type failingCatalog struct {
	good *archiveview.Archive
	err  error
}

func (c failingCatalog) Bucket(_ context.Context, name string) (*archiveview.Archive, bool, error) {
	switch name {
	case "good":
		return c.good, true, nil
	case "bad":
		return nil, true, c.err
	}
	return nil, false, nil
}

func (c failingCatalog) EachBucket(fn func(string, time.Time)) {
	fn("bad", time.Time{})
	fn("good", time.Time{})
}

// TestErrorsHideInternals: an open failure's text (the store's own words:
// the backing bucket, the manifest key, an account) and a read error's
// text (the store's paths) go to the log, never to a console page, which
// an anonymous visitor may read; the page says what failed in wharf's
// words (catalog.OpenFailure.PublicMessage for an open), naming the bucket
// and key, as the S3 handler does.
func TestErrorsHideInternals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	res := pack(t, dir, map[string][]byte{"a.txt": []byte("hello\n"), "b.bin": make([]byte, 100<<10)},
		cargopack.Options{Bucket: "backing-secret", Prefix: "hidden/layout", UploadID: "u1", FrameSize: 64 << 10})
	a, err := archiveview.Open(ctx, backend.NewFileStore(dir), "backing-secret", res.ManifestKey, archiveview.Options{Name: "good"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// The chunks go away under the open archive: every read fails in the store.
	if err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.Contains(p, "chunk") {
			return os.Remove(p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	openErr := &catalog.OpenFailure{Bucket: "bad", Err: fmt.Errorf("get s3://backing-secret/hidden/layout/manifest.json as arn:aws:iam::123456789012:role/wharf: %w", backend.ErrAccessDenied)}
	cat := failingCatalog{good: a, err: openErr}
	v, _ := auth.New(auth.Config{Anonymous: true})
	logs := &syncBuf{}
	// The details are on the access line (the S3 handler's logger).
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: zerolog.New(logs),
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: zerolog.New(logs)})
		}}))
	defer srv.Close()
	secrets := []string{dir, "backing-secret", "hidden/layout", "123456789012"}
	for _, tc := range []struct {
		path, says string
	}{
		{"/-/console/", "could not be opened: the store denied this server access"},
		{"/-/console/b/bad", "The archive served as bucket bad could not be opened: the store denied this server access"},
		{"/-/console/f/good?key=a.txt", "The preview could not be read"},
		{"/-/console/dl/good?key=a.txt", "a.txt in good could not be read"},
		{"/-/console/raw/good?key=b.bin", "b.bin in good could not be read"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(b)
		if !strings.Contains(page, tc.says) {
			t.Errorf("%s: %d, page lacks %q:\n%s", tc.path, resp.StatusCode, tc.says, page)
		}
		for _, s := range secrets {
			if strings.Contains(page, s) {
				t.Errorf("%s: %d, the page shows the internal %q:\n%s", tc.path, resp.StatusCode, s, page)
			}
		}
	}
	if !strings.Contains(logs.String(), "backing-secret") {
		t.Errorf("the log lacks the read error's details:\n%s", logs.String())
	}
}
