package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// slowFixture stores two chunks: chunk 0 a framed chunk holding one giant
// frame of giantSize incompressible bytes, chunk 1 a framed chunk of one
// small frame. A GET of chunk 0 from object byte 0 answers after 200 ms
// (the reader waits for it) and stalls after its first firstBytes bytes, every other GET of chunk 0 before its first byte
// (connections that stop sending without closing, until the request's
// context ends); GETs of chunk 1 are served at once. It returns a Set over them (MaxFrameBytes
// 1 MiB: chunk 0's frame is streamed) and both frames' decoded bytes.
func slowFixture(t *testing.T, giantSize int, firstBytes int64, opts ...CacheOption) (*Set, []byte, []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 5))
	giant := make([]byte, giantSize)
	for i := range giant {
		giant[i] = byte(rng.Uint32())
	}
	small := bytes.Repeat([]byte("a small frame of another chunk\n"), 2000)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var chunks []Chunk
	for i, data := range [][]byte{giant, small} {
		comp := enc.EncodeAll(data, nil)
		key := "s/uploads/u/chunks/c" + string(rune('0'+i)) + ".tar.zst"
		p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, comp, 0o644); err != nil {
			t.Fatal(err)
		}
		fr := Frame{COff: 0, CSize: int64(len(comp)), USize: int64(len(data)), Sum: sha256.Sum256(comp), HasSum: true}
		chunks = append(chunks, Chunk{Key: key, Kind: FramedZstd, Frames: []Frame{fr}, Size: int64(len(comp))})
	}
	slowKey := chunks[0].Key
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		switch {
		case r.Op == "range" && r.Key == slowKey && r.Off == 0:
			return faults.Fault{Kind: faults.FaultStall, After: firstBytes, Delay: 200 * time.Millisecond}
		case r.Op == "range" && r.Key == slowKey:
			return faults.Fault{Kind: faults.FaultStall}
		}
		return faults.Fault{}
	}})
	cache := NewFrameCache(0, opts...)
	set := NewSet(store, "bkt", chunks, Options{Readahead: -1, MaxFrameBytes: 1 << 20, Cache: cache})
	t.Cleanup(set.Close)
	return set, giant, small
}

// readChunk reads tar bytes [u0,u1) of chunk ci whole.
func readChunk(ctx context.Context, s *Set, ci int32, u0, u1 int64) ([]byte, error) {
	src, err := s.Range(ctx, ci, u0, u1)
	if err != nil {
		return nil, err
	}
	sr := &segReader{src: src}
	defer sr.Close()
	return io.ReadAll(sr)
}

