package catalog

// Dataset history: a published dataset's versions as S3 object versions.
//
// The history of a dataset bucket is a list of published versions, newest
// first: the version served, then CURRENT's previous_version_id, then the
// versions found by one listing of DATASET/v/, each strictly older (by
// version id; cargoship writes time-ordered ids) than the link before and
// not already in the history. It ends at the limit (Config.DatasetHistory),
// at a version whose manifest is gone (pruned: normal, not an error), at a
// version that does not open (logged), or when no older version is listed.
// A pinned bucket's history is its one version.
//
// Per key, a version is a run of consecutive published versions in which
// the key has the same bytes (sha256 when both sides have one, else size and
// ETag; an ETag without a checksum is derived from the chunk keys, offsets
// and lengths, so it stands for the location), its version id the
// smallest (the earliest published) version id of the run: where those
// bytes first appeared (the oldest of the run, unless a promote put an
// older version first); a delete marker is a run in which the key is
// absent after it existed, its version id the published version in which
// the key disappeared.
//
// The history is built lazily (the first ListObjectVersions or versionId=
// request, never a plain GET or HEAD), in the background, opening the
// older versions through the manager's open path (index budget, open
// timeout, index cache) two at a time (HistoryParams.Ahead: the next opens
// while one is merged; reservations taken in the walk's order) and closing
// each once merged. The merge reads each version's file identities
// (Archive.EachIdentity), no File per key. An older version's bytes are
// read by opening that version again (a few kept open, retired like other
// archives); its storage class is the one the listing of DATASET/v/
// reported for its objects.
//
// The listing and the chain it gives are historylisting.go, the merge
// historywalk.go, the opens ahead of it historyopens.go; the manager's
// side (building on request, the budget, eviction) historymgr.go.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog/dataset"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
)

// DefaultDatasetHistory is Config.DatasetHistory's default: the published
// versions a dataset bucket's history holds at most.
const DefaultDatasetHistory = 100

// MaxDatasetHistory is the largest history limit accepted.
const MaxDatasetHistory = 10000

// historyOpenMax is how many older versions a history keeps open for
// versionId= reads; the next one retires the least recently used.
const historyOpenMax = 2

// HistoryVersion is one published version of a dataset history.
type HistoryVersion struct {
	ID          string
	ManifestKey string
	ManifestSz  int64     // the manifest's size, as listed (the open's reservation)
	Created     time.Time // the version's manifest created_at (delete markers' LastModified)
}

// HistoryParams is what BuildHistory walks.
type HistoryParams struct {
	Store backend.Store
	Ref   DatasetRef
	// Current is the version served and Archive its open archive.
	Current HistoryVersion
	Archive *archiveview.Archive
	// Previous is the served pointer's previous_version_id ("" for the
	// first version, and for a pinned version: a history of one).
	Previous string
	Limit    int // versions at most (<= 0: DefaultDatasetHistory)
	// Open opens an older version (its manifest under the dataset's
	// versions folder); Close releases it, inUse meaning requests may still
	// read it (close after a grace).
	Open  func(ctx context.Context, v HistoryVersion) (*archiveview.Archive, error)
	Close func(a *archiveview.Archive, inUse bool)
	Log   zerolog.Logger
	// Ahead is how many older versions the build holds at a time, open
	// or opening, the one being merged counted (<= 1: one at a time, each
	// opened once the one before is closed). With more, the next versions
	// open while one is merged, each open starting once the one before
	// holds its memory (OpenHeld's held; without OpenHeld, once it
	// returned), so the opens take their memory in the walk's order and
	// the one merged next never waits for memory a later one holds.
	Ahead int
	// OpenHeld, if set, is Open that calls held once the open holds its
	// memory (the index reservation) or failed to get it; the history's
	// build opens with it (Open stays for versionId= reads).
	OpenHeld func(ctx context.Context, v HistoryVersion, held func()) (*archiveview.Archive, error)
	// ListTimeout, if set, bounds the one listing of DATASET/v/ (the
	// manager's open timeout): past it the build fails, wrapping
	// backend.ErrUnavailable.
	ListTimeout time.Duration
}

// historyOpenAhead is HistoryParams.Ahead for a served dataset's history:
// two versions at a time (one merged while the next opens, or two
// opening), each within the index memory budget.
const historyOpenAhead = 2

// keyVer is one version of a key in a dataset history.
type keyVer struct {
	id   uint16   // the run's oldest published version in the history (as-of lookups)
	name uint16   // the version id shown: of the run's versions the smallest id (where the bytes first appeared), or (del) id
	from uint16   // the newest published version of the run: the archive read (0 = the served one)
	del  bool     // a delete marker
	meta *verMeta // from > 0: the file as that version lists it
}

