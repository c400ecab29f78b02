package index

// Provenance: which manifests an index was built from, recorded while
// they are read (Recorder) and checked against the store before a cached
// file is used (Matches).

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"sync"

	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// ErrBadIndex is wrapped by every error about an index file that cannot be
// used: wrong magic, unknown version, checksum mismatch, truncation,
// impossible counts or a tree that violates the index invariants.
var ErrBadIndex = errors.New("invalid index file")

// ErrStale: a cached index's manifests changed (or its options differ).
var ErrStale = errors.New("index is stale")

// Source is one manifest (or an absent candidate key) an index was
// built from: the cache is valid while every source still stats the same.
type Source struct {
	Key     string
	ETag    string
	Size    int64
	ModSec  int64 // LastModified, unix seconds (0 = unknown)
	SHA256  [32]byte
	Absent  bool // the key was tried and did not exist
	NotHash bool // (building only) the body was not read to its end
}

// indexProvenance records where an archive's tree came from.
type Provenance struct {
	Sources  []Source
	MaxFrame int64 // the giant-frame threshold the tree was built with
	Limits   manifest.Limits
}

func limitsList(l manifest.Limits) [7]int64 {
	l = l.WithDefaults()
	return [7]int64{l.MaxStoredBytes, l.MaxJSONBytes, int64(l.MaxFiles), int64(l.MaxChunks),
		int64(l.MaxFrames), int64(l.MaxPathBytes), int64(l.MaxChainDepth)}
}

// limitsWithin reports whether a tree built under caps built is the tree
// an open under caps now builds: each cap of now is at least built's. The
// caps only refuse (a manifest over one fails the open; none changes what
// is built), so what fit the tighter caps fits the looser ones the same
// way, and the catalog's file cap (from --max-files-per-upload) can change
// across restarts without every index being rebuilt. A tighter cap is
// stale: the manifests are read again, to refuse what is now too large.
func limitsWithin(built, now manifest.Limits) bool {
	b, n := limitsList(built), limitsList(now)
	for i := range b {
		if n[i] < b[i] {
			return false
		}
	}
	return true
}

// Recorder passes every request through and records each Get (the
// manifests Open reads): ETag, size and the sha256 of the whole body.
type Recorder struct {
	backend.Store
	max int64 // bytes hashed at most per object

	mu      sync.Mutex
	sources []Source
}

func (s *Recorder) Get(ctx context.Context, bucket, key string) (io.ReadCloser, backend.ObjectInfo, error) {
	rc, info, err := s.Store.Get(ctx, bucket, key)
	if errors.Is(err, backend.ErrNotFound) {
		s.add(Source{Key: key, Absent: true})
	}
	if err != nil {
		return rc, info, err
	}
	return &hashingReader{rc: rc, s: s, info: info, h: sha256.New()}, info, nil
}

func (s *Recorder) add(src Source) {
	s.mu.Lock()
	s.sources = append(s.sources, src)
	s.mu.Unlock()
}

// hashingReader hashes what the parser reads; Close reads the rest (at
// most maxDrain bytes) so the sum covers the whole object.
type hashingReader struct {
	rc     io.ReadCloser
	s      *Recorder
	info   backend.ObjectInfo
	h      hash.Hash
	n      int64
	eof    bool
	failed bool
	closed bool
}

func (r *hashingReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	switch {
	case err == io.EOF:
		r.eof = true
	case err != nil:
		r.failed = true
	}
	return n, err
}

func (r *hashingReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if !r.eof && !r.failed {
		// A parse that succeeded read the object to its end but for
		// what its buffers left; one that failed early leaves the rest,
		// which is not read (the index is never written, and a refused
		// manifest must not cost its whole size).
		left := min(r.s.max-r.n, maxDrain)
		n, err := io.Copy(r.h, io.LimitReader(r.rc, left+1))
		r.n += n
		r.eof = err == nil && n <= left
		r.failed = !r.eof
	}
	src := Source{Key: r.info.Key, ETag: r.info.ETag, Size: r.n, NotHash: r.failed || !r.eof}
	if !r.info.LastModified.IsZero() {
		src.ModSec = r.info.LastModified.Unix()
	}
	if r.info.Size > 0 && r.info.Size != r.n {
		src.NotHash = true
	}
	copy(src.SHA256[:], r.h.Sum(nil))
	r.s.add(src)
	return r.rc.Close()
}

// maxDrain is the most of a manifest's body Close reads past what the
// parser read: more left is not hashed (the source is NotHash).
const maxDrain = 64 << 10

// NewRecorder returns a Recorder of store that hashes at most max bytes
// of each object (the manifest size limit).
func NewRecorder(store backend.Store, max int64) *Recorder {
	return &Recorder{Store: store, max: max}
}

// Sources are the objects recorded so far, in the order read.
func (s *Recorder) Sources() []Source {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sources)
}

// Matches checks the recorded build against the request and the store:
// one stat per recorded source, but none for the manifest itself when top
// (its stat, made by the caller) is not nil.
func (p *Provenance) Matches(ctx context.Context, store backend.Store, pBucket, pKey, bucket, manifestKey string, top *backend.ObjectInfo, maxFrame int64, limits manifest.Limits) error {
	switch {
	case pBucket != bucket || pKey != manifestKey:
		return fmt.Errorf("%w: built for %s/%s", ErrStale, pBucket, pKey)
	case len(p.Sources) == 0:
		return fmt.Errorf("%w: no manifest sources recorded", ErrStale)
	case p.MaxFrame != maxFrame || !limitsWithin(p.Limits, limits):
		return fmt.Errorf("%w: built with other limits", ErrStale)
	}
	for _, s := range p.Sources {
		var info backend.ObjectInfo
		var err error
		if top != nil && s.Key == manifestKey {
			info = *top
		} else {
			info, err = store.Stat(ctx, bucket, s.Key)
		}
		if s.Absent {
			if errors.Is(err, backend.ErrNotFound) {
				continue
			}
			if err == nil {
				return fmt.Errorf("%w: manifest %s now exists", ErrStale, s.Key)
			}
			return fmt.Errorf("stat manifest %s: %w", s.Key, err)
		}
		if err != nil {
			return fmt.Errorf("stat manifest %s: %w", s.Key, err)
		}
		mod := int64(0)
		if !info.LastModified.IsZero() {
			mod = info.LastModified.Unix()
		}
		if info.ETag != s.ETag || info.Size != s.Size || (s.ModSec != 0 && mod != 0 && mod != s.ModSec) {
			return fmt.Errorf("%w: manifest %s changed (ETag %q size %d, indexed %q size %d)",
				ErrStale, s.Key, info.ETag, info.Size, s.ETag, s.Size)
		}
	}
	return nil
}

// SameVersion reports whether sources a and b record the same version of
// manifest key (present in both, with the same ETag and size).
func SameVersion(a, b []Source, key string) bool {
	find := func(s []Source) (Source, bool) {
		for _, v := range s {
			if v.Key == key && !v.Absent {
				return v, true
			}
		}
		return Source{}, false
	}
	va, oka := find(a)
	vb, okb := find(b)
	return oka && okb && va.ETag == vb.ETag && va.Size == vb.Size
}

// SameSources reports whether a and b record the same manifests, in the
// same order: keys, absence, ETags, sizes and content hashes.
func SameSources(a, b []Source) bool {
	return slices.EqualFunc(a, b, func(x, y Source) bool {
		return x.Key == y.Key && x.Absent == y.Absent && x.ETag == y.ETag && x.Size == y.Size && x.SHA256 == y.SHA256
	})
}
