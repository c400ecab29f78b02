package archiveview

// This file holds the Archive and its one constructor. The resolver
// (resolve.go, for Open and BuildIndex), the index decoder
// (internal/index, for the loaders in persist.go) and the version history
// (versions.go) each produce an index.Tree; newArchive turns any of them
// into an Archive, so an archive is assembled the same way wherever it
// came from, and nothing changes it after.

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// extent is one contiguous piece of a virtual file inside one chunk.
type extent = index.Extent

// Archive is one served CargoShip upload (with its resolved chain).
// It is immutable after Open and safe for concurrent use.
type Archive struct {
	name        string // display name used in errors (bucket name when served)
	store       backend.Store
	bucket      string // bucket the manifest (and every chunk) is read from
	manifestKey string
	tree        index.Tree // what the archive serves (never changed after newArchive)

	set  *chunkio.Set // the chunks' read state (shared with version shadows)
	log  zerolog.Logger
	opts Options

	// vers is the lazily built version history of a chain (versions.go).
	vers versionsState

	// unverified counts the files no checksum covers (info.go).
	unverified unverifiedFiles

	// prov records the manifests the tree was built from (BuildIndex, or
	// Open with IndexCache; persist.go); nil otherwise.
	prov *index.Provenance
}

// newArchive is the one constructor of Archive, and nothing changes an
// Archive after it. store is the store every chunk is read, listed and
// restored through (never a wrapper that only watched the manifest
// reads). prov is the tree's recorded provenance (BuildIndex, an index
// file; nil otherwise) and units the verified units an index file
// recorded. set is the chunk read state to share (a version shadow
// shares its archive's); nil makes a new one over t.chunks.
// opts.Name defaults to the upload id, opts.Cache to a private cache.
func newArchive(t index.Tree, store backend.Store, bucket, manifestKey string, opts Options, prov *index.Provenance, units []chunkio.VerifiedUnit, set *chunkio.Set) *Archive {
	if opts.Name == "" {
		opts.Name = t.Upload
	}
	if opts.Cache == nil && set == nil {
		opts.Cache = chunkio.NewFrameCache(chunkio.DefaultCacheBudget)
	}
	var a *Archive
	if set == nil {
		co := opts.chunkOptions()
		co.Classes = chunkio.NewClasses(store, bucket, chunkio.ClassOptions{
			RestoreTTL: opts.RestoreTTL, Logger: opts.Logger, Name: opts.Name, Now: opts.clock})
		// A tar walk keeps the names this archive's extents ask for.
		co.TarMembers = newTarWant(func() []*index.Index { return []*index.Index{&a.tree.Idx} }).members
		set = chunkio.NewSet(store, bucket, t.Chunks, co)
		set.MarkVerified(units)
	}
	t.Idx.IDs = t.Chain
	a = &Archive{
		name:        opts.Name,
		store:       store,
		bucket:      bucket,
		manifestKey: manifestKey,
		tree:        t,
		set:         set,
		log:         opts.Logger,
		opts:        opts,
		prov:        prov,
	}
	return a
}