// verMeta describes a key's version read from an older published version.
type verMeta struct {
	size  int64
	mod   time.Time
	etag  string
	sha   string
	ctype string
	class string
}

// matches reports whether f has the bytes m describes: sameBytes' rule,
// on the File's fields.
func (m *verMeta) matches(f archiveview.File) bool {
	if f.Size != m.size {
		return false
	}
	if f.SHA256 != "" && m.sha != "" {
		return f.SHA256 == m.sha
	}
	return f.ETag == m.etag
}

// DatasetHistory is a dataset bucket's version history. It is immutable
// once built (its cache of open older versions aside) and safe for
// concurrent use.
type DatasetHistory struct {
	versions []HistoryVersion // newest first; [0] is served by cur
	byID     map[string]int
	cur      *archiveview.Archive
	ended    string // why the history ends where it ends

	// nil keys: a history of one version (every key one version, the
	// served archive's).
	keys   []string
	vstart []uint32
	vers   []keyVer

	openFn  func(ctx context.Context, v HistoryVersion) (*archiveview.Archive, error)
	closeFn func(a *archiveview.Archive, inUse bool)

	mu     sync.Mutex
	opens  map[int]*chunkio.Memo[*archiveview.Archive]
	lru    []int // open older versions, least recently used first
	closed bool
}

// Versions returns the history's published versions, newest first.
func (h *DatasetHistory) Versions() []HistoryVersion { return slices.Clone(h.versions) }

// Ended says why the history ends at its oldest version.
func (h *DatasetHistory) Ended() string { return h.ended }

// Archive is the archive of the version served (the history's newest).
func (h *DatasetHistory) Archive() *archiveview.Archive { return h.cur }

// Bytes estimates the memory the history holds: its key table, versions
// and the descriptions of older versions' files (not the served archive,
// nor the older versions open for reads).
func (h *DatasetHistory) Bytes() int64 {
	n := int64(len(h.versions)) * 64
	for _, k := range h.keys {
		n += int64(len(k)) + 16
	}
	n += int64(len(h.vstart))*4 + int64(len(h.vers))*16
	for _, e := range h.vers {
		if e.meta != nil {
			n += 96 + int64(len(e.meta.etag)+len(e.meta.sha)+len(e.meta.ctype))
		}
	}
	return n
}

// KeyVersions is the number of versions and delete markers of every key.
func (h *DatasetHistory) KeyVersions() int {
	if h.keys == nil {
		return h.cur.Files()
	}
	return len(h.vers)
}

// BuildHistory walks a dataset's published versions (see the file
// comment) and builds the per-key history. A version whose manifest is
// gone ends the history; an error that may not repeat (the store's
// timeout or throttle, ctx, an open past its deadline or short of index
// memory: mayNotRepeat) fails the build, wrapping backend.ErrUnavailable;
// a version that does not open for any other reason ends the history
// there, logged.
func BuildHistory(ctx context.Context, p HistoryParams) (*DatasetHistory, error) {
	if p.Limit <= 0 {
		p.Limit = DefaultDatasetHistory
	}
	h := &DatasetHistory{versions: []HistoryVersion{p.Current}, cur: p.Archive,
		openFn: p.Open, closeFn: p.Close, opens: map[int]*chunkio.Memo[*archiveview.Archive]{}}
	if h.versions[0].Created.IsZero() {
		h.versions[0].Created = p.Archive.Created()
	}
	h.byID = map[string]int{p.Current.ID: 0}
	if h.ended = historyOfOne(p.Previous, p.Limit); h.ended != "" {
		return h, nil
	}
	lctx, cancel := ctx, context.CancelFunc(func() {})
	if p.ListTimeout > 0 {
		lctx, cancel = context.WithTimeout(ctx, p.ListTimeout)
	}
	listing, err := listVersions(lctx, p.Store, p.Ref)
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(lctx.Err(), context.DeadlineExceeded) && !backend.IsRetryable(err) {
			err = fmt.Errorf("%w: not listed within %s (--open-timeout) (%w)", err, p.ListTimeout, backend.ErrUnavailable)
		}
		return nil, err
	}
	chain, ended := chainFrom(p.Current.ID, p.Previous, listing, p.Limit)

	w := &historyWalk{classOf: listing.classOf}
	if err := w.step(0, p.Current.ID, p.Archive, false); err != nil {
		return nil, err
	}
	n := 1
	opens := startOpens(ctx, p, chain)
	defer func() { opens.stop() }()
	for k, v := range chain {
		a, err := opens.next(k)
		if err != nil && errors.Is(err, ErrIndexMemory) && ctx.Err() == nil && opens.ahead() {
			// The memory may have been held by the versions opened ahead:
			// from here on one at a time, as if never opened ahead.
			opens.stop()
			opens = startOpens(ctx, HistoryParams{Open: p.Open, Close: p.Close}, chain[k:])
			a, err = opens.next(k)
		}
		if err != nil {
			if ctx.Err() != nil || backend.IsRetryable(err) {
				return nil, fmt.Errorf("dataset %s: history: version %s: %w", p.Ref.URL(), v.ID, err)
			}
			if mayNotRepeat(err) {
				return nil, fmt.Errorf("dataset %s: history: version %s: %w (%w)", p.Ref.URL(), v.ID, err, backend.ErrUnavailable)
			}
			if errors.Is(err, backend.ErrNotFound) {
				ended = prunedEnd(v.ID)
			} else {
				ended = fmt.Sprintf("version %s did not open: %v", v.ID, err)
				p.Log.Warn().Err(err).Str("dataset", p.Ref.URL()).Str("version_id", v.ID).
					Msg("dataset history ends at a version that does not open")
			}
			break
		}
		v.Created = a.Created()
		err = w.step(n, v.ID, a, true)
		opens.done(k, a)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: history: version %s: %w", p.Ref.URL(), v.ID, err)
		}
		h.byID[v.ID] = n
		h.versions = append(h.versions, v)
		n++
	}
	h.ended = ended
	h.keys, h.vstart, h.vers = w.finish(n)
	return h, nil
}

