package archiveview

// Tests written for the hand mutants of the rev-mutation audit that no
// test killed (TESTING.md, "Mutation audit (rev-mutation)").

import (
	"context"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
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
