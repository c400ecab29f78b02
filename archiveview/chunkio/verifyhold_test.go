package chunkio

import (
	"context"
	"testing"
	"time"
)

// TestVerifyChunkTakesDecodedWithItsParts: verifying a framed chunk of
// sixteen 2 MiB frames (incompressible) at a 32 MiB budget reports no
// problem. Its parts (8 MiB each, up to StreamParts in flight) take the
// budget; each frame's decoded buffer must come with its part's take, not
// be waited for while the part (and a decode slot) is held. On the old
// code every part waited for its decoded buffer's memory, which the other
// parts held, and verification reported ErrBusy for the frames.
func TestVerifyChunkTakesDecodedWithItsParts(t *testing.T) {
	set, _ := framedFixture(t, 16, 2<<20, WithMemory(32<<20), WithMemoryWait(time.Second))
	var problems []string
	checked, frames := set.VerifyChunk(context.Background(), 0, func(p string) { problems = append(problems, p) })
	if !checked || frames != 16 || len(problems) > 0 {
		t.Fatalf("verify of a sound chunk: checked %v, %d frames, problems %q", checked, frames, problems)
	}
	if used, _ := set.lim.MemoryInUse(); used != 0 {
		t.Errorf("%d bytes still charged after the verify", used)
	}
}
