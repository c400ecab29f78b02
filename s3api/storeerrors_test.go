package s3api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// TestRestoreStoreNotImplemented (issue 25): a backing store that keeps
// GLACIER as a label and answers RestoreObject with 405 MethodNotAllowed
// (SeaweedFS) or 501 NotImplemented makes wharf answer 501 NotImplemented,
// saying the backing store cannot restore: never a 500 that invites
// retries. The store is a real S3Store over gofakes3, the class from the
// Glacier model on the wire, the 405/501 injected on the POST.
func TestRestoreStoreNotImplemented(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{{405, "MethodNotAllowed"}, {501, "NotImplemented"}} {
		t.Run(tc.code, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			files := map[string][]byte{"cold.bin": randBytes(31, 5000)}
			res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, testMTime),
				cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", Direct: true})
			if err != nil {
				t.Fatal(err)
			}
			mem := s3mem.New()
			if err := mem.CreateBucket("src"); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(dir, "src")
			err = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
				if err != nil || fi.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				_, err = mem.PutObject("src", filepath.ToSlash(rel), map[string]string{}, bytes.NewReader(b), int64(len(b)), nil)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			g := faults.NewGlacier(faults.GlacierConfig{})
			g.SetClass("src", "p/uploads/u1/files/cold.bin", backend.ClassGlacier, "")
			posts := 0
			fh := faults.FaultyHTTP(g.HTTP(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()),
				func(r faults.HTTPRequest) faults.HTTPFault {
					if r.Method == http.MethodPost {
						posts++
						return faults.HTTPFault{Action: faults.HTTPError, Status: tc.status, Code: tc.code}
					}
					return faults.HTTPFault{}
				})
			s3srv := httptest.NewServer(fh)
			t.Cleanup(s3srv.Close)
			t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
			store, err := backend.NewS3Store(ctx, backend.S3Config{Endpoint: s3srv.URL, Region: "us-east-1", PathStyle: true,
				AccessKeyID: "k", SecretAccessKey: "s", MaxBackoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			a, err := archiveview.Open(ctx, store, "src", res.ManifestKey, archiveview.Options{Name: testBucket, StorageClasses: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: testAK, SecretKey: testSK}}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(s3api.New(s3api.Config{
				Catalog: catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}), Verifier: v,
				Logger: zerolog.Nop(), AllowRestore: true,
			}))
			t.Cleanup(srv.Close)
			c := newSDKClient(t, srv.URL, testAK, testSK)
			status, err := restoreStatus(t, c, "cold.bin", 1, "")
			var ae smithy.APIError
			if status != http.StatusNotImplemented || !errors.As(err, &ae) || ae.ErrorCode() != "NotImplemented" {
				t.Fatalf("RestoreObject: %d %v, want 501 NotImplemented", status, err)
			}
			if msg := ae.ErrorMessage(); !strings.Contains(msg, "backing store cannot restore") || !strings.Contains(msg, tc.code) {
				t.Errorf("message %q: want it to say the backing store cannot restore, with its %s", msg, tc.code)
			}
			if posts != 1 {
				t.Errorf("%d RestoreObject requests reached the store, want 1 (no retries)", posts)
			}
		})
	}
}

// TestChangedChunkNamesKey (issue 25): a chunk replaced under an open
// archive answers 409 ObjectChanged whose message names the chunk's key
// and says retrying cannot help, not 500 "Please try again".
func TestChangedChunkNamesKey(t *testing.T) {
	files := map[string][]byte{"big.bin": randBytes(32, 1<<20)}
	a, _, dir := openArchiveDir(t, files, fixtureOpts{anonymous: true, frameSize: 16 << 10})
	f := newFixtureFromArchive(t, a, fixtureOpts{anonymous: true})
	resp, body := f.do(t, http.MethodGet, objPath(testBucket, "big.bin"), map[string]string{"Range": "bytes=0-99"})
	mustStatus(t, resp, body, http.StatusPartialContent)
	// Replace every chunk: same bytes, a new mtime (FileStore's ETag).
	var chunks []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && (strings.HasSuffix(p, ".tar.zst") || strings.HasSuffix(p, ".tar")) {
			chunks = append(chunks, p)
			os.Chtimes(p, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
		}
		return nil
	})
	if len(chunks) == 0 {
		t.Fatal("no chunk objects found under " + dir)
	}
	resp, body = f.do(t, http.MethodGet, objPath(testBucket, "big.bin"), map[string]string{"Range": "bytes=1000000-1000099"})
	e := wantError(t, resp, body, http.StatusConflict, "ObjectChanged")
	rel, _ := filepath.Rel(filepath.Join(dir, "src"), chunks[0])
	if !strings.Contains(e.Message, "s3://src/"+filepath.ToSlash(rel)) || strings.Contains(e.Message, "try again") || e.Key != "big.bin" {
		t.Errorf("message %q (key %q): want the chunk s3://src/%s named, no retry advice", e.Message, e.Key, rel)
	}
}

// TestReplacedDirectObjectRefusedFirst (issue 25): a direct-upload object
// replaced after the archive was opened is refused before its first byte
// (its reads are pinned to the ETag of the listing at open), with 409
// ObjectChanged naming the object, instead of a 200 cut off near its end.
func TestReplacedDirectObjectRefusedFirst(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	big := randBytes(33, 300<<10)
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"big.bin": big}, testMTime),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	mem := s3mem.New()
	if err := mem.CreateBucket("src"); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "src")
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		_, err = mem.PutObject("src", filepath.ToSlash(rel), map[string]string{}, bytes.NewReader(b), int64(len(b)), nil)
		return err
	})
	s3srv := httptest.NewServer(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(s3srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store, err := backend.NewS3Store(ctx, backend.S3Config{Endpoint: s3srv.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "k", SecretAccessKey: "s", MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a, err := archiveview.Open(ctx, store, "src", res.ManifestKey, archiveview.Options{Name: testBucket, StorageClasses: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	f := newFixtureFromArchive(t, a, fixtureOpts{anonymous: true})
	key := "p/uploads/u1/files/big.bin"
	changed := append([]byte(nil), big...)
	changed[len(changed)-1] ^= 0xff
	if _, err := mem.PutObject("src", key, map[string]string{}, bytes.NewReader(changed), int64(len(changed)), nil); err != nil {
		t.Fatal(err)
	}
	for _, rng := range []string{"", "bytes=0-99"} {
		resp, body := f.do(t, http.MethodGet, objPath(testBucket, "big.bin"), map[string]string{"Range": rng})
		e := wantError(t, resp, body, http.StatusConflict, "ObjectChanged")
		if !strings.Contains(e.Message, "s3://src/"+key) {
			t.Errorf("range %q: message %q does not name s3://src/%s", rng, e.Message, key)
		}
	}
}
