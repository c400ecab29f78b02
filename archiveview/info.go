package archiveview

import (
	"fmt"
	"slices"
	"sync"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
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
	u := unverifiable(a)
	fault := ""
	if u.err != nil {
		fault = u.err.Error()
	}
	return Info{
		Name:               a.name,
		UploadID:           a.tree.Upload,
		Version:            a.tree.Version,
		ManifestKey:        a.manifestKey,
		Chain:              slices.Clone(a.tree.Chain),
		Files:              a.tree.Idx.N(),
		Chunks:             len(a.tree.Chunks),
		Frames:             a.tree.Idx.Frames,
		CompressedBytes:    a.tree.Idx.Compressed,
		UncompressedBytes:  a.tree.Idx.Uncompressed,
		Shapes:             slices.Clone(a.tree.Shapes),
		Warnings:           slices.Clone(a.tree.Warnings),
		Unverifiable:       u.n,
		UnverifiableSample: slices.Clone(u.sample),
		IndexBytes:         index.FileBytes(&a.tree, indexMeta(a)),
		IndexInPlace:       a.tree.Idx.InPlace(),
		StorageStateBytes:  storageStateBytes(a),
		IndexFault:         fault,
	}
}

// unverifiedFiles is the count of files no checksum covers, computed once.
// err is a fault reading an index mapped in place (index.ErrFileChanged):
// then n and sample cover only the files read before it.
type unverifiedFiles struct {
	once   sync.Once
	n      int
	sample []string
	err    error
}

func unverifiable(a *Archive) *unverifiedFiles {
	u := &a.unverified
	u.once.Do(func() {
		if err := a.tree.Idx.Guard(func() { countUnverifiable(a, u) }); err != nil {
			u.err = fmt.Errorf("archive %s: unverifiable files: %w", a.name, err)
		}
	})
	return u
}

// countUnverifiable counts into u the files no checksum covers.
func countUnverifiable(a *Archive, u *unverifiedFiles) {
	for i := 0; i < a.tree.Idx.N(); i++ {
		if a.tree.Idx.Flags[i]&index.FlagSum != 0 {
			continue // the file's own sha256
		}
		covered := true
		for _, e := range a.fileExtents(int32(i)) {
			ce := chunkio.Extent{Chunk: e.Chunk, Off: e.Off, Length: e.Length, HasSum: e.HasSum}
			if !a.set.Verifiable(ce) {
				covered = false
				break
			}
		}
		if !covered {
			u.n++
			if len(u.sample) < maxUnverifiableSample {
				u.sample = append(u.sample, a.tree.Idx.KeyAt(i))
			}
		}
	}
}

// storageStateBytes is Info.StorageStateBytes: the bound of the storage
// state an archive learning classes keeps (one entry per chunk at most).
func storageStateBytes(a *Archive) int64 {
	if !a.opts.StorageClasses {
		return 0
	}
	return int64(len(a.tree.Chunks)) * chunkio.ClassBytesPerObject
}
