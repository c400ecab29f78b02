package chunkio

// Tests written for the hand mutants of the rev-mutation audit that no
// test killed (TESTING.md, "Mutation audit (rev-mutation)").

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestSpeculativeLaunchKeepsFairShare: a speculative part is launched only
// while the stream's bytes in flight plus the part stay within its fair
// share of the budget (the budget over the streams reading), though the
// budget itself has room; a demand part is not held to it. With four
// streams reading an 8 MiB budget the share is 2 MiB.
func TestSpeculativeLaunchKeepsFairShare(t *testing.T) {
	dir := t.TempDir()
	const size = 1 << 20
	if err := os.MkdirAll(filepath.Join(dir, "bkt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bkt", "obj"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := NewFrameCache(0, WithMemory(8<<20), WithPartSize(size))
	set := NewSet(backend.NewFileStore(dir), "bkt", []Chunk{{Key: "obj", Kind: Direct, Size: size}}, Options{Readahead: -1, Cache: cache})
	t.Cleanup(set.Close)
	for range 4 {
		set.lim.streamStarted()
	}
	defer func() {
		for range 4 {
			set.lim.streamEnded()
		}
	}()
	if got := set.lim.share(); got != 2<<20 {
		t.Fatalf("share %d with 4 streams on 8 MiB, want 2 MiB", got)
	}
	plan := partPlan{off: 0, end: size}
	for _, tc := range []struct {
		held int64
		mode allocMode
		ok   bool
	}{
		{0, speculative, true},
		{1 << 20, speculative, true},    // 1 + 1 MiB: exactly the share
		{1<<20 + 1, speculative, false}, // one byte over it
		{3 << 20, speculative, false},   // well over it, the budget free
		{3 << 20, demand, true},         // a demand part is not held to it
	} {
		p, err := set.launch(context.Background(), nil, 0, plan, 1, 0, tc.held, tc.mode, nil)
		if err != nil {
			t.Fatalf("held %d, mode %d: %v", tc.held, tc.mode, err)
		}
		if (p != nil) != tc.ok {
			t.Fatalf("held %d bytes, mode %d: launched %v, want %v (share %d)", tc.held, tc.mode, p != nil, tc.ok, set.lim.share())
		}
		if p != nil {
			if _, err := p.wait(context.Background(), size); err != nil {
				t.Fatal(err)
			}
			p.close()
		}
		if used, _ := cache.MemoryInUse(); used != 0 {
			t.Fatalf("held %d: %d bytes still charged after the part closed", tc.held, used)
		}
	}
}

// TestMemoryWaitEndsOnTime: a demand take that finds the budget full
// waits at most the memory wait (WithMemoryWait), then fails with ErrBusy
// (503 SlowDown), however often it is woken meanwhile.
func TestMemoryWaitEndsOnTime(t *testing.T) {
	const wait = 200 * time.Millisecond
	cache := NewFrameCache(0, WithMemory(1<<20), WithMemoryWait(wait))
	lim := cache.Limits()
	ctx := WithClient(context.Background(), "")
	cl, err := lim.reserve(ctx, 1<<20, demand)
	if err != nil {
		t.Fatal(err)
	}
	defer lim.unreserve(cl, 1<<20)
	// Something is freed (and taken back) every 20 ms: each wakes the
	// waiter, which finds the budget full again.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				lim.signal()
			}
		}
	}()
	start := time.Now()
	_, err = lim.reserve(ctx, 1, demand)
	took := time.Since(start)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("a take on a full budget: %v, want ErrBusy", err)
	}
	if took < wait || took > wait+time.Second {
		t.Fatalf("a take on a full budget failed after %v, want the memory wait %v (within a second)", took, wait)
	}
}

