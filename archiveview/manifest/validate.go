package manifest

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// knownFeature reports the format_features values CargoShip writes
// (advisory; unknown ones only warn).
func knownFeature(f string) bool {
	switch f {
	case "frames", "writers", "versioning":
		return true
	}
	return false
}

// Validate checks m against the structural rules a reader relies on, and
// caps its counts. It is called by Load; call it yourself on a Manifest
// built another way. It returns the non-fatal findings and also stores them
// in m.Warnings.
//
// Validate normalizes m in one way: chunks sharing an s3_key (CargoShip
// staging snapshots, cargoship#493) are collapsed to the one with the
// largest compressed_size, at the first one's position, with a warning.
//
// Errors (each an *Error naming key and the entry, wrapping a sentinel):
//   - ErrVersion: version missing, not numeric, or major not 1 or 2;
//   - ErrTooLarge: more files, chunks or frames (summed) than lim allows;
//   - ErrInvalid, chunks: empty s3_key; negative compressed_size or
//     uncompressed_size; a frame checksum that is not 64 hex digits (after
//     an optional "sha256:"); a frame table that breaks CheckFrames (the
//     one frame-table rule: positive sizes, uncompressed spans contiguous
//     from 0 in order, compressed spans not overlapping, none past a known
//     compressed_size);
//   - ErrInvalid, files: empty path, NUL in path, path longer than
//     MaxPathBytes; negative size, length or offset; negative part_index or
//     total_parts; for split parts (total_parts > 1) part_index outside
//     [0,total_parts) or offset+length > size; archive_offset present but
//     <= 0, or (for a file in a framed chunk) its data running past the
//     chunk's uncompressed total as the frames give it;
//   - ErrInvalid, deleted_paths: NUL or overlong entries.
//
// Warnings (the writer varies, or the value is only informational): unknown
// version minor; unknown format_features; unknown checksum_algorithm;
// total_files/total_chunks disagreeing with the arrays; compressed_size 0 on
// a framed chunk (unknown: the read path checks the true object size); a chunk or file checksum or content_hash
// that does not parse (fixtures and old tools wrote placeholders; the read
// path must treat it as absent-and-unverifiable, never as verified);
// duplicate chunk keys; paths holding U+FFFD (invalid UTF-8 the writer's
// JSON encoder replaced, so the tar name differs). Absent frames and frames
// of length 1, an empty chunk checksum on framed chunks, and an absent
// checksum_algorithm are all fine.
func Validate(m *Manifest, key string, lim Limits) (warnings []string, err error) {
	if m == nil {
		return nil, newErr(key, ErrInvalid, nil, "nil manifest")
	}
	lim = lim.WithDefaults()
	w := newWarner()
	framedTotal, err := validateHead(m, len(m.Files), len(m.DeletedPaths), key, lim, w)
	if err != nil {
		return nil, err
	}
	for i := range m.Files {
		f := &m.Files[i]
		if err := checkFile(f, i, key, lim); err != nil {
			return nil, err
		}
		fileWarnings(f, w)
		if f.ArchiveOffset == nil {
			continue
		}
		total, ok := framedTotal[f.S3Key]
		if !ok {
			continue
		}
		if end, ok := addOK(*f.ArchiveOffset, fileDataLen(f)); !ok || end > total {
			return nil, fileErr(key, i, f, fmt.Sprintf("archive_offset %d + %d bytes runs past chunk %q's uncompressed end %d",
				*f.ArchiveOffset, fileDataLen(f), clip(f.S3Key), total))
		}
	}
	for i, p := range m.DeletedPaths {
		if err := checkDeletedPath(i, p, key, lim); err != nil {
			return nil, err
		}
	}
	validateTail(m, len(m.Files), w)
	m.Warnings = w.list()
	return m.Warnings, nil
}

// fileDataLen is the number of bytes a file entry stores: its size, or its
// length for a split part.
func fileDataLen(f *FileEntry) int64 {
	if f.TotalParts > 1 {
		return f.Length
	}
	return f.Size
}

// validateHead is the part of Validate that runs before the files: the
// version, the count caps (nFiles file entries, nDeleted deleted paths),
// and the chunks (collapsed by s3_key, each checked). It returns the
// uncompressed tar-stream length of each framed chunk, by s3_key.
func validateHead(m *Manifest, nFiles, nDeleted int, key string, lim Limits, w *warner) (map[string]int64, error) {
	if err := checkVersion(m.Version, key, w); err != nil {
		return nil, err
	}
	if nFiles > lim.MaxFiles {
		return nil, newErr(key, ErrTooLarge, nil, fmt.Sprintf("%d files, limit %d", nFiles, lim.MaxFiles))
	}
	if len(m.Chunks) > lim.MaxChunks {
		return nil, newErr(key, ErrTooLarge, nil, fmt.Sprintf("%d chunks, limit %d", len(m.Chunks), lim.MaxChunks))
	}
	if len(m.Shards) > lim.MaxChunks {
		return nil, newErr(key, ErrTooLarge, nil, fmt.Sprintf("%d shards, limit %d", len(m.Shards), lim.MaxChunks))
	}
	if nDeleted > lim.MaxFiles {
		return nil, newErr(key, ErrTooLarge, nil, fmt.Sprintf("%d deleted_paths, limit %d", nDeleted, lim.MaxFiles))
	}
	frames := 0
	for i := range m.Chunks {
		frames += len(m.Chunks[i].Frames)
		if frames > lim.MaxFrames {
			return nil, newErr(key, ErrTooLarge, nil, fmt.Sprintf("more than %d frames", lim.MaxFrames))
		}
	}

	m.Chunks = dedupeChunks(m.Chunks, w)

	framedTotal := make(map[string]int64)
	for i := range m.Chunks {
		total, err := checkChunk(&m.Chunks[i], i, key, w)
		if err != nil {
			return nil, err
		}
		if len(m.Chunks[i].Frames) > 0 {
			framedTotal[m.Chunks[i].S3Key] = total
		}
	}
	return framedTotal, nil
}

