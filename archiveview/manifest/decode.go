package manifest

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// decoder turns the manifest JSON into a Manifest in one streaming pass
// (see lexer). Member names match exactly or, failing that,
// case-insensitively, as encoding/json matches them; unknown members are
// skipped. Deliberately stricter than encoding/json: a known member repeated
// within one object is an error (encoding/json would merge the two values;
// the Go writer never repeats one, so a repeat is a lie or an attack).
type decoder struct {
	l     *lexer
	key   string
	lim   Limits
	zones map[int]*time.Location
	slab  []int64 // backing store for archive_offset pointers
	// lastKey interns consecutive identical file s3_keys (files are grouped
	// by chunk), saving one string per file.
	lastKey string
	// fileList and pathAt let chunks[].file_paths reuse the files' path
	// strings: the writer lists them in the same order.
	fileList []FileEntry
	pathAt   int
	frames   int

	encMarker bool
	wrapper   encryptedWrapper

	// st is set when streaming (Stream): file entries go to a callback
	// instead of Manifest.Files.
	st *streamState
	// m and topBits are the manifest being decoded and its top-level
	// members seen so far (bits by position in manifestFields).
	m       *Manifest
	topBits uint64
}

// decode reads the manifest JSON from r. Counts are capped as entries
// arrive and each file entry is checked (checkFile) as soon as it is
// decoded, so hostile input fails at its first bad entry or at the cap.
func decode(r io.Reader, key string, lim Limits, bufSize int) (*Manifest, error) {
	return decodeWith(r, key, lim, bufSize, nil)
}

// decodeWith is decode, streaming file entries (and deleted paths) to st
// when st is not nil.
func decodeWith(r io.Reader, key string, lim Limits, bufSize int, st *streamState) (*Manifest, error) {
	d := &decoder{l: newLexer(r, bufSize), key: key, lim: lim, zones: map[int]*time.Location{}, st: st}
	m := &Manifest{}
	d.m = m
	sawFiles := false
	seen := &d.topBits
	err := d.l.object(func(name []byte) error {
		switch string(name) {
		case "encrypted_data", "encrypted_dek":
			d.encMarker = true
			return d.l.skipValue()
		case "algorithm":
			if d.l.ws() == '"' {
				return d.l.str(&d.wrapper.Algorithm)
			}
			return d.l.skipValue()
		case "binding_version":
			var v int64
			if c := d.l.ws(); c == '-' || c >= '0' && c <= '9' {
				if err := d.l.i64(&v); err != nil {
					return err
				}
				bv := int(v)
				d.wrapper.BindingVersion = &bv
				return nil
			}
			return d.l.skipValue()
		}
		bit, err := d.manifestField(m, name)
		if bit == bitFiles {
			sawFiles = true
		}
		return d.dup(seen, bit, name, err)
	})
	if err == nil {
		err = d.l.finish()
	}
	if err != nil {
		if me, ok := err.(*Error); ok {
			return nil, me
		}
		if ce, ok := err.(*callbackError); ok {
			return nil, ce.err
		}
		return nil, readErr(key, err, "decoding JSON")
	}
	if d.encMarker && !sawFiles {
		return nil, encryptedErr(key, d.wrapper)
	}
	return m, nil
}

const (
	bitNone  = -1
	bitFiles = 24
)

// dup records that member bit was seen in this object and fails on a repeat.
func (d *decoder) dup(seen *uint64, bit int, name []byte, err error) error {
	if err != nil || bit == bitNone {
		return err
	}
	if *seen&(1<<bit) != 0 {
		return d.l.errf("member %q repeated", clip(string(name)))
	}
	*seen |= 1 << bit
	return nil
}

// fold finds the field name (in the space-separated fields) that name
// matches case-insensitively, as encoding/json does after an exact miss.
func fold(name []byte, fields string) ([]byte, bool) {
	s := string(name)
	for f := range strings.FieldsSeq(fields) {
		if strings.EqualFold(s, f) {
			return []byte(f), true
		}
	}
	return nil, false
}

const manifestFields = "version upload_id created_at completed_at source_path hostname previous_manifest_id sync_type deleted_paths bucket prefix region total_files total_bytes total_chunks shard_count compression_type compression_level compression_ratio checksum_algorithm format_features writer_id encryption deduplication files chunks shards"