// TestRefetchReturnsItsGetSlot: the second fetch of a frame that failed
// its sha256 in transit takes one process-wide GET slot and gives it back:
// after the read, no GET is counted in flight (a slot kept per refetch
// would leave the server unable to read once --max-parts of them
// happened).
func TestRefetchReturnsItsGetSlot(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	var obj, want []byte
	var frames []Frame
	for i := range 3 {
		data := bytes.Repeat([]byte{byte('a' + i), 'x', byte(i)}, 30_000)
		comp := enc.EncodeAll(data, nil)
		frames = append(frames, Frame{COff: int64(len(obj)), CSize: int64(len(comp)), UOff: int64(len(want)), USize: int64(len(data)),
			Sum: sha256.Sum256(comp), HasSum: true})
		obj = append(obj, comp...)
		want = append(want, data...)
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
	flip := frames[1].COff + frames[1].CSize/2
	var flipped atomic.Int32
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if r.Op == "range" && r.Off <= flip && flip < r.Off+r.Len && flipped.Add(1) == 1 {
			return faults.Fault{Kind: faults.FaultFlip, FlipAt: []int64{flip}}
		}
		return faults.Fault{}
	}})
	cache := NewFrameCache(0, WithMemory(32<<20), WithMaxParts(4))
	set := NewSet(store, "bkt", []Chunk{{Key: key, Kind: FramedZstd, Frames: frames, Size: int64(len(obj))}}, Options{Readahead: -1, Cache: cache})
	t.Cleanup(set.Close)
	got, err := readChunk(context.Background(), set, 0, 0, int64(len(want)))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read with frame 1 flipped in transit: %v", err)
	}
	if n := flipped.Load(); n < 2 {
		t.Fatalf("%d GETs covered the flipped byte, want the flipped one and a second fetch", n)
	}
	// The part's fetches give their slots back as they end, which may be
	// just after the last byte was read: wait for that, a bounded time.
	deadline := time.Now().Add(5 * time.Second)
	for {
		used, gets := set.lim.inUse()
		if used == 0 && gets == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the read: %d bytes and %d GET slots still counted in use", used, gets)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shortStore is a store whose range bodies end cleanly (io.EOF) halfway:
// a proxy or a store that does not check its Content-Length.
type shortStore struct{ backend.Store }

func (s shortStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	b, info, err := s.Store.ReadRange(ctx, bucket, key, off, length, ifMatch)
	if err != nil {
		return nil, info, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(b, length/2), b}, info, nil
}

// TestShortBodyFailsTheRead: a range body that ends cleanly before the
// length asked for is a failed GET (backend.ErrBadResponse), at once: the
// read fails with it, not waiting for bytes that will never come, and
// serves nothing wrong. For a direct object (served as it streams) and a
// framed chunk.
func TestShortBodyFailsTheRead(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("short body "), 20_000)
	comp := enc.EncodeAll(data, nil)
	dir := t.TempDir()
	for name, b := range map[string][]byte{"direct": data, "framed": comp} {
		if err := os.MkdirAll(filepath.Join(dir, "bkt"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bkt", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chunks := []Chunk{
		{Key: "direct", Kind: Direct, Size: int64(len(data))},
		{Key: "framed", Kind: FramedZstd, Size: int64(len(comp)),
			Frames: []Frame{{COff: 0, CSize: int64(len(comp)), UOff: 0, USize: int64(len(data)), Sum: sha256.Sum256(comp), HasSum: true}}},
	}
	set := NewSet(shortStore{backend.NewFileStore(dir)}, "bkt", chunks, Options{Readahead: -1, Cache: NewFrameCache(0, WithMemory(32<<20))})
	t.Cleanup(set.Close)
	for ci, c := range chunks {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		type result struct {
			got []byte
			err error
		}
		done := make(chan result, 1)
		go func() {
			got, err := readChunk(ctx, set, int32(ci), 0, int64(len(data)))
			done <- result{got, err}
		}()
		var got []byte
		select {
		case r := <-done:
			got, err = r.got, r.err
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still reading 30 s after a short body (its context ended at 20 s)", c.Key)
		}
		took := time.Since(start)
		cancel()
		if !errors.Is(err, backend.ErrBadResponse) || took > 10*time.Second {
			t.Fatalf("%s: a short body: %v after %v (%d bytes), want backend.ErrBadResponse at once", c.Key, err, took, len(got))
		}
		if !bytes.Equal(got, data[:len(got)]) {
			t.Fatalf("%s: wrong bytes served before the failure", c.Key)
		}
	}
}

// etagStore records the If-Match of every range read; with lie, it
// ignores If-Match (as some S3-compatible servers do) and reports another
// ETag from its second range read on (the object replaced meanwhile).
type etagStore struct {
	backend.Store
	lie bool

	mu      sync.Mutex
	ifMatch []string
	etags   []string
}

func (s *etagStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	s.mu.Lock()
	n := len(s.ifMatch)
	s.ifMatch = append(s.ifMatch, ifMatch)
	s.mu.Unlock()
	if s.lie {
		ifMatch = ""
	}
	b, info, err := s.Store.ReadRange(ctx, bucket, key, off, length, ifMatch)
	if err == nil && s.lie && n > 0 {
		info.ETag = "replaced-" + info.ETag
	}
	s.mu.Lock()
	s.etags = append(s.etags, info.ETag)
	s.mu.Unlock()
	return b, info, err
}

// TestRangeReadsPinnedToFirstETag: every range read of a chunk after its
// first response carries that response's ETag as If-Match; and behind a
// store that ignores If-Match, a response with another ETag (the object
// replaced between two reads) fails the read with backend.ErrChanged
// instead of mixing bytes of two objects.
func TestRangeReadsPinnedToFirstETag(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("pinned bytes "), 10_000)
	if err := os.MkdirAll(filepath.Join(dir, "bkt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bkt", "obj"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	chunks := []Chunk{{Key: "obj", Kind: Direct, Size: int64(len(data))}}
	for _, lie := range []bool{false, true} {
		st := &etagStore{Store: backend.NewFileStore(dir), lie: lie}
		set := NewSet(st, "bkt", chunks, Options{Readahead: -1, Cache: NewFrameCache(0)})
		ctx := context.Background()
		got, err := readChunk(ctx, set, 0, 0, 1000)
		if err != nil || !bytes.Equal(got, data[:1000]) {
			t.Fatalf("first read: %v", err)
		}
		got, err = readChunk(ctx, set, 0, 50_000, 51_000)
		set.Close()
		st.mu.Lock()
		ifMatch, etags := st.ifMatch, st.etags
		st.mu.Unlock()
		if etags[0] == "" {
			t.Fatal("the store reported no ETag: the test proves nothing")
		}
		if lie {
			if !errors.Is(err, backend.ErrChanged) {
				t.Fatalf("a second read answered with ETag %q after %q: %v (%d bytes), want backend.ErrChanged", etags[len(etags)-1], etags[0], err, len(got))
			}
			continue
		}
		if err != nil || !bytes.Equal(got, data[50_000:51_000]) {
			t.Fatalf("second read: %v", err)
		}
		for i, m := range ifMatch[1:] {
			if m != etags[0] {
				t.Fatalf("range read %d carried If-Match %q, want the first response's ETag %q (all: %q)", i+1, m, etags[0], ifMatch)
			}
		}
	}
}

// TestDirectObjectPinnedToListedETag: a direct object is served as it
// streams, so its first GET already carries the ETag its open-time
// listing reported: an object replaced between the listing and the first
// read is refused (backend.ErrChanged) before any byte of it is served.
func TestDirectObjectPinnedToListedETag(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bkt", "obj")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	old := bytes.Repeat([]byte("old bytes "), 5000)
	if err := os.WriteFile(p, old, 0o644); err != nil {
		t.Fatal(err)
	}
	store := backend.NewFileStore(dir)
	classes := NewClasses(store, "bkt", ClassOptions{})
	if err := classes.Load(context.Background(), []string{"obj"}); err != nil {
		t.Fatal(err)
	}
	if classes.listedETag("obj") == "" {
		t.Fatal("the listing reported no ETag: the test proves nothing")
	}
	// Replaced after the listing: same size, other bytes, another ETag.
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(p, bytes.Repeat([]byte("NEW BYTES "), 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	set := NewSet(store, "bkt", []Chunk{{Key: "obj", Kind: Direct, Size: int64(len(old))}}, Options{Readahead: -1, Classes: classes, Cache: NewFrameCache(0)})
	t.Cleanup(set.Close)
	got, err := readChunk(context.Background(), set, 0, 100, 2000)
	if !errors.Is(err, backend.ErrChanged) || len(got) != 0 {
		t.Fatalf("a direct object replaced after its listing: %v, %d bytes served (%q...), want backend.ErrChanged and nothing", err, len(got), got[:min(len(got), 20)])
	}
}