// checkDeletedPath checks deleted_paths[i].
func checkDeletedPath(i int, p, key string, lim Limits) error {
	if err := checkPath(p, lim); err != nil {
		return newErr(key, ErrInvalid, nil, fmt.Sprintf("deleted_paths[%d] %q: %s", i, clip(p), err))
	}
	return nil
}

// validateTail is the part of Validate after the files and deleted paths:
// warnings only.
func validateTail(m *Manifest, nFiles int, w *warner) {
	if m.TotalFiles != int64(nFiles) {
		w.add("total-files", fmt.Sprintf("total_files %d disagrees with %d file entries", m.TotalFiles, nFiles))
	}
	if m.TotalChunks != len(m.Chunks) {
		w.add("total-chunks", fmt.Sprintf("total_chunks %d disagrees with %d chunk entries", m.TotalChunks, len(m.Chunks)))
	}
	for _, f := range m.FormatFeatures {
		if !knownFeature(f) {
			w.add("feature", fmt.Sprintf("unknown format_feature %q ignored", clip(f)))
		}
	}
	if a := m.ChecksumAlgorithm; a != "" && !strings.EqualFold(a, "sha256") {
		w.add("algorithm", fmt.Sprintf("unknown checksum_algorithm %q", clip(a)))
	}
}

// checkVersion accepts "MAJOR(.MINOR)*" with major 1 or 2; it warns on
// minors other than the known 1.0, 2.0 and 2.1.
func checkVersion(v, key string, w *warner) error {
	parts := strings.Split(v, ".")
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" || len(p) > 9 {
			return newErr(key, ErrVersion, nil, fmt.Sprintf("version %q not understood (want 1.x or 2.x)", clip(v)))
		}
	}
	major, _ := strconv.Atoi(parts[0])
	if major != 1 && major != 2 {
		return newErr(key, ErrVersion, nil, fmt.Sprintf("version %q: major version %d not supported (want 1.x or 2.x)", clip(v), major))
	}
	switch v {
	case "1.0", "2.0", "2.1":
	default:
		w.add("version", fmt.Sprintf("version %q: unknown minor version, read as %d.x", v, major))
	}
	return nil
}

// dedupeChunks collapses chunks sharing an s3_key to the one with the
// largest compressed_size (CargoShip staging snapshots, cargoship#493).
func dedupeChunks(chunks []ChunkEntry, w *warner) []ChunkEntry {
	pos := make(map[string]int, len(chunks))
	out := chunks[:0]
	for _, c := range chunks {
		j, seen := pos[c.S3Key]
		if !seen {
			pos[c.S3Key] = len(out)
			out = append(out, c)
			continue
		}
		w.add("dup-chunk", fmt.Sprintf("chunk s3_key %q listed more than once; kept the entry with the largest compressed_size", clip(c.S3Key)))
		if c.CompressedSize > out[j].CompressedSize {
			out[j] = c
		}
	}
	clear(chunks[len(out):]) // drop references held by the tail
	return out
}

// checkChunk validates chunk i and returns its uncompressed total per frames
// (0 when unframed).
func checkChunk(c *ChunkEntry, i int, key string, w *warner) (int64, error) {
	cerr := func(msg string) error {
		return newErr(key, ErrInvalid, nil, fmt.Sprintf("chunks[%d] %q: %s", i, clip(c.S3Key), msg))
	}
	if c.S3Key == "" {
		return 0, cerr("empty s3_key")
	}
	if c.CompressedSize < 0 || c.UncompressedSize < 0 {
		return 0, cerr(fmt.Sprintf("negative size (compressed_size %d, uncompressed_size %d)", c.CompressedSize, c.UncompressedSize))
	}
	if _, _, err := ParseChecksum(c.Checksum); err != nil {
		if len(c.Frames) > 0 {
			w.add("chunk-sum", fmt.Sprintf("chunk %q: checksum %q ignored (frames cover the object)", clip(c.S3Key), clip(c.Checksum)))
		} else {
			w.add("chunk-sum", fmt.Sprintf("chunk %q: checksum not usable, the object cannot be verified: %v", clip(c.S3Key), err))
		}
	}
	if len(c.Frames) == 0 {
		return 0, nil
	}
	for j := range c.Frames {
		if _, _, err := ParseChecksum(c.Frames[j].Checksum); err != nil {
			return 0, cerr(fmt.Sprintf("frame %d: %v", j, err))
		}
	}
	t, err := CheckFrames(len(c.Frames), func(j int) FrameSpan {
		f := &c.Frames[j]
		return FrameSpan{COff: f.CompressedOffset, CSize: f.CompressedSize, UOff: f.UncompressedOffset, USize: f.UncompressedSize}
	}, c.CompressedSize)
	if err != nil {
		return 0, cerr(err.Error())
	}
	if c.CompressedSize == 0 {
		w.add("csize", fmt.Sprintf("chunk %q: compressed_size 0 with frames ending at %d; the object size is checked at read time", clip(c.S3Key), t.End))
	}
	return t.Total, nil
}