// manifestField decodes one top-level member; it returns the member's bit
// (its index in manifestFields) or bitNone for an unknown member.
func (d *decoder) manifestField(m *Manifest, name []byte) (int, error) {
	l := d.l
	switch string(name) {
	case "version":
		return 0, l.str(&m.Version)
	case "upload_id":
		return 1, l.str(&m.UploadID)
	case "created_at":
		return 2, l.tm(&m.CreatedAt, d.zones)
	case "completed_at":
		return 3, l.tm(&m.CompletedAt, d.zones)
	case "source_path":
		return 4, l.str(&m.SourcePath)
	case "hostname":
		return 5, l.str(&m.Hostname)
	case "previous_manifest_id":
		return 6, l.str(&m.PreviousManifestID)
	case "sync_type":
		return 7, l.str(&m.SyncType)
	case "deleted_paths":
		if d.st != nil && d.st.deleted != nil {
			return 8, d.streamDeleted()
		}
		return 8, d.strings(&m.DeletedPaths, d.lim.MaxFiles, "deleted_paths", true)
	case "bucket":
		return 9, l.str(&m.Bucket)
	case "prefix":
		return 10, l.str(&m.Prefix)
	case "region":
		return 11, l.str(&m.Region)
	case "total_files":
		return 12, l.i64(&m.TotalFiles)
	case "total_bytes":
		return 13, l.i64(&m.TotalBytes)
	case "total_chunks":
		return 14, l.int(&m.TotalChunks)
	case "shard_count":
		return 15, l.int(&m.ShardCount)
	case "compression_type":
		return 16, l.str(&m.CompressionType)
	case "compression_level":
		return 17, l.int(&m.CompressionLevel)
	case "compression_ratio":
		return 18, l.f64(&m.CompressionRatio)
	case "checksum_algorithm":
		return 19, l.str(&m.ChecksumAlgorithm)
	case "format_features":
		return 20, d.strings(&m.FormatFeatures, d.lim.MaxFiles, "format_features", true)
	case "writer_id":
		return 21, l.str(&m.WriterID)
	case "encryption":
		return 22, d.encryption(&m.Encryption)
	case "deduplication":
		return 23, d.deduplication(&m.Deduplication)
	case "files":
		return bitFiles, d.files(m)
	case "chunks":
		return 25, d.chunks(m)
	case "shards":
		return 26, d.shards(m)
	}
	if canon, ok := fold(name, manifestFields); ok {
		return d.manifestField(m, canon)
	}
	return bitNone, l.skipValue()
}

// capErr is the error for an array growing past its cap.
func capErr(what string, max int) error {
	return &capError{what: what, limit: int64(max), count: true}
}

// filesCapErr is capErr for an array capped at Limits.MaxFiles (files,
// file_paths, deleted_paths, metadata entries, ...): the *Error it becomes
// says so in FilesLimit.
func filesCapErr(what string, max int) error {
	return &capError{what: what, limit: int64(max), count: true, files: true}
}

// strings decodes an array of strings (null gives nil).
func (d *decoder) strings(dst *[]string, max int, what string, files bool) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		if isNull {
			*dst = nil
		}
		return err
	}
	out := []string{}
	err := d.l.array(func() error {
		if len(out) >= max && files {
			return filesCapErr(what, max)
		}
		if len(out) >= max {
			return capErr(what, max)
		}
		var s string
		if err := d.l.str(&s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	*dst = out
	return err
}

// elemErr names the array element an error occurred in.
func elemErr(what string, i int, err error) error {
	if _, ok := err.(*syntaxError); ok {
		return fmt.Errorf("%s[%d]: %w", what, i, err)
	}
	return err
}

func (d *decoder) files(m *Manifest) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		if isNull {
			m.Files = nil
		}
		return err
	}
	if d.st != nil {
		return d.streamFiles()
	}
	var bl blocks[FileEntry]
	err := d.l.array(func() error {
		i := bl.len()
		if i >= d.lim.MaxFiles {
			return filesCapErr("files", d.lim.MaxFiles)
		}
		f := bl.next()
		if err := d.fileEntry(f, i); err != nil {
			return err
		}
		d.lastKey = f.S3Key
		return checkFile(f, i, d.key, d.lim)
	})
	if err != nil {
		return err
	}
	m.Files = bl.slice()
	d.fileList, d.pathAt = m.Files, 0
	return nil
}