// Options configure Open.
type Options struct {
	// Name is the archive's display name (the bucket it is served as); errors
	// name it. Defaults to the upload id.
	Name string
	// Cache is the shared decoded-frame cache; nil gives a private one.
	Cache *chunkio.FrameCache
	// Metrics receives the wharf_frames_* and checksum series; nil disables.
	Metrics *chunkio.Metrics
	Logger  zerolog.Logger
	// Limits caps manifest size and counts; zero fields take the defaults.
	// MaxFiles bounds each manifest's file entries and deleted paths and
	// also the whole chain's together (a manifest.Error of ErrTooLarge
	// with FilesLimit set, either way).
	Limits manifest.Limits
	// MaxFrameBytes, Readahead and SmallVerifyBytes tune the read path
	// (chunkio.Options documents them); zero takes the default.
	MaxFrameBytes    int64
	Readahead        int
	SmallVerifyBytes int64
	// TrustUnframed: see chunkio.Options (ranged reads of shapes without
	// frame checksums are served without reading them whole first).
	TrustUnframed bool
	// AllowKeyPrefixes are key prefixes of the manifest's bucket, besides
	// the archive's own (the part of the manifest key before "/uploads/"),
	// under which its chunk and direct-upload keys may lie. Any other key
	// is refused at open.
	AllowKeyPrefixes []string
	// StorageClasses makes Open learn each object's storage class and
	// restore state with one listing of each upload prefix the archive's
	// objects lie under (RefreshStorageClasses), so that listings, HEAD,
	// GET and restores know which objects are archived without a request
	// per file. Without it nothing is listed: objects read as STANDARD
	// until the store refuses one as archived.
	StorageClasses bool
	// RestoreTTL is how long the restore state of an archived object is
	// trusted before it is asked for again with a HEAD; 0 =
	// chunkio.DefaultRestoreTTL (one minute).
	RestoreTTL time.Duration
	// clock is the storage classes' clock (tests); nil = time.Now.
	clock func() time.Time
	// IndexCache, when set, makes Open keep a persistent index of the
	// archive there (persist.go, indexcache.go): if the file recorded for
	// (bucket, manifest key) is intact and every manifest it was built from
	// still has the same ETag and size (HEAD requests only), the tree is
	// loaded from it with no manifest GET; otherwise Open reads the
	// manifests and publishes a fresh file. DirIndexCache is a local
	// directory; StoreIndexCache an s3:// prefix shared by replicas.
	IndexCache IndexCache
	// HistoryMemory, when set, reserves the memory of building a chain's
	// version history (Versions) before the build: an error fails that
	// request (nothing is built or kept; the next one tries again). Once
	// built, the reservation is settled to the history's size
	// (Versions.Bytes) and held until the archive is closed; a failed
	// build releases it. nil charges nothing.
	HistoryMemory func(ctx context.Context) (MemoryCharge, error)
}

// MemoryCharge is memory taken from a budget (Options.HistoryMemory).
type MemoryCharge interface {
	// Settle changes the charge to n bytes (what is really held).
	Settle(n int64)
	// Release gives the charge back; later calls do nothing.
	Release()
}

// chunkOptions are the read-path options for the archive's chunk Set.
func (o Options) chunkOptions() chunkio.Options {
	return chunkio.Options{
		Name:             o.Name,
		Cache:            o.Cache,
		Metrics:          o.Metrics,
		Logger:           o.Logger,
		MaxFrameBytes:    o.MaxFrameBytes,
		Readahead:        o.Readahead,
		SmallVerifyBytes: o.SmallVerifyBytes,
		TrustUnframed:    o.TrustUnframed,
	}
}

// Info summarizes an archive for inspect, logs and the admin page.
type Info struct {
	Name, UploadID, Version, ManifestKey string
	Chain                                []string // upload ids, newest first
	Files, Chunks, Frames                int
	CompressedBytes, UncompressedBytes   int64
	Shapes, Warnings                     []string
	Unverifiable                         int      // files no checksum covers (served as stored)
	UnverifiableSample                   []string // some of their keys
	IndexBytes                           int64    // the index's size in the persistent format
	// StorageStateBytes bounds the heap the storage class and restore
	// state of the archive's objects takes (chunkio.ClassBytesPerObject
	// per chunk, when Options.StorageClasses; else 0), which the index
	// memory budget charges besides the index.
	StorageStateBytes int64
	IndexInPlace      bool // served from its index file mapped in place
	// IndexFault is set when reading the index file mapped in place
	// faulted (the file was truncated under the server: its text wraps
	// index.ErrFileChanged); Unverifiable then counts only the files read
	// before the fault. Reopen the archive.
	IndexFault string
}

// Close stops the archive's background work: in-flight prefetches are
// cancelled (and waited for) and parked decoders are released. Reads that
// are already open keep working; later reads work without prefetch. An
// index served from its file in place stays mapped until the archive is
// unreachable (internal/index/mapping.go), so listings and reads after Close work too.
// Close is idempotent and safe for concurrent use.
func (a *Archive) Close() error {
	closeVersions(a)
	a.set.Close()
	return nil
}
