package catalog

// The merge of a dataset history: the published versions' trees, newest
// first, merged into runs of the same bytes per key (history.go).

import (
	"fmt"
	"strings"

	"github.com/wharf-s3/wharf/archiveview"
)

// historyWalk merges the published versions' trees, newest first, into
// runs per key. Each step is one pass over the version's identities
// (Archive.EachIdentity: no File built, no allocation for a key whose
// bytes did not change) merged with the open runs, written into the
// spare slice of the last step (two slices of keyState in all).
type historyWalk struct {
	classOf func(a *archiveview.Archive, f archiveview.File) string // an older version's file's class

	states []keyState // by key
	spare  []keyState // the last step's states, reused
	ids    []string   // the versions stepped, newest first
}

// keyState is a key's open run while walking.
type keyState struct {
	key    string
	id     archiveview.FileIdentity
	meta   *verMeta
	out    []keyVer // closed runs, newest first
	absent bool     // the run is one of versions without the key
	from   uint16
	first  uint16 // of the run's versions the one with the smallest id
}

// run is s's open run closed at version id (its oldest).
func (s *keyState) run(id uint16) keyVer {
	return keyVer{id: id, name: s.first, from: s.from, meta: s.meta}
}

// deleteMarker closes a run of versions without the key at version id,
// the oldest of them: where the key disappeared.
func deleteMarker(id uint16) keyVer { return keyVer{id: id, name: id, del: true} }

// sameBytes: by sha256 when both have one, else by size and ETag (which,
// with no checksum, is derived from the chunk keys, offsets and lengths).
func sameBytes(a, b archiveview.FileIdentity) bool {
	if a.Size != b.Size {
		return false
	}
	if a.HasSHA256 && b.HasSHA256 {
		return a.SHA256 == b.SHA256
	}
	return a.SameETag(b)
}

// step merges version i's files (all of a's keys, in order). older: the
// archive is an older version, closed after the step (copy what is kept).
func (w *historyWalk) step(i int, id string, a *archiveview.Archive, older bool) error {
	w.ids = append(w.ids, id)
	var (
		next = w.spare[:0]
		j    int
		prev = uint16(max(i-1, 0))
		cur  = uint16(i)
	)
	if c := max(len(w.states), a.Files()); cap(next) < c {
		next = make([]keyState, 0, c+c/16)
	}
	start := func(s *keyState, key string, fid archiveview.FileIdentity) error {
		s.absent, s.from, s.first, s.id, s.meta = false, cur, cur, fid, nil
		if older {
			// A run that starts in an older version: its description,
			// read once (a few keys a version).
			f, ok := a.Stat(key)
			if !ok {
				return fmt.Errorf("key %q: listed but not found", key)
			}
			s.meta = &verMeta{size: f.Size, mod: f.ModTime, etag: f.ETag, sha: f.SHA256,
				ctype: strings.Clone(f.ContentType), class: w.classOf(a, f)}
		}
		return nil
	}
	closeRun := func(s *keyState) {
		if s.absent {
			s.out = append(s.out, deleteMarker(prev))
		} else {
			s.out = append(s.out, s.run(prev))
		}
	}
	onlyOld := func(s *keyState) {
		next = append(next, *s)
		if t := &next[len(next)-1]; !t.absent { // the key is not in version i: it appeared in i-1
			closeRun(t)
			t.absent, t.meta = true, nil
		}
	}
	err := a.EachIdentity(func(key string, fid archiveview.FileIdentity) error {
		for j < len(w.states) && w.states[j].key < key {
			onlyOld(&w.states[j])
			j++
		}
		if j < len(w.states) && w.states[j].key == key {
			next = append(next, w.states[j])
			j++
			s := &next[len(next)-1]
			switch {
			case s.absent, !sameBytes(s.id, fid): // deleted in i-1 and present in i, or other bytes
				closeRun(s)
				return start(s, key, fid)
			case id < w.ids[s.first]: // the same bytes: the run goes on
				s.first = cur
			}
			return nil
		}
		next = append(next, keyState{key: strings.Clone(key)})
		s := &next[len(next)-1]
		if i > 0 { // absent from every newer version: deleted in i-1
			s.out = append(s.out, deleteMarker(prev))
		}
		return start(s, s.key, fid)
	})
	if err != nil {
		return err
	}
	for ; j < len(w.states); j++ {
		onlyOld(&w.states[j])
	}
	if len(next) > 1<<31 {
		return fmt.Errorf("more than %d keys", 1<<31)
	}
	w.spare, w.states = w.states, next
	return nil
}

// finish closes every run after n versions and flattens the result.
func (w *historyWalk) finish(n int) (keys []string, vstart []uint32, vers []keyVer) {
	last := uint16(n - 1)
	keys = make([]string, 0, len(w.states))
	vstart = make([]uint32, 0, len(w.states)+1)
	for _, s := range w.states {
		if !s.absent {
			s.out = append(s.out, s.run(last))
		}
		keys = append(keys, s.key)
		vstart = append(vstart, uint32(len(vers)))
		vers = append(vers, s.out...)
	}
	vstart = append(vstart, uint32(len(vers)))
	w.states, w.spare = nil, nil
	return keys, vstart, vers
}