// TestSpeculativePartNeverWaitsForStreamSlot: a reader of the first MiB
// of a giant frame whose first part arrived gets its bytes while the
// other sub-ranges of its parts are stuck on stalled backend connections. The reader's window grows when it first waits for
// data; the part it then adds is speculative and must not wait for one
// of the stream's GET slots (all held by the stalled sub-ranges of its
// parts ahead). On the old code it did, and the read hung until its
// context ended (here 5 s).
func TestSpeculativePartNeverWaitsForStreamSlot(t *testing.T) {
	set, giant, _ := slowFixture(t, 24<<20, 3<<19, WithMemory(256<<20), WithMemoryWait(2*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	got, err := readChunk(ctx, set, 0, 0, 1<<20)
	if err != nil {
		t.Fatalf("read of the giant frame's first MiB: %v after %v", err, time.Since(start))
	}
	if !bytes.Equal(got, giant[:1<<20]) {
		t.Fatalf("wrong bytes")
	}
	t.Logf("served in %v", time.Since(start).Round(time.Millisecond))
}

// TestParkedPartsYieldGetSlots: a decoder parked by a read that ended
// where its client asked keeps its parts ahead, and their GETs (here
// stalled, as a backend connection that stopped sending) hold the
// process's GET slots (MaxParts 8, all of them). A demand read of another
// chunk that finds no GET slot drops that parked decoder (its parts are
// speculative) and is served at once. On the old code only a shortage of
// memory dropped parked decoders: the read waited the whole memory wait
// and failed with ErrBusy.
func TestParkedPartsYieldGetSlots(t *testing.T) {
	set, giant, small := slowFixture(t, 24<<20, 3<<19, WithMemory(256<<20), WithMaxParts(8), WithMemoryWait(2*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := readChunk(ctx, set, 0, 0, 1<<20)
	if err != nil || !bytes.Equal(got, giant[:1<<20]) {
		t.Fatalf("read of the giant frame's first MiB: %v", err)
	}
	if _, gets := set.lim.inUse(); gets != 8 {
		t.Fatalf("%d GETs in flight after the giant read parked, want 8 (the fixture holds every slot)", gets)
	}
	start := time.Now()
	got, err = readChunk(ctx, set, 1, 0, int64(len(small)))
	took := time.Since(start)
	if err != nil || !bytes.Equal(got, small) || took > time.Second {
		t.Fatalf("read of another chunk while a parked decoder's parts hold every GET slot: %v after %v, want its bytes at once", err, took)
	}
}

// TestClaimsNotHeldForStreamSlot: a framed reader whose first part (8
// frames of 1 MiB in a 9 MiB part, fetched as 8 sub-range GETs: every GET
// slot of its stream) is stuck on stalled backend connections must not hold the
// claims of its next part's frames while it waits for one of those slots:
// another reader of one of those frames fetches it itself and is served.
// On the old code the first reader's producer claimed the frames, then
// waited for a slot its stalled GETs never returned, and the second
// reader waited on its claim until its context ended (here 3 s).
func TestClaimsNotHeldForStreamSlot(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	var obj, tarBytes []byte
	var frames []Frame
	for range 16 {
		data := make([]byte, 1<<20)
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
	stallBefore := frames[8].COff // the first part's GETs stall
	store := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if r.Op == "range" && r.Off < stallBefore {
			return faults.Fault{Kind: faults.FaultStall}
		}
		return faults.Fault{}
	}})
	chunks := []Chunk{{Key: key, Kind: FramedZstd, Frames: frames, Size: int64(len(obj))}}
	set := NewSet(store, "bkt", chunks, Options{Readahead: -1, Cache: NewFrameCache(64<<20, WithMemory(256<<20), WithPartSize(9<<20))})
	t.Cleanup(set.Close)

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		_, _ = readChunk(ctxA, set, 0, 0, int64(len(tarBytes))) // stuck on its first part until cancelled
	}()
	time.Sleep(300 * time.Millisecond) // its producer has planned the second part

	ctxB, cancelB := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelB()
	u0 := frames[9].UOff
	start := time.Now()
	got, err := readChunk(ctxB, set, 0, u0, u0+4096)
	if err != nil || !bytes.Equal(got, tarBytes[u0:u0+4096]) {
		t.Fatalf("read of frame 9 while another reader's first part is stalled: %v after %v, want its bytes", err, time.Since(start))
	}
	cancelA()
	<-doneA
}

// TestPrefetchNeverWaitsForItsSlots: a prefetch whose GET slots are all
// in use (here taken beforehand, as its earlier parts' GETs in flight
// would) gives up at once, its claim given back, instead of waiting for
// a slot with the claim of its next frame held: a reader of that frame
// is served. On the old code the prefetch waited (its context is the
// Set's: no deadline) and the reader waited on its claim until the
// reader's context ended.
func TestPrefetchNeverWaitsForItsSlots(t *testing.T) {
	set, _, small := slowFixture(t, 2<<20, 0, WithMemory(256<<20))
	slots := make(chan struct{}, set.lim.streamParts)
	for range cap(slots) {
		slots <- struct{}{}
	}
	budget, held := int64(64<<20), int64(0)
	var workers sync.WaitGroup
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		prefetch(set.ctx, set, 1, 0, 0, &budget, &held, slots, &workers)
	}()
	for deadline := time.Now().Add(time.Second); !set.FrameCached(1, 0); { // claimed, or the prefetch ended
		select {
		case <-returned:
		default:
			if time.Now().After(deadline) {
				t.Fatal("the prefetch neither claimed the frame nor ended")
			}
			time.Sleep(time.Millisecond)
			continue
		}
		break
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	got, err := readChunk(ctx, set, 1, 0, int64(len(small)))
	if err != nil || !bytes.Equal(got, small) {
		t.Fatalf("read of a frame a prefetch claimed: %v, want its bytes", err)
	}
	for range cap(slots) {
		<-slots // the prefetch's slots free: a waiting prefetch ends
	}
	<-returned
	workers.Wait()
}

// TestDecoderShareDropsOnlyOwnParked: a client at its share of the stream
// decoders (1 of 5) that asks for another waits and is refused busy; it
// must not drop another client's parked decoder on the way (that frees
// nothing it may take, and costs the other client its decoder's position:
// its next sequential range decodes from the start). On the old code
// every parked decoder of the process was dropped.
func TestDecoderShareDropsOnlyOwnParked(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var chunks []Chunk
	for i := range 3 {
		data := make([]byte, 4<<20)
		for k := range data {
			data[k] = byte(rng.Uint32())
		}
		comp := enc.EncodeAll(data, nil)
		key := "s/uploads/u/chunks/g" + string(rune('0'+i)) + ".tar.zst"
		p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, comp, 0o644); err != nil {
			t.Fatal(err)
		}
		fr := Frame{COff: 0, CSize: int64(len(comp)), USize: int64(len(data)), Sum: sha256.Sum256(comp), HasSum: true}
		chunks = append(chunks, Chunk{Key: key, Kind: FramedZstd, Frames: []Frame{fr}, Size: int64(len(comp))})
	}
	cache := NewFrameCache(0, WithMemory(256<<20), WithMemoryWait(500*time.Millisecond))
	if _, decs := cache.Limits().ClientShare(); decs != 1 || cache.lim.maxDecoders < 3 {
		t.Fatalf("fixture: %d decoders per client of %d, want 1 of at least 3", decs, cache.lim.maxDecoders)
	}
	set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{Readahead: -1, MaxFrameBytes: 1 << 20, Cache: cache})
	t.Cleanup(set.Close)
	parked := func() int {
		cache.parkMu.Lock()
		defer cache.parkMu.Unlock()
		return len(cache.parked)
	}

	ctxA := WithClient(context.Background(), "key:a")
	if _, err := readChunk(ctxA, set, 0, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if parked() != 1 {
		t.Fatalf("%d decoders parked after client a's read, want 1", parked())
	}
	ctxB := WithClient(context.Background(), "key:b")
	held, err := set.Range(ctxB, 1, 0, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, _, err := held.Next(); err != nil { // client b's one decoder, in use
		t.Fatal(err)
	}
	_, err = readChunk(ctxB, set, 2, 0, 4096)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("client b's second stream: %v, want ErrBusy (its decoder share is used)", err)
	}
	if parked() != 1 {
		t.Fatalf("%d decoders parked after client b was refused, want client a's 1", parked())
	}
}

