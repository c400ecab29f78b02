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

// TestRangeAfterCheckTwoFlipsOneRead: each block of a ranged read after a
// span's check is read once more on a mismatch, not only the first block
// of the read that mismatches. A long read (a large range, a parked
// decoder serving one client's sequential ranges) over a link that
// damaged two of its blocks in transit, each once, is served right; a
// block mismatching twice still fails it. Before, the one re-read was the
// reader's for good, so the second damaged block, anywhere later, failed
// the whole read although its re-read would have matched.
func TestRangeAfterCheckTwoFlipsOneRead(t *testing.T) {
	const part = 256 << 10
	good := make([]byte, 48*part+999)
	for i := range good {
		good[i] = byte(i*11 + i>>10)
	}
	const key = "s/uploads/u/files/d"
	dir := t.TempDir()
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, good, 0o644); err != nil {
		t.Fatal(err)
	}
	flips := []int64{4*part + 100, 40*part + 100}
	var mu sync.Mutex
	flipped := map[int64]bool{}
	armed := false
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		mu.Lock()
		defer mu.Unlock()
		if !armed || r.Op != "range" {
			return faults.Fault{}
		}
		var at []int64
		for _, f := range flips {
			if !flipped[f] && r.Off <= f && f < r.Off+r.Len {
				flipped[f] = true
				at = append(at, f)
			}
		}
		if len(at) == 0 {
			return faults.Fault{}
		}
		return faults.Fault{Kind: faults.FaultFlip, FlipAt: at}
	}})
	c := Chunk{Key: key, Kind: Direct, Size: int64(len(good)), Sum: sha256.Sum256(good), HasSum: true}
	e := Extent{Chunk: 0, Off: 0, Length: int64(len(good))}
	cache := NewFrameCache(64<<20, WithPartSize(part), WithStreamParts(2))
	set := NewSet(store, "bkt", []Chunk{c}, Options{SmallVerifyBytes: -1, Cache: cache})
	defer set.Close()
	read := func(start, n int64) ([]byte, error) {
		src, err := set.OpenExtent(context.Background(), e, start, n)
		if err != nil {
			return nil, err
		}
		sr := &segReader{src: src}
		defer sr.Close()
		return io.ReadAll(sr)
	}
	if _, err := read(1000, 100); err != nil {
		t.Fatalf("first read (the check): %v", err)
	}
	if set.sumsFor(0, 0, int64(len(good))) == nil {
		t.Fatal("the check kept no block sums (the test needs them)")
	}
	mu.Lock()
	armed = true
	mu.Unlock()
	got, err := read(10, int64(len(good))-20)
	if err != nil {
		t.Fatalf("a read whose two blocks were each damaged once in transit: %v, want the right bytes (each block read once more)", err)
	}
	if !bytes.Equal(got, good[10:len(good)-10]) {
		t.Fatal("wrong bytes served")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range flips {
		if !flipped[f] {
			t.Fatalf("byte %d was never flipped (the test's premise)", f)
		}
	}
}