// mayNotRepeat reports an open failure that says nothing about the
// version: its open timed out, the index memory was in use until the
// deadline, a deadline passed. Such a version fails the build (the next
// request builds again) instead of ending the history for as long as the
// version is served.
func mayNotRepeat(err error) bool {
	return errors.Is(err, ErrOpenTimeout) || errors.Is(err, ErrIndexMemory) || errors.Is(err, context.DeadlineExceeded)
}

// version describes version j (0 = newest) of key k for a listing; an
// older version's File is a description (Class set), not readable.
func (h *DatasetHistory) version(k, j int) (archiveview.Version, bool) {
	e := h.vers[int(h.vstart[k])+j]
	key := h.keys[k]
	v := archiveview.Version{VersionID: h.versions[e.name].ID, IsLatest: j == 0}
	switch {
	case e.del:
		v.DeleteMarker = true
		v.Key = key
		v.ModTime = h.versions[e.id].Created.UTC()
	case e.from == 0:
		f, ok := h.cur.Stat(key)
		if !ok {
			return archiveview.Version{}, false
		}
		v.File = f
	default:
		m := e.meta
		v.File = archiveview.File{Key: key, Size: m.size, ModTime: m.mod, ETag: m.etag, SHA256: m.sha, ContentType: m.ctype}
		v.Class = m.class
	}
	v.File.VersionID = v.VersionID
	return v, true
}

// keyIndex returns key's position in the history, or -1.
func (h *DatasetHistory) keyIndex(key string) int {
	k := sort.SearchStrings(h.keys, key)
	if k < len(h.keys) && h.keys[k] == key {
		return k
	}
	return -1
}

// checkVersionID is the one rule for the form of a version id asked of a
// dataset's history (dataset.ValidVersionID): an id that fails it wraps
// archiveview.ErrBadVersionID.
func checkVersionID(id string) error {
	if err := dataset.ValidVersionID(id); err != nil {
		return fmt.Errorf("version id %w: %w", archiveview.ErrBadVersionID, err)
	}
	return nil
}

// VersionIDForm is s3api.Config.VersionIDForm: a version id asked of a
// published dataset's bucket must have a dataset version id's form
// (checkVersionID), checked without building the bucket's history, so a
// malformed id costs no listing and no open; any other bucket's ids (an
// upload chain's) are looked up as they are.
func (cm *Manager) VersionIDForm(bucket, id string) error {
	if !(*cm.dsNames.Load())[bucket] {
		return nil
	}
	if err := checkVersionID(id); err != nil {
		return fmt.Errorf("dataset bucket %s: %w", bucket, err)
	}
	return nil
}

