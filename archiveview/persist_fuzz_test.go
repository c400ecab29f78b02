package archiveview

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/backend"
)

// piFuzzSeeds are index files of real archives (written by cargopack,
// opened, indexed) in a few shapes, without their trailers.
func piFuzzSeeds(f testing.TB) [][]byte {
	dir := f.TempDir()
	plain := func(string) bool { return true }
	var out [][]byte
	for i, opt := range []cargopack.Options{
		{FrameSize: 16 << 10, SplitSize: 15000, Dedup: true, UploadID: "20250101-00000001"},
		{Direct: true, ContentHash: true, UploadID: "20250101-00000002",
			Metadata: func(string) map[string]string { return map[string]string{"magika_mime": "text/plain"} }},
		{PlainTar: plain, Pre492: true, UploadID: "20250101-00000003"},
		{Version: "1.0", UploadID: "20250101-00000004"},
	} {
		opt.Prefix = "fz"
		res := rvPack(f, dir, hoDupFiles(), opt)
		a, err := BuildIndex(context.Background(), backend.NewFileStore(dir), rvBucket, res.ManifestKey, Options{})
		if err != nil {
			f.Fatalf("seed %d: %v", i, err)
		}
		var buf bytes.Buffer
		if err := a.WriteIndex(&buf); err != nil {
			f.Fatal(err)
		}
		a.Close()
		out = append(out, buf.Bytes()[:buf.Len()-index.TrailerBytes])
	}
	return out
}

// FuzzReadIndex: the input is an index body; it is loaded as given and
// with a freshly computed trailer (so that mutations reach the decoder).
// Loading never panics; a refusal wraps ErrBadIndex; an accepted file keeps
// the tree's invariants and writes back to the same bytes. Huge counts are
// refused before allocation (newIndexDecoder's up-front check), so the
// fuzzer's memory stays bounded by the input size. Run it with a short
// -fuzzminimizetime (e.g. 1s): with the default 60s the worker spends the
// whole of a brief -fuzztime minimizing its first new inputs.
func FuzzReadIndex(f *testing.F) {
	for _, s := range piFuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, data := range [][]byte{body, piReseal(bytes.Clone(body))} {
			a, err := openIndexBytes(nil, data, "fuzz.widx", Options{})
			if err != nil {
				if !errors.Is(err, ErrBadIndex) {
					t.Fatalf("refusal does not wrap ErrBadIndex: %v", err)
				}
				continue
			}
			piCheckInvariants(t, a)
			var buf bytes.Buffer
			if err := a.WriteIndex(&buf); err != nil {
				t.Fatalf("WriteIndex of an accepted index: %v", err)
			}
			if !bytes.Equal(buf.Bytes(), data) {
				t.Fatalf("accepted index does not write back to itself (%d vs %d bytes)", buf.Len(), len(data))
			}
			a.Close()
		}
	})
}

// piCheckInvariants checks what the read path relies on, independently of
// the loader's own checks.
func piCheckInvariants(t *testing.T, a *Archive) {
	t.Helper()
	x := &a.tree.Idx
	prev := ""
	for i := 0; i < x.N(); i++ {
		k := x.KeyAt(i)
		if i > 0 && k <= prev {
			t.Fatalf("keys not strictly ascending at %d: %q after %q", i, k, prev)
		}
		prev = k
		f := x.File(i)
		if g, ok := a.Stat(k); !ok || g != f {
			t.Fatalf("Stat(%q) does not find file %d", k, i)
		}
		var at int64
		for _, e := range a.fileExtents(int32(i)) {
			if e.Chunk < 0 || int(e.Chunk) >= len(a.tree.Chunks) || e.FileOff != at || e.Length < 0 || e.Off < -1 {
				t.Fatalf("file %q: bad extent %+v at %d", k, e, at)
			}
			c := &a.tree.Chunks[e.Chunk]
			if c.Kind == chunkio.FramedZstd && e.Off >= 0 {
				last := c.Frames[len(c.Frames)-1]
				if e.Off+e.Length > last.UOff+last.USize {
					t.Fatalf("file %q: extent past its chunk", k)
				}
			}
			at += e.Length
		}
		if at != f.Size {
			t.Fatalf("file %q: extents cover %d of %d", k, at, f.Size)
		}
	}
	for i := range a.tree.Chunks {
		c := &a.tree.Chunks[i]
		var u int64
		for _, fr := range c.Frames {
			if fr.UOff != u || fr.USize <= 0 || fr.CSize <= 0 || fr.COff < 0 || fr.COff+fr.CSize > c.Size {
				t.Fatalf("chunk %s: bad frame %+v", c.Key, fr)
			}
			u += fr.USize
		}
	}
	a.List(ListParams{Delimiter: "/", MaxKeys: 1000})
}

// TestFuzzReadIndexSeedsCommitted keeps testdata/fuzz/FuzzReadIndex
// non-empty: the committed corpus covers shapes f.Add does not rebuild
// (hand-damaged headers).
func TestFuzzReadIndexSeedsCommitted(t *testing.T) {
	ents, err := os.ReadDir("testdata/fuzz/FuzzReadIndex")
	if err != nil || len(ents) == 0 {
		t.Fatalf("testdata/fuzz/FuzzReadIndex: %d entries, err %v", len(ents), err)
	}
}

// TestReadIndexMutations is FuzzReadIndex's check as a plain test over
// deterministic random mutations of the seeds (1-4 bytes replaced, the
// trailer recomputed), so that every run exercises the decoder past the
// checksum.
func TestReadIndexMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 7))
	seeds := piFuzzSeeds(t)
	accepted := 0
	for it := 0; it < 3000; it++ {
		s := bytes.Clone(seeds[r.IntN(len(seeds))])
		for k := 0; k < 1+r.IntN(4); k++ {
			s[r.IntN(len(s))] = byte(r.Uint32())
		}
		data := piReseal(s)
		a, err := openIndexBytes(nil, data, "mut.widx", Options{})
		if err != nil {
			if !errors.Is(err, ErrBadIndex) {
				t.Fatalf("refusal does not wrap ErrBadIndex: %v", err)
			}
			continue
		}
		accepted++
		piCheckInvariants(t, a)
		var buf bytes.Buffer
		if err := a.WriteIndex(&buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("iteration %d: accepted index does not write back to itself", it)
		}
	}
	t.Logf("%d of 3000 mutated indexes accepted (mutations of names, sums, times, unused bytes)", accepted)
}