// TestClientShareDropsOwnParked: a client whose share of the budget is
// held by its own parked stream decoder (its window and the parts it kept
// ahead) gets its next read served: the read drops that parked decoder,
// as it evicts its own cached frames, before it waits. On the old code
// only cached frames were evicted for a client short of its share, and
// the read waited the memory wait and failed with ErrBusy.
func TestClientShareDropsOwnParked(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var chunks []Chunk
	var datas [][]byte
	for i, n := range []int{4 << 20, 3 << 20} { // a giant frame, a cached one
		data := make([]byte, n)
		for k := range data {
			data[k] = byte(rng.Uint32())
		}
		comp := enc.EncodeAll(data, nil)
		key := "s/uploads/u/chunks/h" + string(rune('0'+i)) + ".tar.zst"
		p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, comp, 0o644); err != nil {
			t.Fatal(err)
		}
		fr := Frame{COff: 0, CSize: int64(len(comp)), USize: int64(len(data)), Sum: sha256.Sum256(comp), HasSum: true}
		chunks = append(chunks, Chunk{Key: key, Kind: FramedZstd, Frames: []Frame{fr}, Size: int64(len(comp))})
		datas = append(datas, data)
	}
	cache := NewFrameCache(0, WithMemory(64<<20), WithMemoryWait(500*time.Millisecond))
	set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{Readahead: -1, MaxFrameBytes: 7 << 19, Cache: cache})
	t.Cleanup(set.Close)
	ctx := WithClient(context.Background(), "key:a")
	if _, err := readChunk(ctx, set, 0, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	share, _ := cache.Limits().ClientShare()
	used, _ := cache.MemoryInUse()
	if need := bufSize(chunks[1].Frames[0].CSize) + bufSize(3<<20); used+need <= share {
		t.Fatalf("fixture: the parked decoder holds %d bytes: the next read's %d fit the %d share anyway", used, need, share)
	}
	got, err := readChunk(ctx, set, 1, 0, 3<<20)
	if err != nil || !bytes.Equal(got, datas[1]) {
		t.Fatalf("the client's read while its own parked decoder holds its share: %v, want its bytes", err)
	}
}
