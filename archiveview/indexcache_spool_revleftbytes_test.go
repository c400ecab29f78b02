package archiveview

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

// TestStoreIndexCacheOversizeNotSpooled: an index object larger than the
// cache accepts (MaxObjectBytes, 4 GiB by default) is refused from the
// size its GET reports, before any of it is spooled, with or without a
// secret. Without one (--index-cache-trust-writers) nothing else stops a
// writer of the prefix: the old code downloaded and spooled MaxObjectBytes
// to the spool directory before it refused the object, at every open and
// again at the Publish that checks the object it then replaces.
func TestStoreIndexCacheOversizeNotSpooled(t *testing.T) {
	secret, err := NewIndexSecret(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what   string
		secret *IndexSecret
	}{{"trusting the writers", nil}, {"with a secret", secret}} {
		t.Run(tc.what, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, rvBucket), 0o755); err != nil {
				t.Fatal(err)
			}
			store := &readCounter{Store: backend.NewFileStore(dir)}
			spool := t.TempDir()
			const max = 4 << 20
			c := StoreIndexCache{Store: store, Bucket: rvBucket, Prefix: "idx/", Spool: spool, Secret: tc.secret, MaxObjectBytes: max}
			name := IndexName{Bucket: rvBucket, ManifestKey: "m/manifest.json.gz", ETag: `"e1"`}
			rvPut(t, dir, "idx/"+name.String(), bytes.Repeat([]byte{0x5a}, 3*max))
			_, _, err := c.Fetch(context.Background(), name)
			if !errors.Is(err, ErrUnauthenticatedIndex) {
				t.Fatalf("%v, want ErrUnauthenticatedIndex", err)
			}
			if got := store.n.Load(); got > 64<<10 {
				t.Errorf("%d bytes of a %d-byte object over the %d-byte cap read before the refusal", got, 3*max, max)
			}
			if left, _ := os.ReadDir(spool); len(left) != 0 {
				t.Errorf("%d files left in the spool", len(left))
			}
		})
	}
}