// Lookup implements archiveview.History: versionID is any published
// version of the history (the key as of that version: the key's version
// whose run covers it, or its delete marker) or "" for the latest. A key
// that did not exist as of that version, or an id not in the history, is
// not found. An id that is no published version id by its form
// (dataset.ValidVersionID) is an error wrapping
// archiveview.ErrBadVersionID. An older version's File comes from that
// version's archive, opened again (Version.Archive); a version pruned
// since the history was built is not found.
func (h *DatasetHistory) Lookup(ctx context.Context, key, versionID string) (archiveview.Version, bool, error) {
	vi := 0
	if versionID != "" {
		if err := checkVersionID(versionID); err != nil {
			return archiveview.Version{}, false, fmt.Errorf("dataset history: key %q: %w", key, err)
		}
		var ok bool
		if vi, ok = h.byID[versionID]; !ok {
			return archiveview.Version{}, false, nil
		}
	}
	if h.keys == nil {
		f, ok := h.cur.Stat(key)
		if !ok {
			return archiveview.Version{}, false, nil
		}
		f.VersionID = h.versions[0].ID
		return archiveview.Version{File: f, VersionID: f.VersionID, IsLatest: true}, true, nil
	}
	k := h.keyIndex(key)
	if k < 0 {
		return archiveview.Version{}, false, nil
	}
	vs := h.vers[h.vstart[k]:h.vstart[k+1]]
	j := slices.IndexFunc(vs, func(e keyVer) bool { return int(e.id) >= vi })
	if j < 0 {
		return archiveview.Version{}, false, nil
	}
	e := vs[j]
	v, ok := h.version(k, j)
	if !ok {
		return archiveview.Version{}, false, fmt.Errorf("dataset history: key %q: not in the served version's tree: %w", key, archiveview.ErrInvalidTree)
	}
	if e.del || e.from == 0 {
		return v, true, nil
	}
	read := int(e.from) // the run's newest version: vi holds the same bytes
	a, err := h.open(ctx, read)
	if pruned(err) && vi != read {
		// That version is gone (pruned since the build): the one asked
		// for may still be there.
		read = vi
		a, err = h.open(ctx, read)
	}
	if err != nil {
		if pruned(err) {
			// Pruned since the history was built: no such version now
			// (404 NoSuchVersion, as once the history is built again),
			// not a server failure.
			return archiveview.Version{}, false, nil
		}
		if mayNotRepeat(err) && !backend.IsRetryable(err) { // a retry may read it: 503, not 500
			err = fmt.Errorf("%w (%w)", err, backend.ErrUnavailable)
		}
		return archiveview.Version{}, false, err
	}
	f, ok := a.Stat(key)
	if !ok || !e.meta.matches(f) {
		return archiveview.Version{}, false, fmt.Errorf("dataset history: version %s: key %q changed since the history was built: %w",
			h.versions[read].ID, key, archiveview.ErrInvalidTree)
	}
	f.VersionID = v.VersionID
	v.File, v.Archive, v.Class = f, a, ""
	return v, true, nil
}

// pruned reports an older version's open that failed because its
// manifest is gone (not a transient failure).
func pruned(err error) bool {
	return err != nil && errors.Is(err, backend.ErrNotFound) && !backend.IsRetryable(err)
}

// open returns older version i's archive, opening it once (concurrent
// callers share the open) and keeping at most historyOpenMax open.
func (h *DatasetHistory) open(ctx context.Context, i int) (*archiveview.Archive, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, fmt.Errorf("dataset history: version %s: the history was replaced: %w", h.versions[i].ID, backend.ErrUnavailable)
	}
	m := h.opens[i]
	if m == nil {
		m = &chunkio.Memo[*archiveview.Archive]{}
		h.opens[i] = m
	}
	h.mu.Unlock()
	a, err := m.Do(ctx, func(ctx context.Context) (*archiveview.Archive, error) {
		return h.openFn(ctx, h.versions[i])
	}, nil)
	if err != nil {
		h.mu.Lock()
		if h.opens[i] == m {
			delete(h.opens, i)
		}
		h.mu.Unlock()
		return nil, err
	}
	var evict []*archiveview.Archive
	h.mu.Lock()
	if h.closed {
		// Closed while this read took a: retire it if Close left its open
		// running in opens, once (another read sharing the open may have);
		// Close retired it if it was done, an eviction before.
		retire := h.opens[i] == m
		if retire {
			delete(h.opens, i)
		}
		h.mu.Unlock()
		if retire {
			h.closeFn(a, true)
		}
		return a, nil
	}
	if h.opens[i] != m {
		// Retired as the least recently used while this read took it
		// (closed after the grace: the read goes on). Not put back: the
		// LRU holds only versions whose open is tracked and done, so an
		// eviction never drops an open still running without closing it.
		h.mu.Unlock()
		return a, nil
	}
	h.lru = slices.DeleteFunc(h.lru, func(x int) bool { return x == i })
	h.lru = append(h.lru, i)
	for len(h.lru) > historyOpenMax {
		old := h.lru[0]
		h.lru = h.lru[1:]
		if om := h.opens[old]; om != nil {
			if oa, ok := om.Peek(); ok {
				evict = append(evict, oa)
			}
			delete(h.opens, old)
		}
	}
	h.mu.Unlock()
	for _, oa := range evict {
		h.closeFn(oa, true)
	}
	return a, nil
}

