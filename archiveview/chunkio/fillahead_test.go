package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
)

// framedFixture stores a framed chunk of n frames of size incompressible
// bytes each and returns a Set over it on a cache made with opts, and the
// chunk's tar bytes.
func framedFixture(t *testing.T, n, size int, opts ...CacheOption) (*Set, []byte) {
	t.Helper()
	return framedFixtureOn(t, n, size, nil, opts...)
}

// framedFixtureOn is framedFixture with the store wrapped by wrap (nil:
// the file store as is).
func framedFixtureOn(t *testing.T, n, size int, wrap func(backend.Store) backend.Store, opts ...CacheOption) (*Set, []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(12, 12))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	var obj, tarBytes []byte
	var frames []Frame
	for range n {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		comp := enc.EncodeAll(data, nil)
		frames = append(frames, Frame{COff: int64(len(obj)), CSize: int64(len(comp)), UOff: int64(len(tarBytes)), USize: int64(len(data)),
			Sum: sha256.Sum256(comp), HasSum: true})
		obj = append(obj, comp...)
		tarBytes = append(tarBytes, data...)
	}
	dir := t.TempDir()
	key := "s/uploads/u/chunks/c0.tar.zst"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	chunks := []Chunk{{Key: key, Kind: FramedZstd, Frames: frames, Size: int64(len(obj))}}
	var store backend.Store = backend.NewFileStore(dir)
	if wrap != nil {
		store = wrap(store)
	}
	set := NewSet(store, "bkt", chunks, Options{Readahead: -1, Cache: NewFrameCache(0, opts...)})
	t.Cleanup(set.Close)
	return set, tarBytes
}

// firstAheadStore holds the first range GET that does not start at byte 0
// (the read's part ahead: frame 0 is at 0) until its context ends,
// after telling started; every other GET goes through.
type firstAheadStore struct {
	backend.Store
	started chan struct{} // closed when the held GET came in
	once    sync.Once
}

func (s *firstAheadStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	hold := false
	if off > 0 {
		s.once.Do(func() { hold = true })
	}
	if hold {
		close(s.started)
		<-ctx.Done()
		return nil, backend.ObjectInfo{}, &backend.Error{Op: "range", Bucket: bucket, Key: key, Err: ctx.Err()}
	}
	return s.Store.ReadRange(ctx, bucket, key, off, length, ifMatch)
}

// TestJoinedFlightGivenUpWhileAhead: a framed read joins another fetch of
// its first frame (here a claim taken by the test, as a prefetch's), and
// its own first part (the next three 2 MiB frames, compressed and
// decoded: 12 MiB, more than its client's 8 MiB share of a 32 MiB budget,
// which a client holding nothing may take once) is under way when that
// fetch gives up (errGaveUp, as a prefetch short of memory does, or a
// fetcher whose client left). The read then fetches the frame itself; it
// must not wait for the share its own part ahead holds for it. On the old
// code (before 30e7ed6) it did, and failed with ErrBusy after the whole
// memory wait.
//
// It synchronises on events, not on time: the part's GET is held in the
// store (firstAheadStore) until its context ends, so the part holds its
// 12 MiB, unchanging, from the moment the test sees its GET until the
// read drops it; the fix drops it at once, the old code waits for it
// until the memory wait (10 s, far longer than any release under load)
// ends.
func TestJoinedFlightGivenUpWhileAhead(t *testing.T) {
	gate := &firstAheadStore{started: make(chan struct{})}
	set, want := framedFixtureOn(t, 4, 2<<20, func(s backend.Store) backend.Store { gate.Store = s; return gate },
		WithMemory(32<<20), WithMemoryWait(10*time.Second))
	c := set.cache
	k := set.frameKey(0, 0)
	_, fl, mine := c.lookup(k, false)
	if !mine {
		t.Fatal("frame 0 already claimed")
	}
	ctx := WithClient(context.Background(), "key:one")
	type result struct {
		b   []byte
		err error
	}
	res := make(chan result, 1)
	go func() {
		b, err := readChunk(ctx, set, 0, 0, int64(len(want)))
		res <- result{b, err}
	}()
	select {
	case <-gate.started:
	case r := <-res:
		c.complete(k, fl, nil, errGaveUp)
		t.Fatalf("the read ended (%v) before its part ahead fetched anything", r.err)
	case <-time.After(30 * time.Second):
		c.complete(k, fl, nil, errGaveUp)
		t.Fatal("the read's part ahead never started")
	}
	// The part's GET is held: what it took stays taken until the read
	// drops it.
	if used, _ := set.lim.MemoryInUse(); used < 12<<20 {
		t.Fatalf("the part ahead holds %d bytes, want its 12 MiB (more than the client's share)", used)
	}
	c.complete(k, fl, nil, errGaveUp)
	var r result
	select {
	case r = <-res:
	case <-time.After(60 * time.Second):
		t.Fatal("the read never ended")
	}
	if r.err != nil || !bytes.Equal(r.b, want) {
		t.Fatalf("read whose joined fetch gave up while its part ahead was held: %v, want its bytes", r.err)
	}
	// The dropped part gives its bytes back when its held GET ends, which
	// may be just after the read ended: what stays charged is a leak.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		used, _ := set.lim.MemoryInUse()
		if used == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still charged 10 s after the read", used)
		}
	}
}
