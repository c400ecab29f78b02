package chunkio

import (
	"errors"
	"fmt"
	"sort"

	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// Errors of the read path. Each is returned wrapped with the chunk (and, by
// the archive layer, the archive and file key) it concerns; backend errors
// keep their backend sentinel (a missing chunk is backend.ErrNotFound: a
// server-side failure, not 404).
var (
	// ErrChecksum: bytes did not match a frame, extent, part, file or
	// object sha256. Nothing after the mismatch (and not the final byte of
	// the checked range) was delivered.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrCorrupt: data that cannot be what the manifest describes (bad
	// zstd, wrong decoded length, a tar stream that ends early).
	ErrCorrupt = errors.New("corrupt archive data")
	// ErrWrongMember: the tar header in front of a manifest archive_offset
	// names another member or size.
	ErrWrongMember = errors.New("archive offset points at the wrong tar member")
	// ErrNotInChunk: a tar walk did not find the member.
	ErrNotInChunk = errors.New("tar member not found in chunk")
)

// Kind says how a chunk object's bytes become the tar stream.
// Written to disk (the index file): append only.
type Kind uint8

const (
	FramedZstd Kind = iota // .tar.zst with a frame table: range-GET covering frames
	StreamZstd             // .tar.zst without frames: decode from byte 0 (parked decoders)
	PlainTar               // .tar: the object IS the tar stream; direct ranges
	Direct                 // standalone direct-upload object: the object IS the file
)

func (k Kind) String() string {
	switch k {
	case FramedZstd:
		return "framed-zstd"
	case StreamZstd:
		return "stream-zstd"
	case PlainTar:
		return "plain-tar"
	case Direct:
		return "direct"
	}
	return "unknown"
}

// Frame is one independent zstd frame of a framed chunk. Frames tile the
// uncompressed tar stream in order; their compressed spans do not overlap
// (manifest.CheckFrames), though gaps (skippable frames) are allowed.
type Frame struct {
	COff, CSize int64 // span in the object
	UOff, USize int64 // span in the uncompressed tar stream
	Sum         [32]byte
	HasSum      bool
}

// Span is the frame's table entry as manifest.CheckFrames sees it.
func (f Frame) Span() manifest.FrameSpan {
	return manifest.FrameSpan{COff: f.COff, CSize: f.CSize, UOff: f.UOff, USize: f.USize}
}

// Chunk is one backing object: a chunk of the tar stream or a direct
// object. It is a description only (what the manifest says); the read
// state lives in the Set.
type Chunk struct {
	Key    string  // object key in the Set's bucket (already resolved)
	Kind   Kind    //
	Frames []Frame // FramedZstd only, sorted by UOff
	Size   int64   // object size per manifest (compressed_size); 0 = unknown
	Sum    [32]byte
	HasSum bool // Sum is the whole object's sha256 (unframed chunks)
	// MaxTar bounds the tar stream an unframed zstd chunk may decode to;
	// 0 = no bound known.
	MaxTar int64
}

// TarLen is the tar-stream length a framed chunk's frames cover (0 for
// other kinds).
func (c *Chunk) TarLen() int64 {
	if n := len(c.Frames); n > 0 {
		return c.Frames[n-1].UOff + c.Frames[n-1].USize
	}
	return 0
}

// Extent is one stored piece of a file: length bytes of chunk Chunk's tar
// stream (object bytes for a direct object) at Off, the data of tar member
// TarName. Off < 0 means the manifest does not record the offset (a tar
// walk finds it). Sum, when HasSum, is the sha256 of exactly these bytes.
// Checked says the caller hashes every byte of the extent against Sum
// itself as it reads it whole (and fails before the last byte on a
// mismatch), so the extent needs no check before its first byte.
type Extent struct {
	Chunk   int32
	Off     int64
	Length  int64
	TarName string // "" for direct objects
	Sum     [32]byte
	HasSum  bool
	Checked bool
}

// CoverFrames returns the frames overlapping tar bytes [u0,u1) (u1 > u0).
func CoverFrames(fr []Frame, u0, u1 int64) (lo, hi int, err error) {
	lo = sort.Search(len(fr), func(i int) bool { return fr[i].UOff+fr[i].USize > u0 })
	hi = sort.Search(len(fr), func(i int) bool { return fr[i].UOff >= u1 }) - 1
	if lo >= len(fr) || hi < lo || fr[lo].UOff > u0 || fr[hi].UOff+fr[hi].USize < u1 {
		end := int64(0)
		if n := len(fr); n > 0 {
			end = fr[n-1].UOff + fr[n-1].USize
		}
		return 0, 0, fmt.Errorf("tar bytes %d-%d lie outside the chunk's frames (tar length %d): %w", u0, u1, end, ErrCorrupt)
	}
	return lo, hi, nil
}

// framePlausible is manifest.CheckFramePlausible, worded for the read path.
func framePlausible(i int, f Frame) error {
	if err := manifest.CheckFramePlausible(f.Span()); err != nil {
		return fmt.Errorf("frame %d (object bytes %d-%d): %v: %w", i, f.COff, f.COff+f.CSize, err, ErrCorrupt)
	}
	return nil
}

// dataFailure reports whether err condemns the chunk's bytes themselves
// (as opposed to a backend or context failure that may pass).
func dataFailure(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrChecksum)
}
