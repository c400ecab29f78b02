package chunkio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// FuzzFramedChunk: a framed chunk whose frame table (any table
// manifest.CheckFrames accepts, with or without frame checksums) and
// bytes are arbitrary never makes a read panic or hang; a read either
// fails (ErrCorrupt, ErrChecksum; backend.ErrInvalidRange for frames past
// the object's end) or serves exactly the bytes the frames
// decode to, each frame decoded on its own (a frame's end only when it
// decodes to its declared length).
func FuzzFramedChunk(f *testing.F) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		f.Fatal(err)
	}
	a := enc.EncodeAll([]byte("first frame"), nil)
	b := enc.EncodeAll(bytes.Repeat([]byte("second "), 40), nil)
	table := func(sums bool, fr ...[2]int) []byte {
		var t []byte
		for _, x := range fr {
			t = binary.LittleEndian.AppendUint16(t, uint16(x[0]))
			t = binary.LittleEndian.AppendUint16(t, uint16(x[1]))
		}
		if sums {
			t = append(t, 1)
		}
		return t
	}
	ab := append(append([]byte{}, a...), b...)
	f.Add(ab, table(true, [2]int{len(a), 11}, [2]int{len(b), 280}), uint16(3), uint16(200))
	f.Add(ab, table(false, [2]int{len(a), 11}, [2]int{len(b), 280}), uint16(0), uint16(291))
	f.Add(ab, table(false, [2]int{len(a), 12}, [2]int{len(b), 279}), uint16(0), uint16(291))
	f.Add(ab, table(true, [2]int{len(ab), 291}), uint16(5), uint16(6))
	f.Add(rawFrame(10, []byte("raw")), table(false, [2]int{12, 3}), uint16(0), uint16(3))
	dir := f.TempDir()
	key := "s/uploads/u/shard-0/chunk-0.tar.zst"
	p := filepath.Join(dir, "bkt", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.Fatal(err)
	}
	store := backend.NewFileStore(dir)
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, obj, tbl []byte, u0, n uint16) {
		sums := len(tbl)%4 == 1 && tbl[len(tbl)-1] == 1
		var frames []Frame
		var coff, uoff int64
		for i := 0; i+4 <= len(tbl) && len(frames) < 64; i += 4 {
			fr := Frame{COff: coff, CSize: int64(binary.LittleEndian.Uint16(tbl[i:])), UOff: uoff, USize: int64(binary.LittleEndian.Uint16(tbl[i+2:]))}
			coff, uoff = coff+fr.CSize, uoff+fr.USize
			if sums && fr.COff+fr.CSize <= int64(len(obj)) {
				fr.Sum, fr.HasSum = sha256.Sum256(obj[fr.COff:fr.COff+fr.CSize]), true
			}
			frames = append(frames, fr)
		}
		if _, err := manifest.CheckFrames(len(frames), func(i int) manifest.FrameSpan { return frames[i].Span() }, int64(len(obj))); err != nil || len(frames) == 0 {
			return // refused at open
		}
		lo, hi := int64(u0), int64(u0)+int64(n)
		if n == 0 || hi > uoff {
			return
		}
		if err := os.WriteFile(p, obj, 0o644); err != nil {
			t.Fatal(err)
		}
		set := NewSet(store, "bkt", []Chunk{{Key: key, Kind: FramedZstd, Frames: frames, Size: int64(len(obj))}}, Options{Readahead: -1, MaxFrameBytes: 256})
		defer set.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := readChunk(ctx, set, 0, lo, hi)
		if ctx.Err() != nil {
			t.Fatalf("read still running after 5 s: %v", err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrChecksum) && !errors.Is(err, backend.ErrInvalidRange) {
				t.Fatalf("refusal wraps none of ErrCorrupt, ErrChecksum, backend.ErrInvalidRange: %v", err)
			}
			return
		}
		if int64(len(got)) != hi-lo {
			t.Fatalf("served %d bytes of [%d,%d)", len(got), lo, hi)
		}
		for _, fr := range frames {
			a, b := max(lo, fr.UOff), min(hi, fr.UOff+fr.USize)
			if a >= b {
				continue
			}
			// What the frame's bytes decode to, up to any error: a
			// streamed (giant) frame's prefix may be served before its
			// end is checked, but its end only once its length is right.
			if err := dec.Reset(bytes.NewReader(obj[fr.COff : fr.COff+fr.CSize])); err != nil {
				t.Fatalf("served bytes of frame %+v, which no decoder starts on (%v)", fr, err)
			}
			d, derr := io.ReadAll(io.LimitReader(dec, fr.USize+1))
			if int64(len(d)) < b-fr.UOff || !bytes.Equal(got[a-lo:b-lo], d[a-fr.UOff:b-fr.UOff]) {
				t.Fatalf("served %q of frame %+v at [%d,%d), it decodes to %q (%v)", got[a-lo:b-lo], fr, a, b, d, derr)
			}
			if b == fr.UOff+fr.USize && (int64(len(d)) != fr.USize || derr != nil) {
				t.Fatalf("served the end of frame %+v, which decodes to %d bytes (%v)", fr, len(d), derr)
			}
		}
	})
}
