package archiveview

import (
	"slices"
	"sync"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// maxUnverifiableSample bounds Info.UnverifiableSample.
const maxUnverifiableSample = 10

// Info summarizes the archive. Files counts virtual files (a split file is
// one); Chunks counts the backing objects the tree uses (chunks and direct
// objects); CompressedBytes is their stored size per manifest and
// UncompressedBytes the tar-stream bytes they decode to (frames when
// present, else the manifest's uncompressed_size; the object size for direct
// objects). Unverifiable counts the files no checksum covers at all (no
// file, part, chunk or frame sha256: old uploads, direct files without
// one), which are served as stored; UnverifiableSample names a few.
// IndexBytes is the size of the archive's index in the persistent format
// (computed, not written); IndexInPlace says it is served from its file
// mapped in place (then its columns cost page cache, not heap).
func (a *Archive) Info() Info {
	u := a.unverifiable()
	return Info{
		Name:               a.name,
		UploadID:           a.uploadID,
		Version:            a.version,
		ManifestKey:        a.manifestKey,
		Chain:              slices.Clone(a.chain),
		Files:              a.idx.n(),
		Chunks:             len(a.chunks),
		Frames:             a.idx.frames,
		CompressedBytes:    a.idx.compressed,
		UncompressedBytes:  a.idx.uncompressed,
		Shapes:             slices.Clone(a.shapes),
		Warnings:           slices.Clone(a.warnings),
		Unverifiable:       u.n,
		UnverifiableSample: slices.Clone(u.sample),
		IndexBytes:         a.indexFileBytes(),
		IndexInPlace:       a.idx.mm != nil,
	}
}

// unverifiedFiles is the count of files no checksum covers, computed once.
type unverifiedFiles struct {
	once   sync.Once
	n      int
	sample []string
}

func (a *Archive) unverifiable() *unverifiedFiles {
	u := &a.unverified
	u.once.Do(func() {
		for i := 0; i < a.idx.n(); i++ {
			if a.idx.flags[i]&flagSum != 0 {
				continue // the file's own sha256
			}
			covered := true
			for _, e := range a.fileExtents(int32(i)) {
				ce := chunkio.Extent{Chunk: e.chunk, Off: e.off, Length: e.length, HasSum: e.hasSum}
				if !a.set.Verifiable(ce) {
					covered = false
					break
				}
			}
			if !covered {
				u.n++
				if len(u.sample) < maxUnverifiableSample {
					u.sample = append(u.sample, a.idx.keyAt(i))
				}
			}
		}
	})
	return u
}
