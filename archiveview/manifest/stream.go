package manifest

import (
	"fmt"
	"io"
	"strings"
	"unsafe"
)

// FileFunc receives file entry i of a streamed manifest, after the checks
// Load applies to each entry as it is decoded. f, and every string and map
// it holds, are valid only until FileFunc returns: the decoder reuses their
// memory for the next entry, so a caller copies what it keeps. An error
// stops the stream and is returned by Stream as it is.
type FileFunc func(i int, f *FileEntry) error

// DeletedFunc receives deleted_paths[i]; p is valid only until the call
// returns.
type DeletedFunc func(i int, p string) error

// HeadFunc is called once, before the first file entry, with the manifest
// as decoded so far: the top-level members the document has before
// "files" (seen reports which; a member not seen yet may still come).
// Writers put every scalar member first, but a reader that needs one of
// them to use the entries (source_path, to derive keys) must check.
type HeadFunc func(m *Manifest, seen func(member string) bool) error

// StreamFuncs are Stream's callbacks. Files is required; with Deleted nil
// the deleted paths are kept in Manifest.DeletedPaths; Head is optional.
// Path, when set, returns file entry i's path for the archive_offset error
// (Stream holds no paths; nil names the entry by index only).
type StreamFuncs struct {
	Head    HeadFunc
	Files   FileFunc
	Deleted DeletedFunc
	Path    func(i int) string
}

// Stream is Load for manifests too large to hold as a Manifest: the file
// entries (and, with funcs.Deleted, the deleted paths) are handed to
// callbacks one at a time instead of being collected, so the memory Stream
// needs does not grow with the number of files beyond 24 bytes per file
// that has an archive_offset (kept for the check below).
//
// Contract, beyond Load's (which holds for everything else: caps, gzip,
// encrypted manifests, the JSON grammar, each file entry checked as it is
// decoded, errors as *Error naming key):
//   - The returned Manifest has Files == nil (and DeletedPaths == nil when
//     funcs.Deleted is set). chunks[].file_paths and
//     deduplication.file_references, which no reader uses and which hold
//     one string per file, are checked (types, caps, repeated members) but
//     not kept: FilePaths and FileReferences are nil.
//   - Validate's rules all apply, in Validate's order, once the document
//     is read: the version, the count caps, the chunks, then per file the
//     archive_offset rule (a file's data must end inside its framed
//     chunk's tar stream, which writers list after the files), then the
//     deleted paths. Its warnings are in Manifest.Warnings, as Load gives
//     them.
//   - A callback may have seen entries of a manifest that is then
//     refused: a caller must discard what it built when Stream fails.
//
// The archive_offset error is Load's when funcs.Path gives the entry's
// path, else it names the entry by index; every other error is Load's.
func Stream(r io.Reader, key string, lim Limits, funcs StreamFuncs) (*Manifest, error) {
	if funcs.Files == nil {
		return nil, newErr(key, ErrInvalid, nil, "Stream without a file callback")
	}
	lim = lim.WithDefaults()
	st := &streamState{
		path:    funcs.Path,
		head:    funcs.Head,
		files:   funcs.Files,
		deleted: funcs.Deleted,
		meta:    map[string]string{},
		keyID:   map[string]uint32{},
		w:       newWarner(),
	}
	m, err := readManifest(r, key, lim, lexBufSize, st)
	if err != nil {
		return nil, err
	}
	return m, st.validate(m, key, lim)
}

// streamState is the decoder's state while streaming.
type streamState struct {
	path    func(int) string
	head    HeadFunc
	files   FileFunc
	deleted DeletedFunc

	f    FileEntry         // the entry being decoded (reused)
	buf  []byte            // the current entry's strings
	meta map[string]string // the current entry's metadata (reused)
	aoff int64             // the current entry's archive_offset

	nFiles, nDeleted int

	// Files with an archive_offset, for Validate's archive_offset rule
	// once the chunks are known: entry index, s3_key (interned) and end.
	pending blocks[pendingOffset]
	keyID   map[string]uint32
	keys    []string

	w      *warner // the files' warnings (fileWarnings)
	delErr error   // the first bad deleted path (reported in Validate's order)
}

type pendingOffset struct {
	entry uint32
	key   uint32
	off   int64 // archive_offset
	n     int64 // data length
}

// keep copies b into the current entry's string memory and returns it as a
// string valid until the next entry.
func (st *streamState) keep(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	start := len(st.buf)
	st.buf = append(st.buf, b...)
	return unsafe.String(&st.buf[start], len(b))
}

// fstr reads a string as lexer.str does; while streaming, into the current
// entry's string memory instead of a fresh allocation.
func (d *decoder) fstr(dst *string) error {
	if d.st == nil {
		return d.l.str(dst)
	}
	if isNull, err := d.l.null(); isNull || err != nil {
		return err
	}
	b, err := d.l.readString()
	if err != nil {
		return err
	}
	*dst = d.st.keep(b)
	return nil
}