// filePaths decodes chunks[].file_paths, sharing each path's memory with
// the file entry that (in writer order) carries the same path.
func (d *decoder) filePaths(c *ChunkEntry) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		if isNull {
			c.FilePaths = nil
		}
		return err
	}
	if d.st != nil {
		// Streaming keeps no file list to share paths with, and no reader
		// uses them: checked (strings, capped) but not kept.
		n := 0
		return d.l.array(func() error {
			if n++; n > d.lim.MaxFiles {
				return filesCapErr("file_paths", d.lim.MaxFiles)
			}
			if isNull, err := d.l.null(); isNull || err != nil {
				return err
			}
			_, err := d.l.readString()
			return err
		})
	}
	out := []string{}
	err := d.l.array(func() error {
		if len(out) >= d.lim.MaxFiles {
			return filesCapErr("file_paths", d.lim.MaxFiles)
		}
		like := ""
		if d.pathAt < len(d.fileList) {
			like = d.fileList[d.pathAt].Path
		}
		var s string
		if err := d.l.strLike(&s, like); err != nil {
			return err
		}
		if s == like && like != "" {
			d.pathAt++
		}
		out = append(out, s)
		return nil
	})
	c.FilePaths = out
	return err
}

const fileFields = "path size mod_time chunk_id shard_id s3_key offset length part_index total_parts archive_offset checksum content_hash metadata is_duplicate duplicate_of_hash original_chunk_id original_shard_id original_s3_key deduplication_refs"

// fileEntry decodes element i of "files" into f: null (left zero, for the
// checks to refuse) or an object of known fields, each at most once. Load
// and Stream share it.
func (d *decoder) fileEntry(f *FileEntry, i int) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		return err
	}
	var seen uint64
	err := d.l.object(func(name []byte) error {
		bit, err := d.fileField(f, name)
		return d.dup(&seen, bit, name, err)
	})
	if err != nil {
		return elemErr("files", i, err)
	}
	return nil
}

func (d *decoder) fileField(f *FileEntry, name []byte) (int, error) {
	l := d.l
	switch string(name) {
	case "path":
		return 0, d.fstr(&f.Path)
	case "size":
		return 1, l.i64(&f.Size)
	case "mod_time":
		return 2, l.tm(&f.ModTime, d.zones)
	case "chunk_id":
		return 3, l.int(&f.ChunkID)
	case "shard_id":
		return 4, l.int(&f.ShardID)
	case "s3_key":
		if d.st != nil {
			return 5, d.fstr(&f.S3Key)
		}
		return 5, l.strLike(&f.S3Key, d.lastKey)
	case "offset":
		return 6, l.i64(&f.Offset)
	case "length":
		return 7, l.i64(&f.Length)
	case "part_index":
		return 8, l.int(&f.PartIndex)
	case "total_parts":
		return 9, l.int(&f.TotalParts)
	case "archive_offset":
		if d.st != nil {
			return 10, d.st.offset(l, &f.ArchiveOffset)
		}
		return 10, l.i64ptr(&f.ArchiveOffset, &d.slab)
	case "checksum":
		return 11, d.fstr(&f.Checksum)
	case "content_hash":
		return 12, d.fstr(&f.ContentHash)
	case "metadata":
		return 13, d.strMap(&f.Metadata)
	case "is_duplicate":
		return 14, l.boolean(&f.IsDuplicate)
	case "duplicate_of_hash":
		return 15, d.fstr(&f.DuplicateOfHash)
	case "original_chunk_id":
		return 16, l.int(&f.OriginalChunkID)
	case "original_shard_id":
		return 17, l.int(&f.OriginalShardID)
	case "original_s3_key":
		return 18, d.fstr(&f.OriginalS3Key)
	case "deduplication_refs":
		return 19, l.i32(&f.DeduplicationRefs)
	}
	if canon, ok := fold(name, fileFields); ok {
		return d.fileField(f, canon)
	}
	return bitNone, l.skipValue()
}

// strMap decodes a map[string]string; null gives nil, a null value "".
func (d *decoder) strMap(dst *map[string]string) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		if isNull {
			*dst = nil
		}
		return err
	}
	if *dst == nil {
		if d.st != nil {
			*dst = d.st.meta // cleared for each entry
		} else {
			*dst = map[string]string{}
		}
	}
	n := 0
	return d.l.object(func(name []byte) error {
		if n++; n > d.lim.MaxFiles {
			return filesCapErr("metadata entries", d.lim.MaxFiles)
		}
		var k string
		if d.st != nil {
			k = d.st.keep(name)
		} else {
			k = string(name)
		}
		var v string
		if err := d.fstr(&v); err != nil {
			return err
		}
		(*dst)[k] = v
		return nil
	})
}

func (d *decoder) chunks(m *Manifest) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		if isNull {
			m.Chunks = nil
		}
		return err
	}
	d.frames = 0
	var bl blocks[ChunkEntry]
	err := d.l.array(func() error {
		i := bl.len()
		if i >= d.lim.MaxChunks {
			return capErr("chunks", d.lim.MaxChunks)
		}
		c := bl.next()
		if isNull, err := d.l.null(); isNull || err != nil {
			return err
		}
		var seen uint64
		err := d.l.object(func(name []byte) error {
			bit, err := d.chunkField(c, name)
			return d.dup(&seen, bit, name, err)
		})
		return elemErr("chunks", i, err)
	})
	if err != nil {
		return err
	}
	m.Chunks = bl.slice()
	return nil
}

