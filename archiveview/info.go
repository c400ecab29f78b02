package archiveview

import "slices"

// Info summarizes the archive. Files counts virtual files (a split file is
// one); Chunks counts the backing objects the tree uses (chunks and direct
// objects); CompressedBytes is their stored size per manifest and
// UncompressedBytes the tar-stream bytes they decode to (frames when
// present, else the manifest's uncompressed_size; the object size for direct
// objects).
func (a *Archive) Info() Info {
	return Info{
		Name:              a.name,
		UploadID:          a.uploadID,
		Version:           a.version,
		ManifestKey:       a.manifestKey,
		Chain:             slices.Clone(a.chain),
		Files:             a.idx.n(),
		Chunks:            len(a.chunks),
		Frames:            a.idx.frames,
		CompressedBytes:   a.idx.compressed,
		UncompressedBytes: a.idx.uncompressed,
		Shapes:            slices.Clone(a.shapes),
		Warnings:          slices.Clone(a.warnings),
	}
}