// offset reads archive_offset into the state's one slot (null sets nil).
func (st *streamState) offset(l *lexer, dst **int64) error {
	v, isNull, err := l.integer(-1<<63, 1<<63-1)
	if err != nil {
		return err
	}
	if isNull {
		*dst = nil
		return nil
	}
	st.aoff = v
	*dst = &st.aoff
	return nil
}

// streamFiles decodes the files array entry by entry into one reused
// FileEntry, checks each as decode does and hands it to the callback.
func (d *decoder) streamFiles() error {
	st := d.st
	return d.l.array(func() error {
		i := st.nFiles
		if i >= d.lim.MaxFiles {
			return filesCapErr("files", d.lim.MaxFiles)
		}
		if i == 0 && st.head != nil {
			if err := st.head(d.m, d.topSeen); err != nil {
				return &callbackError{err}
			}
		}
		st.nFiles++
		st.f = FileEntry{}
		st.buf = st.buf[:0]
		clear(st.meta)
		f := &st.f
		if err := d.fileEntry(f, i); err != nil {
			return err
		}
		if err := checkFile(f, i, d.key, d.lim); err != nil {
			return err
		}
		fileWarnings(f, st.w)
		if f.ArchiveOffset != nil {
			st.addPending(i, f)
		}
		if err := st.files(i, f); err != nil {
			return &callbackError{err}
		}
		return nil
	})
}

// callbackError carries a callback's error through the decoder, which
// returns it as it is (not as a manifest error).
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// addPending records file i's data end for the archive_offset rule.
func (st *streamState) addPending(i int, f *FileEntry) {
	id, ok := st.keyID[f.S3Key]
	if !ok {
		id = uint32(len(st.keys))
		k := strings.Clone(f.S3Key)
		st.keys = append(st.keys, k)
		st.keyID[k] = id
	}
	*st.pending.next() = pendingOffset{entry: uint32(i), key: id, off: *f.ArchiveOffset, n: fileDataLen(f)}
}

// streamDeleted hands deleted_paths to the callback one at a time.
func (d *decoder) streamDeleted() error {
	st := d.st
	if isNull, err := d.l.null(); isNull || err != nil {
		return err
	}
	return d.l.array(func() error {
		i := st.nDeleted
		if i >= d.lim.MaxFiles {
			return filesCapErr("deleted_paths", d.lim.MaxFiles)
		}
		st.nDeleted++
		st.buf = st.buf[:0]
		var p string
		if err := d.fstr(&p); err != nil {
			return err
		}
		if st.delErr == nil {
			st.delErr = checkDeletedPath(i, p, d.key, d.lim)
		}
		if err := st.deleted(i, p); err != nil {
			return &callbackError{err}
		}
		return nil
	})
}

// validate runs Validate's rules over a streamed manifest, in Validate's
// order (see Stream).
func (st *streamState) validate(m *Manifest, key string, lim Limits) error {
	nDeleted := st.nDeleted
	if st.deleted == nil {
		nDeleted = len(m.DeletedPaths)
	}
	w := newWarner()
	framedTotal, err := validateHead(m, st.nFiles, nDeleted, key, lim, w)
	if err != nil {
		return err
	}
	total := make([]int64, len(st.keys))
	for id, k := range st.keys {
		t, ok := framedTotal[k]
		if !ok {
			t = -1
		}
		total[id] = t
	}
	for p := range st.pending.all() {
		t := total[p.key]
		if t < 0 {
			continue
		}
		if end, ok := addOK(p.off, p.n); !ok || end > t {
			msg := fmt.Sprintf("archive_offset %d + %d bytes runs past chunk %q's uncompressed end %d", p.off, p.n, clip(st.keys[p.key]), t)
			if st.path != nil {
				return newErr(key, ErrInvalid, nil, fmt.Sprintf("files[%d] %q: %s", p.entry, clip(st.path(int(p.entry))), msg))
			}
			return newErr(key, ErrInvalid, nil, fmt.Sprintf("files[%d]: %s", p.entry, msg))
		}
	}
	st.pending = blocks[pendingOffset]{}
	if st.delErr != nil {
		return st.delErr
	}
	if st.deleted == nil {
		for i, p := range m.DeletedPaths {
			if err := checkDeletedPath(i, p, key, lim); err != nil {
				return err
			}
		}
	}
	w.merge(st.w)
	validateTail(m, st.nFiles, w)
	m.Warnings = w.list()
	return nil
}

// topSeen reports whether the top-level member (by its canonical name) has
// been decoded.
func (d *decoder) topSeen(member string) bool {
	i := 0
	for f := range strings.FieldsSeq(manifestFields) {
		if f == member {
			return d.topBits&(1<<i) != 0
		}
		i++
	}
	return false
}
