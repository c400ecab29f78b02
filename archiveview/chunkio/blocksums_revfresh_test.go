package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestBlockSumsChargeAfterClose: the block sums a check takes are charged
// to the cache's bound and given back when the Set closes. A Set's open
// reads keep working after Close (a rescan replaced the archive), and a
// check they start then must not charge sums nobody will give back: each
// such check took a piece of the shared bound for good, until no Set of
// the process kept sums for its ranged reads any more. And a check that
// was running at Close and then failed gave its charge back a second time
// (Close had given back everything the Set held), so the counter went
// below zero and the bound let that much more be kept.
func TestBlockSumsChargeAfterClose(t *testing.T) {
	good := make([]byte, 1<<20+777)
	for i := range good {
		good[i] = byte(i*7 + i>>9)
	}
	const key = "s/uploads/u/files/d"
	for _, tc := range []struct {
		name       string
		closeFirst bool // Close before the check; else after it
		failAfter  bool // the check's GET waits for Close, then fails
	}{
		{"check after Close", true, false},
		{"check before Close", false, false},
		{"check failing after Close", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, good, 0o644); err != nil {
				t.Fatal(err)
			}
			c := Chunk{Key: key, Kind: Direct, Size: int64(len(good)), Sum: sha256.Sum256(good), HasSum: true}
			e := Extent{Chunk: 0, Off: 0, Length: int64(len(good))}
			var store backend.Store = backend.NewFileStore(dir)
			started, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			if tc.failAfter {
				store = faults.NewFaulty(store, faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
					if r.Op != "range" {
						return faults.Fault{}
					}
					once.Do(func() { close(started) })
					<-release
					return faults.Fault{Kind: faults.FaultError}
				}})
			}
			set := NewSet(store, "bkt", []Chunk{c}, Options{SmallVerifyBytes: -1})
			if tc.failAfter {
				done := make(chan error, 1)
				go func() {
					src, err := set.OpenExtent(context.Background(), e, 1000, 100)
					if err == nil {
						sr := &segReader{src: src}
						_, err = io.ReadAll(sr)
						sr.Close()
					}
					done <- err
				}()
				<-started
				if set.cache.sumBytes.Load() == 0 {
					t.Fatal("the running check charged no block sums (the test needs them)")
				}
				set.Close()
				close(release)
				if err := <-done; err == nil {
					t.Fatal("the read whose GETs failed succeeded")
				}
				if got := set.cache.sumBytes.Load(); got != 0 {
					t.Fatalf("block sums charged to the cache after its only Set closed and its check failed: %d bytes, want 0", got)
				}
				return
			}
			read := func() {
				src, err := set.OpenExtent(context.Background(), e, 1000, 100)
				if err != nil {
					t.Fatal(err)
				}
				sr := &segReader{src: src}
				got, err := io.ReadAll(sr)
				sr.Close()
				if err != nil || !bytes.Equal(got, good[1000:1100]) {
					t.Fatalf("read: %v (%d bytes)", err, len(got))
				}
			}
			if tc.closeFirst {
				set.Close()
				read()
			} else {
				read()
				if set.cache.sumBytes.Load() == 0 {
					t.Fatal("the check kept no block sums (the test needs them)")
				}
				set.Close()
			}
			if got := set.cache.sumBytes.Load(); got != 0 {
				t.Fatalf("block sums charged to the cache after its only Set closed: %d bytes, want 0", got)
			}
		})
	}
}