const chunkFields = "id shard_id s3_key file_count file_paths uncompressed_size compressed_size created_at uploaded_at checksum frames"

func (d *decoder) chunkField(c *ChunkEntry, name []byte) (int, error) {
	l := d.l
	switch string(name) {
	case "id":
		return 0, l.int(&c.ID)
	case "shard_id":
		return 1, l.int(&c.ShardID)
	case "s3_key":
		return 2, l.str(&c.S3Key)
	case "file_count":
		return 3, l.int(&c.FileCount)
	case "file_paths":
		return 4, d.filePaths(c)
	case "uncompressed_size":
		return 5, l.i64(&c.UncompressedSize)
	case "compressed_size":
		return 6, l.i64(&c.CompressedSize)
	case "created_at":
		return 7, l.tm(&c.CreatedAt, d.zones)
	case "uploaded_at":
		return 8, l.tm(&c.UploadedAt, d.zones)
	case "checksum":
		return 9, l.str(&c.Checksum)
	case "frames":
		return 10, d.frameList(c)
	}
	if canon, ok := fold(name, chunkFields); ok {
		return d.chunkField(c, canon)
	}
	return bitNone, l.skipValue()
}

func (d *decoder) frameList(c *ChunkEntry) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		if isNull {
			c.Frames = nil
		}
		return err
	}
	c.Frames = []FrameEntry{}
	return d.l.array(func() error {
		if d.frames >= d.lim.MaxFrames {
			return capErr("frames", d.lim.MaxFrames)
		}
		d.frames++
		c.Frames = append(c.Frames, FrameEntry{})
		f := &c.Frames[len(c.Frames)-1]
		if isNull, err := d.l.null(); isNull || err != nil {
			return err
		}
		var seen uint64
		return d.l.object(func(name []byte) error {
			bit, err := d.frameField(f, name)
			return d.dup(&seen, bit, name, err)
		})
	})
}

const frameFields = "compressed_offset compressed_size uncompressed_offset uncompressed_size checksum"

func (d *decoder) frameField(f *FrameEntry, name []byte) (int, error) {
	l := d.l
	switch string(name) {
	case "compressed_offset":
		return 0, l.i64(&f.CompressedOffset)
	case "compressed_size":
		return 1, l.i64(&f.CompressedSize)
	case "uncompressed_offset":
		return 2, l.i64(&f.UncompressedOffset)
	case "uncompressed_size":
		return 3, l.i64(&f.UncompressedSize)
	case "checksum":
		return 4, l.str(&f.Checksum)
	}
	if canon, ok := fold(name, frameFields); ok {
		return d.frameField(f, canon)
	}
	return bitNone, l.skipValue()
}

func (d *decoder) shards(m *Manifest) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		if isNull {
			m.Shards = nil
		}
		return err
	}
	m.Shards = []ShardEntry{}
	return d.l.array(func() error {
		i := len(m.Shards)
		if i >= d.lim.MaxChunks {
			return capErr("shards", d.lim.MaxChunks)
		}
		m.Shards = append(m.Shards, ShardEntry{})
		s := &m.Shards[i]
		if isNull, err := d.l.null(); isNull || err != nil {
			return err
		}
		var seen uint64
		err := d.l.object(func(name []byte) error {
			bit, err := d.shardField(s, name)
			return d.dup(&seen, bit, name, err)
		})
		return elemErr("shards", i, err)
	})
}

const shardFields = "id prefix chunk_count file_count uncompressed_size compressed_size chunk_keys"

func (d *decoder) shardField(s *ShardEntry, name []byte) (int, error) {
	l := d.l
	switch string(name) {
	case "id":
		return 0, l.int(&s.ID)
	case "prefix":
		return 1, l.str(&s.Prefix)
	case "chunk_count":
		return 2, l.int(&s.ChunkCount)
	case "file_count":
		return 3, l.i64(&s.FileCount)
	case "uncompressed_size":
		return 4, l.i64(&s.UncompressedSize)
	case "compressed_size":
		return 5, l.i64(&s.CompressedSize)
	case "chunk_keys":
		return 6, d.strings(&s.ChunkKeys, d.lim.MaxChunks, "chunk_keys", false)
	}
	if canon, ok := fold(name, shardFields); ok {
		return d.shardField(s, canon)
	}
	return bitNone, l.skipValue()
}

