package cargopack

import (
	"bytes"
	"testing"
)

// FuzzWriteRoundTrip packs fuzzed contents and shapes and checks the
// invariants every reader relies on: each stored entry's bytes sit at its
// archive_offset, frames tile object and stream with matching checksums, and
// the manifest decodes.
func FuzzWriteRoundTrip(f *testing.F) {
	f.Add([]byte("hello world"), []byte{}, []byte("\x89PNG...."), uint16(1024), uint16(0), uint8(0))
	f.Add(bytes.Repeat([]byte("ab"), 3000), []byte("x"), []byte{0x1f, 0x8b, 1, 2}, uint16(512), uint16(1000), uint8(1))
	f.Add(make([]byte, 4096-512), []byte("y"), []byte("z"), uint16(4096), uint16(0), uint8(2))
	f.Add(randBytes(1, 9000), randBytes(2, 100), []byte{}, uint16(700), uint16(2500), uint8(3))
	f.Fuzz(func(t *testing.T, a, b, c []byte, frame, split uint16, flags uint8) {
		src := map[string][]byte{"a.txt": a, "dir/b": b, "dir/c.bin": c}
		// Tiny frames or parts are legal but cost a zstd frame (or a tar
		// entry) per few bytes; keep each run fast.
		fs, ss := int64(frame), int64(split)
		if fs != 0 {
			fs = 256 + fs%16384
		}
		if ss != 0 {
			ss = 256 + ss%16384
		}
		opt := Options{
			FrameSize:   fs,
			SplitSize:   ss,
			NoSubFrames: flags&1 != 0,
			Dedup:       flags&2 != 0,
			ChunkSize:   fs*3 + 1,
		}
		if flags&4 != 0 {
			opt.PlainTar = func(string) bool { return true }
		}
		p := pack(t, src, opt)
		for _, ch := range p.m.Chunks {
			if len(ch.Frames) > 0 {
				checkFrames(t, p, ch)
			}
		}
		checkOffsets(t, p)
	})
}

// FuzzSniff: the magic-byte classifier never panics and agrees with a
// direct prefix check for a few signatures.
func FuzzSniff(f *testing.F) {
	for _, s := range [][]byte{{}, {0x1f}, {0x1f, 0x8b}, []byte("\x89PNG"), []byte("....ftypheic"), []byte("MZ")} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		got := sniffPrecompressed(head)
		if bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}) && !got {
			t.Fatal("zstd magic not recognised")
		}
		if len(head) == 0 && got {
			t.Fatal("empty head classified as compressed")
		}
	})
}
