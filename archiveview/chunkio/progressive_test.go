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
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/backend"
)

// progressiveFixture stores one framed chunk holding a single frame of
// size decoded bytes (compressible, pseudo-random) whose manifest entry
// says usize bytes, and returns a Set over it and the frame's bytes.
func progressiveFixture(t *testing.T, size, usize int64) (*Set, []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	src := make([]byte, size)
	for i := 0; i < len(src); i += 64 {
		if rng.IntN(3) == 0 {
			for k := i; k < min(i+64, len(src)); k++ {
				src[k] = byte(rng.Uint32())
			}
		} else {
			copy(src[i:min(i+64, len(src))], "temperature=12.5, pressure=1013.25, station=wharf-0042\n....")
		}
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	comp := enc.EncodeAll(src, nil)
	dir := t.TempDir()
	key := "s/uploads/u/chunks/c0.tar.zst"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, comp, 0o644); err != nil {
		t.Fatal(err)
	}
	fr := Frame{COff: 0, CSize: int64(len(comp)), UOff: 0, USize: usize, Sum: sha256.Sum256(comp), HasSum: true}
	chunks := []Chunk{{Key: key, Kind: FramedZstd, Frames: []Frame{fr}, Size: int64(len(comp))}}
	set := NewSet(backend.NewFileStore(dir), "bkt", chunks, Options{Readahead: -1})
	t.Cleanup(set.Close)
	return set, src
}

func readRange(ctx context.Context, s *Set, u0, u1 int64) ([]byte, error) {
	src, err := s.Range(ctx, 0, u0, u1)
	if err != nil {
		return nil, err
	}
	sr := &segReader{src: src}
	defer sr.Close()
	return io.ReadAll(sr)
}

// TestReaderServedBeforeDecodeEnds: a cold read of the first 1 MiB of a
// 16 MiB verified frame gets its bytes while the frame's decode is held
// at its next step (the decode's hook waits for the reader, at most 5 s),
// so before the decode of the frame ends; the decode then runs to the end
// and the frame is cached whole, every byte right. On the code before the
// progressive decode (readers waited for the flight's completion) the
// reader got nothing until the hook gave up, and the test fails.
func TestReaderServedBeforeDecodeEnds(t *testing.T) {
	const size = 16 << 20
	set, src := progressiveFixture(t, size, size)
	got := make(chan struct{})
	early := make(chan bool, 1)
	var steps []int64
	set.cache.stepHook = func(n int64) {
		steps = append(steps, n)
		if n >= 1<<20 && len(early) == 0 && n < size {
			select {
			case <-got:
				early <- true
			case <-time.After(5 * time.Second):
				early <- false
			}
		}
	}
	ctx := context.Background()
	b, err := readRange(ctx, set, 0, 1<<20)
	close(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, src[:1<<20]) {
		t.Fatal("first MiB differs")
	}
	if !<-early {
		t.Fatal("the reader got its bytes only after the frame's decode ended")
	}
	// The decode runs to the end and the frame is cached whole.
	deadline := time.Now().Add(10 * time.Second)
	for set.cache.Len() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the frame was never cached")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if steps[len(steps)-1] != size || len(steps) != size/progressStep {
		t.Fatalf("decode steps %d, last at %d", len(steps), steps[len(steps)-1])
	}
	b, err = readRange(ctx, set, 0, size)
	if err != nil || !bytes.Equal(b, src) {
		t.Fatalf("whole frame from the cache: %v", err)
	}
	if set.Metrics() != nil && set.cache.Len() != 1 {
		t.Fatal("frame fetched twice")
	}
	if _, pinned := set.cache.Pinned(); pinned != 0 {
		t.Fatalf("%d cached frames still referenced", pinned)
	}
}

// TestProgressiveDecodeFailsAtEnd: a verified frame that decodes to one
// byte more than its manifest entry says. A reader of its first MiB,
// handed over mid-decode, gets those bytes (a prefix of the verified
// frame's decode: right); the frame then fails its length check, is not
// cached, and a reader of its last MiB gets ErrCorrupt.
func TestProgressiveDecodeFailsAtEnd(t *testing.T) {
	const size = 16 << 20
	set, src := progressiveFixture(t, size+1, size)
	ctx := context.Background()
	got := make(chan struct{})
	set.cache.stepHook = func(n int64) {
		if n == 1<<20 {
			select {
			case <-got:
			case <-time.After(5 * time.Second):
			}
		}
	}
	last := make(chan error, 1)
	go func() {
		// Needs the frame's end: joins the first reader's flight, or
		// fetches the frame again once that one failed.
		time.Sleep(20 * time.Millisecond)
		_, err := readRange(ctx, set, size-1<<20, size)
		last <- err
	}()
	b, err := readRange(ctx, set, 0, 1<<20)
	close(got)
	if err != nil || !bytes.Equal(b, src[:1<<20]) {
		t.Fatalf("first MiB: %v", err)
	}
	if err := <-last; !errors.Is(err, ErrCorrupt) {
		t.Fatalf("last MiB: %v, want ErrCorrupt", err)
	}
	if n := set.cache.Len(); n != 0 {
		t.Fatalf("%d frames cached after a failed decode", n)
	}
	// The failed decode's goroutine gives its buffer back after it told
	// its readers (as in TestEarlyDecodeChecksumMismatch): wait for it, a
	// while; a buffer never given back still fails.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		used, _ := set.cache.MemoryInUse()
		if used == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still charged 5s after the reads", used)
		}
	}
}

// TestEarlyDecodeChecksumMismatch: a frame whose bytes do not match its
// sha256 (fetched twice, wrong both times) is decoded early beside the
// hash, but none of it is ever handed to a reader: the read fails with
// ErrChecksum, nothing is cached, and every byte charged is returned.
func TestEarlyDecodeChecksumMismatch(t *testing.T) {
	const size = 4 << 20
	set, _ := progressiveFixture(t, size, size)
	set.chunks[0].Frames[0].Sum[0] ^= 1
	b, err := readRange(context.Background(), set, 0, 1<<20)
	if !errors.Is(err, ErrChecksum) || len(b) != 0 {
		t.Fatalf("read %d bytes, err %v; want none and ErrChecksum", len(b), err)
	}
	if n := set.cache.Len(); n != 0 {
		t.Fatalf("%d frames cached", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		used, _ := set.cache.MemoryInUse()
		if used == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still charged", used)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