const encryptionFields = "enabled algorithm data_kms_key_id manifest_encrypted"

func (d *decoder) encryption(dst **EncryptionMetadata) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		if isNull {
			*dst = nil
		}
		return err
	}
	e := &EncryptionMetadata{}
	*dst = e
	var seen uint64
	var field func(name []byte) (int, error)
	field = func(name []byte) (int, error) {
		switch string(name) {
		case "enabled":
			return 0, d.l.boolean(&e.Enabled)
		case "algorithm":
			return 1, d.l.str(&e.Algorithm)
		case "data_kms_key_id":
			return 2, d.l.str(&e.DataKMSKeyID)
		case "manifest_encrypted":
			return 3, d.l.boolean(&e.ManifestEncrypted)
		}
		if canon, ok := fold(name, encryptionFields); ok {
			return field(canon)
		}
		return bitNone, d.l.skipValue()
	}
	return d.l.object(func(name []byte) error {
		bit, err := field(name)
		return d.dup(&seen, bit, name, err)
	})
}

const dedupFields = "enabled unique_files duplicate_files bytes_saved bytes_processed deduplication_pct file_references"

func (d *decoder) deduplication(dst **ManifestDeduplication) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		if isNull {
			*dst = nil
		}
		return err
	}
	md := &ManifestDeduplication{}
	*dst = md
	var seen uint64
	var field func(name []byte) (int, error)
	field = func(name []byte) (int, error) {
		switch string(name) {
		case "enabled":
			return 0, d.l.boolean(&md.Enabled)
		case "unique_files":
			return 1, d.l.i64(&md.UniqueFiles)
		case "duplicate_files":
			return 2, d.l.i64(&md.DuplicateFiles)
		case "bytes_saved":
			return 3, d.l.i64(&md.BytesSaved)
		case "bytes_processed":
			return 4, d.l.i64(&md.BytesProcessed)
		case "deduplication_pct":
			return 5, d.l.f64(&md.DeduplicationPct)
		case "file_references":
			return 6, d.fileRefs(&md.FileReferences)
		}
		if canon, ok := fold(name, dedupFields); ok {
			return field(canon)
		}
		return bitNone, d.l.skipValue()
	}
	return d.l.object(func(name []byte) error {
		bit, err := field(name)
		return d.dup(&seen, bit, name, err)
	})
}

const fileRefFields = "hash shard_id chunk_id s3_key size ref_count"

// fileRefs decodes deduplication.file_references (one entry per unique
// file, so capped like files).
func (d *decoder) fileRefs(dst *map[string]FileReference) error {
	if isNull, err := d.l.null(); isNull || err != nil {
		if isNull {
			*dst = nil
		}
		return err
	}
	if *dst == nil && d.st == nil {
		*dst = map[string]FileReference{}
	}
	var field func(r *FileReference, name []byte) (int, error)
	field = func(r *FileReference, name []byte) (int, error) {
		switch string(name) {
		case "hash":
			return 0, d.fstr(&r.Hash)
		case "shard_id":
			return 1, d.l.int(&r.ShardID)
		case "chunk_id":
			return 2, d.l.int(&r.ChunkID)
		case "s3_key":
			return 3, d.fstr(&r.S3Key)
		case "size":
			return 4, d.l.i64(&r.Size)
		case "ref_count":
			return 5, d.l.i32(&r.RefCount)
		}
		if canon, ok := fold(name, fileRefFields); ok {
			return field(r, canon)
		}
		return bitNone, d.l.skipValue()
	}
	n := 0
	return d.l.object(func(name []byte) error {
		if n++; n > d.lim.MaxFiles {
			return filesCapErr("file_references", d.lim.MaxFiles)
		}
		if d.st != nil {
			// Streaming: checked (types, caps, repeats) but not kept; no
			// reader uses the references.
			d.st.buf = d.st.buf[:0]
			var r FileReference
			if isNull, err := d.l.null(); isNull || err != nil {
				return err
			}
			var seen uint64
			return d.l.object(func(name []byte) error {
				bit, err := field(&r, name)
				return d.dup(&seen, bit, name, err)
			})
		}
		k := string(name)
		var r FileReference
		if isNull, err := d.l.null(); err != nil {
			return err
		} else if !isNull {
			var seen uint64
			err := d.l.object(func(name []byte) error {
				bit, err := field(&r, name)
				return d.dup(&seen, bit, name, err)
			})
			if err != nil {
				return err
			}
		}
		(*dst)[k] = r
		return nil
	})
}
