package archiveview

import (
	"github.com/wharf-s3/wharf/archiveview/internal/index"

	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// TestOpenErrorText: each fact once, and every sentinel still reachable.
func TestOpenErrorText(t *testing.T) {
	dir := t.TempDir()
	store := backend.NewFileStore(dir)
	files := map[string][]byte{"a.txt": []byte(strings.Repeat("a", 9000)), "b.txt": []byte("b\n")}
	base := cargopack.Options{Bucket: "bkt", Prefix: "p", UploadID: "up-1", FrameSize: 4096, SourcePath: "/s"}
	if _, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, time.Unix(1e9, 0)), base); err != nil {
		t.Fatal(err)
	}
	delta := base
	delta.UploadID, delta.PreviousManifestID = "up-2", "up-1"
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"c.txt": []byte("c")}, time.Unix(1e9, 0)), delta)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Missing manifest.
	_, err = Open(ctx, store, "bkt", "p/uploads/nope/manifest.json.gz", Options{Name: "bad"})
	want := `archive "bad": manifest s3://bkt/p/uploads/nope/manifest.json.gz not found (check the URL and that the upload finished)`
	if err == nil || err.Error() != want {
		t.Fatalf("missing manifest:\n got %v\nwant %s", err, want)
	}
	var oe *OpenError
	var be *backend.Error
	var pe *fs.PathError
	if !errors.Is(err, backend.ErrNotFound) || !errors.As(err, &oe) || !errors.As(err, &be) || !errors.As(err, &pe) {
		t.Errorf("missing manifest: sentinels lost: %#v", err)
	}
	if oe.Archive != "bad" || oe.Manifest != "s3://bkt/p/uploads/nope/manifest.json.gz" || be.Key != "p/uploads/nope/manifest.json.gz" {
		t.Errorf("OpenError %+v, backend.Error %+v", oe, be)
	}

	// A missing ancestor: a broken chain that is also "not found".
	up1 := filepath.Join(dir, "bkt", "p", "uploads", "up-1", "manifest.json.gz")
	saved, _ := os.ReadFile(up1)
	os.Remove(up1)
	_, err = Open(ctx, store, "bkt", res.ManifestKey, Options{})
	want = `archive "up-2": manifest s3://bkt/p/uploads/up-2/manifest.json.gz: broken manifest chain: upload "up-1" (its previous_manifest_id) not found: ` +
		`tried p/uploads/up-1/manifest.json.gz, p/uploads/up-1/manifest.json, p/uploads/up-1/manifest.encrypted.json.gz, p/uploads/up-1/manifest.encrypted.json (check that the older upload was not deleted)`
	if err == nil || err.Error() != want {
		t.Fatalf("missing ancestor:\n got %v\nwant %s", err, want)
	}
	if !errors.Is(err, ErrBrokenChain) || !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("missing ancestor: sentinels lost")
	}

	// A corrupt ancestor.
	os.WriteFile(up1, saved[:len(saved)/2], 0o644)
	_, err = Open(ctx, store, "bkt", res.ManifestKey, Options{})
	if err == nil || !errors.Is(err, ErrBrokenChain) || !errors.Is(err, manifest.ErrInvalid) ||
		strings.Count(err.Error(), "p/uploads/up-2/manifest.json.gz") != 1 || !strings.Contains(err.Error(), `upload "up-1" (its previous_manifest_id): manifest p/uploads/up-1/manifest.json.gz:`) {
		t.Fatalf("corrupt ancestor: %v", err)
	}
	os.WriteFile(up1, saved, 0o644)

	// A corrupt top manifest.
	top := filepath.Join(dir, "bkt", filepath.FromSlash(res.ManifestKey))
	good, _ := os.ReadFile(top)
	os.WriteFile(top, good[:10], 0o644)
	_, err = Open(ctx, store, "bkt", res.ManifestKey, Options{Name: "x"})
	if err == nil || !errors.Is(err, manifest.ErrInvalid) ||
		!strings.HasPrefix(err.Error(), `archive "x": manifest s3://bkt/p/uploads/up-2/manifest.json.gz is not a valid manifest: `) ||
		!strings.HasSuffix(err.Error(), " (check that the URL names the manifest of a finished CargoShip upload)") {
		t.Fatalf("corrupt manifest: %v", err)
	}
	os.WriteFile(top, good, 0o644)

	// A chunk missing at read time.
	a, err := Open(ctx, store, "bkt", res.ManifestKey, Options{Name: "arch"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	f, _ := a.Stat("a.txt")
	exts := a.fileExtents(index.Ordinal(f))
	chunk := a.tree.Chunks[exts[0].Chunk].Key
	if err := os.Remove(filepath.Join(dir, "bkt", filepath.FromSlash(chunk))); err != nil {
		t.Fatal(err)
	}
	r, err := a.Open(ctx, f, 0, f.Size)
	if err == nil {
		_, err = io.Copy(io.Discard, r)
		r.Close()
	}
	want = "archive arch: key a.txt: chunk s3://bkt/" + chunk + " not found (check that the upload finished and its chunk objects were not deleted or moved)"
	if err == nil || err.Error() != want {
		t.Fatalf("missing chunk:\n got %v\nwant %s", err, want)
	}
	if !errors.Is(err, backend.ErrNotFound) || !errors.As(err, &be) || be.Key != chunk {
		t.Errorf("missing chunk: sentinels lost")
	}
}

// TestStoreFailure covers the one table of store failures.
func TestStoreFailure(t *testing.T) {
	for _, c := range []struct {
		kind   error
		detail string
		want   string
	}{
		{backend.ErrNotFound, "", " not found (check X)"},
		{backend.ErrNotFound, "no such bucket", " not found: no such bucket (check X)"},
		{backend.ErrAccessDenied, "", ": access denied (check the store credentials and the bucket policy, or a file store's permissions)"},
		{backend.ErrUnavailable, "HTTP status 503", ": store unavailable: HTTP status 503 (check the S3 endpoint and the network, then try again)"},
		{backend.ErrBadResponse, "HTTP status 400", ": unusable answer from the store: HTTP status 400 (check that the S3 endpoint is an S3 server)"},
		{backend.ErrChanged, `etag "a"`, `: changed while being read: etag "a" (the upload was rewritten; open the archive again)`},
		{backend.ErrInvalidRange, "", ": shorter than the manifest says (the object was truncated or replaced)"},
		{nil, "context canceled", ": context canceled"},
	} {
		if got := storeFailure(c.kind, c.detail, "check X"); got != c.want {
			t.Errorf("storeFailure(%v, %q) = %q, want %q", c.kind, c.detail, got, c.want)
		}
	}
}
