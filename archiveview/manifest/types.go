// Package manifest holds the CargoShip manifest schema and its parser.
//
// The structs mirror CargoShip's pkg/manifest/types.go field for field, with
// the JSON tags the writer uses, so both our reader and our test writer
// (package cargopack) speak exactly the on-storage format. Unknown fields are
// ignored on decode; null arrays decode as nil slices.
//
// Load (and Parse) read one manifest object: gzip sniffed by magic bytes,
// size and count caps (Limits) enforced while streaming, encrypted
// manifests rejected, then Validate checks the structure a reader relies on
// (frame tiling, split-part ranges, archive offsets, safe paths). Errors
// name the manifest key and wrap ErrTooLarge, ErrEncrypted, ErrVersion or
// ErrInvalid. Stream reads a manifest too large to hold: the same checks,
// with the file entries handed to a callback one at a time instead of
// collected. The key helpers turn manifest strings into keys:
// ResolveObjectKey (s3_key to object key), RelativeKey and
// AppendRelativeKey (path to virtual key), ManifestKeyCandidates and
// UploadDir (where an upload's manifest lives); ParseChecksum and ParseMD5
// decode the hex digests.
package manifest

import "time"

// Manifest is one CargoShip upload's index.
type Manifest struct {
	Version     string    `json:"version"`
	UploadID    string    `json:"upload_id"`
	CreatedAt   time.Time `json:"created_at"`
	CompletedAt time.Time `json:"completed_at"`

	SourcePath string `json:"source_path"`
	Hostname   string `json:"hostname"`

	PreviousManifestID string   `json:"previous_manifest_id,omitempty"`
	SyncType           string   `json:"sync_type,omitempty"`
	DeletedPaths       []string `json:"deleted_paths,omitempty"`

	Bucket string `json:"bucket"`
	Prefix string `json:"prefix"`
	Region string `json:"region"`

	TotalFiles  int64 `json:"total_files"`
	TotalBytes  int64 `json:"total_bytes"`
	TotalChunks int   `json:"total_chunks"`
	ShardCount  int   `json:"shard_count"`

	CompressionType   string  `json:"compression_type"`
	CompressionLevel  int     `json:"compression_level"`
	CompressionRatio  float64 `json:"compression_ratio"`
	ChecksumAlgorithm string  `json:"checksum_algorithm,omitempty"`

	FormatFeatures []string `json:"format_features,omitempty"`
	WriterID       string   `json:"writer_id,omitempty"`

	Encryption    *EncryptionMetadata    `json:"encryption,omitempty"`
	Deduplication *ManifestDeduplication `json:"deduplication,omitempty"`

	Files  []FileEntry  `json:"files"`
	Chunks []ChunkEntry `json:"chunks"`
	Shards []ShardEntry `json:"shards"`

	// Warnings are Validate's non-fatal findings (set by Load and Validate);
	// never serialized.
	Warnings []string `json:"-"`
}

// FileEntry is one file, or one part of a split file.
type FileEntry struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`

	ChunkID int    `json:"chunk_id"`
	ShardID int    `json:"shard_id"`
	S3Key   string `json:"s3_key"`

	Offset     int64 `json:"offset,omitempty"`
	Length     int64 `json:"length,omitempty"`
	PartIndex  int   `json:"part_index,omitempty"`
	TotalParts int   `json:"total_parts,omitempty"`

	// ArchiveOffset is the file's first data byte in the chunk's uncompressed
	// tar stream. nil (absent or null) means unknown: a tar walk is needed.
	ArchiveOffset *int64 `json:"archive_offset,omitempty"`

	Checksum    string            `json:"checksum,omitempty"`     // SHA-256 hex (maybe "sha256:" prefixed)
	ContentHash string            `json:"content_hash,omitempty"` // MD5 hex (DVC)
	Metadata    map[string]string `json:"metadata,omitempty"`

	IsDuplicate       bool   `json:"is_duplicate,omitempty"`
	DuplicateOfHash   string `json:"duplicate_of_hash,omitempty"`
	OriginalChunkID   int    `json:"original_chunk_id,omitempty"`
	OriginalShardID   int    `json:"original_shard_id,omitempty"`
	OriginalS3Key     string `json:"original_s3_key,omitempty"`
	DeduplicationRefs int32  `json:"deduplication_refs,omitempty"`
}

// ChunkEntry is one chunk object (.tar.zst or .tar).
type ChunkEntry struct {
	ID      int    `json:"id"`
	ShardID int    `json:"shard_id"`
	S3Key   string `json:"s3_key"`

	FileCount        int      `json:"file_count"`
	FilePaths        []string `json:"file_paths"`
	UncompressedSize int64    `json:"uncompressed_size"`
	CompressedSize   int64    `json:"compressed_size"`

	CreatedAt  time.Time `json:"created_at"`
	UploadedAt time.Time `json:"uploaded_at"`

	Checksum string       `json:"checksum,omitempty"` // SHA-256 of the whole object (unframed chunks)
	Frames   []FrameEntry `json:"frames,omitempty"`
}

// FrameEntry maps one independent zstd frame to the tar bytes it decodes to.
type FrameEntry struct {
	CompressedOffset   int64  `json:"compressed_offset"`
	CompressedSize     int64  `json:"compressed_size"`
	UncompressedOffset int64  `json:"uncompressed_offset"`
	UncompressedSize   int64  `json:"uncompressed_size"`
	Checksum           string `json:"checksum,omitempty"` // SHA-256 hex of the compressed frame bytes
}

// ShardEntry is one shard (S3 prefix) with rollups.
type ShardEntry struct {
	ID               int      `json:"id"`
	Prefix           string   `json:"prefix"`
	ChunkCount       int      `json:"chunk_count"`
	FileCount        int64    `json:"file_count"`
	UncompressedSize int64    `json:"uncompressed_size"`
	CompressedSize   int64    `json:"compressed_size"`
	ChunkKeys        []string `json:"chunk_keys"`
}

// EncryptionMetadata describes data (SSE) and manifest encryption. wharf only
// inspects it; SSE-KMS chunks read as plaintext with the right IAM grants.
type EncryptionMetadata struct {
	Enabled           bool   `json:"enabled,omitempty"`
	Algorithm         string `json:"algorithm,omitempty"`
	DataKMSKeyID      string `json:"data_kms_key_id,omitempty"`
	ManifestEncrypted bool   `json:"manifest_encrypted,omitempty"`
}

// ManifestDeduplication is the upload-level dedup summary. Informational only.
type ManifestDeduplication struct {
	Enabled          bool                     `json:"enabled"`
	UniqueFiles      int64                    `json:"unique_files"`
	DuplicateFiles   int64                    `json:"duplicate_files"`
	BytesSaved       int64                    `json:"bytes_saved"`
	BytesProcessed   int64                    `json:"bytes_processed"`
	DeduplicationPct float64                  `json:"deduplication_pct"`
	FileReferences   map[string]FileReference `json:"file_references"`
}

// FileReference is one entry of ManifestDeduplication.FileReferences.
type FileReference struct {
	Hash     string `json:"hash"`
	ShardID  int    `json:"shard_id"`
	ChunkID  int    `json:"chunk_id"`
	S3Key    string `json:"s3_key"`
	Size     int64  `json:"size"`
	RefCount int32  `json:"ref_count"`
}