// Close retires the older versions the history holds open (after the
// grace: reads may be in flight). The history answers no more
// versionId= reads of older versions.
func (h *DatasetHistory) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	// The opens still running stay in opens: the read that ends one
	// retires it (open).
	var all []*archiveview.Archive
	for i, m := range h.opens {
		if a, ok := m.Peek(); ok {
			all = append(all, a)
			delete(h.opens, i)
		}
	}
	h.lru = nil
	h.mu.Unlock()
	for _, a := range all {
		h.closeFn(a, true)
	}
}

// ListVersions implements archiveview.History: keys in byte order, each
// key's versions newest first, paged as Versions.ListVersions.
func (h *DatasetHistory) ListVersions(p archiveview.VersionListParams) (archiveview.VersionListResult, error) {
	if h.keys == nil {
		return h.listSingle(p)
	}
	return archiveview.PageVersions(historyTable{h}, p, "dataset history")
}

// historyTable is a history's key table as an archiveview.VersionTable.
type historyTable struct{ h *DatasetHistory }

func (t historyTable) Len() int            { return len(t.h.keys) }
func (t historyTable) Key(i int) string    { return t.h.keys[i] }
func (t historyTable) Search(s string) int { return sort.SearchStrings(t.h.keys, s) }
func (t historyTable) SkipPrefix(i int, p string) int {
	keys := t.h.keys
	return i + sort.Search(len(keys)-i, func(x int) bool { return !strings.HasPrefix(keys[i+x], p) })
}
func (t historyTable) Count(i int) int { return int(t.h.vstart[i+1] - t.h.vstart[i]) }
func (t historyTable) Find(i int, versionID string) int {
	h := t.h
	return slices.IndexFunc(h.vers[h.vstart[i]:h.vstart[i+1]], func(e keyVer) bool { return h.versions[e.name].ID == versionID })
}
func (t historyTable) Version(i, j int) (archiveview.Version, error) {
	v, ok := t.h.version(i, j)
	if !ok {
		return v, fmt.Errorf("not in the served version's tree: %w", archiveview.ErrInvalidTree)
	}
	return v, nil
}
func (t historyTable) KeepPrefix(cp string) string { return cp }

// listSingle lists a history of one version: the served archive's keys,
// one version each.
func (h *DatasetHistory) listSingle(p archiveview.VersionListParams) (archiveview.VersionListResult, error) {
	var res archiveview.VersionListResult
	if p.MaxKeys <= 0 {
		return res, nil
	}
	after := ""
	if p.KeyMarker != "" && p.KeyMarker >= p.Prefix {
		if p.VersionIDMarker != "" {
			if _, ok := h.cur.Stat(p.KeyMarker); !ok || p.VersionIDMarker != h.versions[0].ID {
				return res, fmt.Errorf("dataset history: version %q of key %q: %w", p.VersionIDMarker, p.KeyMarker, archiveview.ErrUnknownVersion)
			}
		}
		after = p.KeyMarker
	}
	lr := h.cur.List(archiveview.ListParams{Prefix: p.Prefix, Delimiter: p.Delimiter, After: after, MaxKeys: p.MaxKeys, MaxNameBytes: p.MaxNameBytes})
	for _, e := range lr.Entries {
		if e.Prefix != "" {
			res.Entries = append(res.Entries, archiveview.VersionEntry{Prefix: e.Prefix})
			continue
		}
		f := e.File
		f.VersionID = h.versions[0].ID
		res.Entries = append(res.Entries, archiveview.VersionEntry{Version: archiveview.Version{File: f, VersionID: f.VersionID, IsLatest: true}})
	}
	if lr.Truncated && len(res.Entries) > 0 {
		res.Truncated = true
		last := res.Entries[len(res.Entries)-1]
		if last.Prefix != "" {
			res.NextKeyMarker = last.Prefix
		} else {
			res.NextKeyMarker, res.NextVersionIDMarker = last.Version.Key, last.Version.VersionID
		}
	}
	return res, nil
}
