package index

// Serving an archive from its index file in place.
//
// An index file loaded from a path (Open with Options.IndexCache, or
// OpenIndexFile) is mapped read-only and its columns are slices over the
// mapping (format.go): nothing is copied, and the process's resident
// memory follows the pages requests touch, which the kernel can drop and
// read again (file-backed page cache, not anonymous memory).
//
// Lifetime. The mapping belongs to the index that reads it and is unmapped
// when the last Archive using it becomes unreachable (a runtime cleanup),
// never before: Archive.Close leaves it mapped, so requests that looked
// the archive up before a rescan replaced it, and reads issued even after
// Close, keep working as they always have. Nothing handed out of the index
// points into the mapping (keys, prefixes and tar names are copied; index
// methods keep the index alive while they read it), so nothing can outlive
// it. The cache's release function (a spooled copy of a shared cache's
// object, a temporary file) runs after the unmap, never while the file is
// mapped. The cost of this choice: a replaced archive's mapping stays until
// the garbage collector finds the old Archive unreachable (address space
// and, for a spooled or temporary file, its disk space until then).
//
// A mapped file that changes on disk: wharf itself only ever replaces
// index files by rename (a new inode; the mapping keeps the old one) and
// never writes a published file in place. A file truncated or rewritten
// in place by something else is outside that contract: reads of pages past
// a truncated end fault, and bytes written
// in place are served unchecked, as a binary changed under a running
// program would be. Keep other writers away from the index cache
// directory. A truncated file does not kill the process: the readers of
// the mapping (Index.Guard and Index.Must, around Stat, List,
// DeleteMarker, a file's extents and Write) run with
// debug.SetPanicOnFault and turn the fault into an error wrapping
// ErrFileChanged, so the requests that touch the lost pages fail
// (TestTruncatedMappedFile, archiveview's TestTruncatedMappedIndexRead).

import (
	"runtime"
	"sync"
)

// Mapping is an index file mapped for an index to read in place.
type Mapping struct {
	st   *mapState
	path string // the file, for errors
}

// mapState is what the cleanup needs (it must not reference the
// Mapping itself).
type mapState struct {
	mu      sync.Mutex
	data    []byte
	release func()
}

// unmap unmaps the file and runs release, once.
func (s *mapState) unmap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data != nil {
		unmapFile(s.data)
		s.data = nil
	}
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// mapIndex maps path; release (may be nil) runs after the unmap. On error
// release has run.
func mapIndex(path string, release func()) (*Mapping, []byte, error) {
	data, err := mapFile(path)
	if err != nil {
		if release != nil {
			release()
		}
		return nil, nil, err
	}
	st := &mapState{data: data, release: release}
	m := &Mapping{st: st}
	runtime.AddCleanup(m, func(s *mapState) { s.unmap() }, st)
	return m, data, nil
}

// Map maps path and checks its header and tree hash (Decode); release
// (may be nil) runs once the file is unmapped. The Tree of the returned
// decoder is served from the mapping. On error the file is unmapped and
// release has run.
func Map(path string, release func()) (*Decoder, *Mapping, error) {
	m, data, err := mapIndex(path, release)
	if err != nil {
		return nil, nil, err
	}
	m.path = path
	d, err := Decode(data, path)
	if err != nil {
		m.st.unmap()
		return nil, nil, err
	}
	d.mm = m
	return d, m, nil
}

// Unmap unmaps the file at once (and runs its release): only for a
// mapping no tree uses (a decode that failed or was refused).
func (m *Mapping) Unmap() { m.st.unmap() }