// checkFile runs the checks on one file entry that need nothing else from
// the manifest. Load runs it as each entry is decoded, so hostile input
// fails at its first bad entry.
func checkFile(f *FileEntry, i int, key string, lim Limits) error {
	if err := checkPath(f.Path, lim); err != nil {
		return fileErr(key, i, f, err.Error())
	}
	if f.Path == "" {
		return fileErr(key, i, f, "empty path")
	}
	if f.Size < 0 || f.Length < 0 || f.Offset < 0 {
		return fileErr(key, i, f, fmt.Sprintf("negative size, length or offset (size %d, length %d, offset %d)", f.Size, f.Length, f.Offset))
	}
	if f.PartIndex < 0 || f.TotalParts < 0 {
		return fileErr(key, i, f, fmt.Sprintf("negative part_index %d or total_parts %d", f.PartIndex, f.TotalParts))
	}
	if f.TotalParts > 1 {
		if f.PartIndex >= f.TotalParts {
			return fileErr(key, i, f, fmt.Sprintf("split part_index %d out of range [0,%d)", f.PartIndex, f.TotalParts))
		}
		if end, ok := addOK(f.Offset, f.Length); !ok || end > f.Size {
			return fileErr(key, i, f, fmt.Sprintf("split part offset %d + length %d exceeds file size %d", f.Offset, f.Length, f.Size))
		}
	}
	if f.ArchiveOffset != nil && *f.ArchiveOffset <= 0 {
		return fileErr(key, i, f, fmt.Sprintf("archive_offset %d (must be > 0: a tar header precedes any data)", *f.ArchiveOffset))
	}
	return nil
}

// fileWarnings notes unusable checksums on one file entry, and paths that
// encoding/json mangled on the writer's side.
func fileWarnings(f *FileEntry, w *warner) {
	if strings.ContainsRune(f.Path, utf8.RuneError) {
		w.add("fffd", fmt.Sprintf("file %q: path holds U+FFFD, likely invalid UTF-8 replaced by the writer's JSON encoder; its tar name differs (match it by archive_offset)", clip(f.Path)))
	}
	if _, _, err := ParseChecksum(f.Checksum); err != nil {
		w.add("file-sum", fmt.Sprintf("file %q: checksum not usable, it cannot be verified: %v", clip(f.Path), err))
	}
	if _, _, err := ParseMD5(f.ContentHash); err != nil {
		w.add("file-md5", fmt.Sprintf("file %q: content_hash not usable: %v", clip(f.Path), err))
	}
}

func checkPath(p string, lim Limits) error {
	if len(p) > lim.MaxPathBytes {
		return fmt.Errorf("path of %d bytes exceeds limit %d", len(p), lim.MaxPathBytes)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("NUL byte in path")
	}
	return nil
}

func fileErr(key string, i int, f *FileEntry, msg string) error {
	return newErr(key, ErrInvalid, nil, fmt.Sprintf("files[%d] %q: %s", i, clip(f.Path), msg))
}

// addOK adds two non-negative int64s, reporting overflow.
func addOK(a, b int64) (int64, bool) {
	if b > math.MaxInt64-a {
		return 0, false
	}
	return a + b, true
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// warner collects warnings, one line per kind: the first occurrence's text
// plus a count of the rest, so a million bad entries give one line.
type warner struct {
	order []string
	first map[string]string
	count map[string]int
}

func newWarner() *warner {
	return &warner{first: map[string]string{}, count: map[string]int{}}
}

func (w *warner) add(kind, msg string) {
	if _, ok := w.first[kind]; !ok {
		w.order = append(w.order, kind)
		w.first[kind] = msg
	}
	w.count[kind]++
}

// merge appends o's kinds (and counts) after w's, as if o's warnings had
// been added to w in their order.
func (w *warner) merge(o *warner) {
	for _, k := range o.order {
		if _, ok := w.first[k]; !ok {
			w.order = append(w.order, k)
			w.first[k] = o.first[k]
		}
		w.count[k] += o.count[k]
	}
}

func (w *warner) list() []string {
	var out []string
	for _, k := range w.order {
		s := w.first[k]
		if n := w.count[k] - 1; n > 0 {
			s += fmt.Sprintf(" (and %d more like it)", n)
		}
		out = append(out, s)
	}
	return out
}
