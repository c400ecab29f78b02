package archiveview

// This file is the contract between the two halves of the package: the
// resolver/index (open.go, resolve.go, index.go, list.go) fills these
// structures, and the read path (read.go, fetch.go, framecache.go, tarwalk.go)
// consumes them. Neither half reaches into the other's files.

import (
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// chunkKind says how a chunk object's bytes become the tar stream.
type chunkKind uint8

const (
	kindFramedZstd chunkKind = iota // .tar.zst with a frame table: range-GET covering frames
	kindStreamZstd                  // .tar.zst without frames: decode from byte 0 (parked decoders)
	kindPlainTar                    // .tar: the object IS the tar stream; direct ranges
	kindDirect                      // standalone direct-upload object: the object IS the file
)

func (k chunkKind) String() string {
	switch k {
	case kindFramedZstd:
		return "framed-zstd"
	case kindStreamZstd:
		return "stream-zstd"
	case kindPlainTar:
		return "plain-tar"
	case kindDirect:
		return "direct"
	}
	return "unknown"
}

// frame is one independent zstd frame of a framed chunk. Frames tile the
// uncompressed tar stream in order; their compressed spans do not overlap
// (validated), though gaps (skippable frames) are allowed.
type frame struct {
	cOff, cSize int64 // span in the object
	uOff, uSize int64 // span in the uncompressed tar stream
	sum         [32]byte
	hasSum      bool
}

// chunk is one backing object: a chunk of the tar stream or a direct object.
type chunk struct {
	key    string    // object key in Archive.bucket (already resolved)
	kind   chunkKind //
	frames []frame   // kindFramedZstd only, sorted by uOff
	size   int64     // object size per manifest (compressed_size); 0 = unknown
	sum    [32]byte  // whole-object sha256 (unframed chunks), if hasSum
	hasSum bool
	// maxTar bounds the tar stream an unframed zstd chunk may decode to
	// (resolve.go streamBounds); 0 = no bound known.
	maxTar int64

	// rs is the read path's lazily built per-chunk state (tar-walk offsets,
	// parked decoders, observed ETag). Owned by the read path.
	rsOnce sync.Once
	rs     *chunkReadState
}

// extent is one contiguous piece of a virtual file inside one chunk.
type extent struct {
	chunk   int32  // index into Archive.chunks
	fileOff int64  // where this piece starts in the virtual file
	off     int64  // data offset in the chunk's tar stream (object offset for direct); -1 = unknown
	length  int64  // bytes
	tarName string // expected tar entry name (path or path.partN); "" for direct objects
	sum     [32]byte
	hasSum  bool // sha256 of exactly this piece (split parts only)
}

// Archive is one served CargoShip upload (with its resolved chain).
// It is immutable after Open and safe for concurrent use.
type Archive struct {
	name        string // display name used in errors (bucket name when served)
	store       backend.Store
	bucket      string // bucket the manifest (and every chunk) is read from
	manifestKey string
	uploadID    string
	version     string
	created     time.Time
	region      string
	chain       []string // upload ids, newest first

	chunks []chunk
	idx    index // sorted virtual tree (index.go)

	shapes   []string // shapes found, for inspect and /-/archives
	warnings []string

	cache   *FrameCache
	metrics *Metrics
	log     zerolog.Logger
	opts    Options

	// rd is the read path's lazily built archive-wide state (prefetch
	// lifetime, parked decoders). Owned by the read path (readstate.go).
	rdOnce sync.Once
	rd     *archiveReadState

	// vers is the lazily built version history of a chain (versions.go).
	vers versionsState

	// prov records the manifests the tree was built from (BuildIndex, or
	// Open with IndexCacheDir; persist.go); nil otherwise.
	prov *indexProvenance
}

// Options configure Open.
type Options struct {
	// Name is the archive's display name (the bucket it is served as); errors
	// name it. Defaults to the upload id.
	Name string
	// Cache is the shared decoded-frame cache; nil gives a private 128 MiB one.
	Cache *FrameCache
	// Metrics receives the wharf_frames_* and checksum series; nil disables.
	Metrics *Metrics
	Logger  zerolog.Logger
	// Limits caps manifest size and counts; zero fields take the defaults.
	Limits manifest.Limits
	// MaxFrameBytes: frames whose uncompressed or compressed size exceeds
	// this are streamed (decoded on the fly, verified at the frame's end)
	// instead of cached.
	// 0 = 64 MiB.
	MaxFrameBytes int64
	// Readahead is how many frames past a sequential read are kept
	// prefetched (refilled in one coalesced GET when half of it is used).
	// 0 = 8; negative disables.
	Readahead int
	// SmallVerifyBytes: a partial read of an extent that has a sha256 but no
	// frame checksum (plain tar, direct, stream zstd, giant frame) and is at
	// most this long fetches and verifies the whole extent first, so flipped
	// bytes are never served. 0 = 8 MiB; negative disables.
	SmallVerifyBytes int64
	// IndexCacheDir, when set, makes Open keep a persistent index of the
	// archive in this directory (persist.go): if the file recorded for
	// (bucket, manifest key) is intact and every manifest it was built from
	// still has the same ETag and size (HEAD requests only), the tree is
	// loaded from it with no manifest GET; otherwise Open reads the
	// manifests and writes a fresh file (temp file + rename).
	IndexCacheDir string
}

// Info summarizes an archive for inspect, logs and the admin page.
type Info struct {
	Name, UploadID, Version, ManifestKey string
	Chain                                []string // upload ids, newest first
	Files, Chunks, Frames                int
	CompressedBytes, UncompressedBytes   int64
	Shapes, Warnings                     []string
}
