package archiveview

// Tests written for the hand mutants of the rev-mutation audit that no
// test killed (TESTING.md, "Mutation audit (rev-mutation)").

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// TestVerifyChunkPhaseChecksFrameSums: Verify's chunk pass checks every
// frame's sha256 itself, not only that the frame decodes to its length. A
// frame whose bytes decode cleanly to the right length but are not the
// ones the manifest's sha256 names (another valid frame put in its place)
// must be reported against the chunk, with no file key, as a sha256
// mismatch, besides the files that read it.
func TestVerifyChunkPhaseChecksFrameSums(t *testing.T) {
	files := rpTree(31)
	ra := rpNew(t, files, cargopack.Options{FrameSize: 64 << 10}, Options{})
	c, _ := rpChunkOf(t, ra, "big/large.txt")
	if len(c.Frames) < 2 || !c.Frames[1].HasSum {
		t.Fatalf("chunk %s: %d frames, want several with sums", c.Key, len(c.Frames))
	}
	// The manifest's sum of frame 1 no longer names the stored bytes
	// (which still decode to its decoded size).
	c.Frames[1].Sum[0] ^= 0xff
	var problems []VerifyProblem
	if _, err := ra.a.Verify(context.Background(), func(p VerifyProblem) { problems = append(problems, p) }); err != nil {
		t.Fatal(err)
	}
	chunkLevel := false
	for _, p := range problems {
		if p.Key == "" && p.Chunk == c.Key && strings.Contains(p.Detail, "frame 1 ") && strings.Contains(p.Detail, "sha256 mismatch") {
			chunkLevel = true
		}
	}
	if !chunkLevel {
		t.Fatalf("the chunk pass did not report frame 1 of %s as a sha256 mismatch; problems: %+v", c.Key, problems)
	}
}

// TestVerifyReturnsMemoryAfterMismatch: Verify's chunk pass takes each
// part's decoded frames' memory with the part and returns what a frame
// that failed its sha256 (and so was not decoded) did not use: after a
// verification that found one, nothing is charged to the budget.
func TestVerifyReturnsMemoryAfterMismatch(t *testing.T) {
	cache := chunkio.NewFrameCache(0, chunkio.WithMemory(64<<20))
	ra := rpNew(t, rpTree(32), cargopack.Options{FrameSize: 64 << 10}, Options{Cache: cache, Readahead: -1})
	c, _ := rpChunkOf(t, ra, "big/large.txt")
	c.Frames[1].Sum[0] ^= 0xff
	st, err := ra.a.Verify(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Problems == 0 {
		t.Fatal("the mismatch was not found")
	}
	// A reader's Close does not wait for its part workers (a stalled GET
	// must not hold the caller): they give their memory back as they end,
	// within moments of Verify's return.
	deadline := time.Now().Add(5 * time.Second)
	for {
		used, _ := cache.MemoryInUse()
		if used == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still charged to the read memory 5 s after Verify", used)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestVerifyEmptiedDirectObject: a direct object cut to zero bytes (its
// file is not empty) is reported by Verify's chunk pass against the
// chunk, besides the file's read failing: the zero-size object takes its
// own path (no GET) and must still be checked against its sha256.
func TestVerifyEmptiedDirectObject(t *testing.T) {
	ra := rpNew(t, rpTree(33), cargopack.Options{Direct: true}, Options{})
	c, _ := rpChunkOf(t, ra, "mid/one.txt")
	if !c.HasSum {
		t.Fatalf("direct object %s has no sha256 in the manifest", c.Key)
	}
	if err := os.WriteFile(filepath.Join(ra.dir, rpBucket, filepath.FromSlash(c.Key)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var problems []VerifyProblem
	if _, err := ra.a.Verify(context.Background(), func(p VerifyProblem) { problems = append(problems, p) }); err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if p.Key == "" && p.Chunk == c.Key {
			return
		}
	}
	t.Fatalf("the chunk pass did not report the emptied direct object %s; problems: %+v", c.Key, problems)
}
