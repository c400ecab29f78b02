package archiveview

// Versions: an incremental chain's uploads as S3 object versions.
//
// A key's versions are the chain's mentions of it, newest first, one per
// upload that mentions it: a file entry in upload U is version U (its own
// size, mtime, ETag and bytes), a deleted_paths tombstone in upload U is a
// delete marker with version id U. The first (newest) mention is the latest
// version; it is exactly what the archive's tree shows (or hides, for a
// delete marker).
//
// An archive of one upload has no version data at all: every key has one
// version, the upload id, served from the tree. For a chain the history is
// built on first use by reading the chain's manifests again (one GET each,
// as Open does) and resolving them with the resolver's own code (same
// chunk keys, split parts, duplicates): a table of every (key, upload)
// mention (8 bytes plus the key's bytes and 8 bytes of offsets per key), and
// per older upload an index (internal/index) of only the file versions that are
// not the latest — the history proper. Latest versions point into the
// archive's tree. Older versions are read through per-upload shadow
// archives that share one chunk table and one read state, so
// (*Archive).Open serves them through the same read path.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/backend"
)

// ErrUnknownVersion is returned by ListVersions for a version-id marker
// that is not a version of the key marker.
var ErrUnknownVersion = errors.New("unknown version id")

// ErrBadVersionID is wrapped by a History's Lookup of a version id that
// cannot be one of its versions by its form (S3's 400 InvalidArgument
// "Invalid version id specified", where an id of the right form that is
// no version is 404 NoSuchVersion).
var ErrBadVersionID = errors.New("malformed version id")

// Version is one version of a key: a file or a delete marker. A delete
// marker has only Key and ModTime (its upload's created_at) set in File.
type Version struct {
	File
	VersionID    string // the upload id that wrote this version
	IsLatest     bool
	DeleteMarker bool

	// Archive, when not nil, is the archive File belongs to and is read
	// from (a published dataset's older version, package catalog); nil:
	// the archive whose history this is.
	Archive *Archive
	// Class, when not empty, is the version's storage class as recorded
	// when the history was built, for a version whose archive is not open:
	// File is then a description only (Key, Size, ModTime, ETag, SHA256,
	// ContentType), never to be read or passed to an Archive.
	Class string
}

// History is a bucket's object versions as S3 shows them: an archive's
// chain (*Versions) or a published dataset's versions (package catalog).
// Implementations are immutable and safe for concurrent use.
type History interface {
	// Lookup returns version versionID of key ("" = the latest, which may
	// be a delete marker); ok is false when key has no such version. It
	// may open an older version's archive (bounded by ctx).
	Lookup(ctx context.Context, key, versionID string) (v Version, ok bool, err error)
	// ListVersions returns one page of versions, as Versions.ListVersions.
	ListVersions(p VersionListParams) (VersionListResult, error)
}

// Lookup implements History with StatVersion.
func (v *Versions) Lookup(_ context.Context, key, versionID string) (Version, bool, error) {
	ver, ok := v.StatVersion(key, versionID)
	return ver, ok, nil
}

// VersionListParams selects one page of ListVersions.
type VersionListParams struct {
	Prefix    string
	Delimiter string
	// KeyMarker alone: start after every version of KeyMarker (a common
	// prefix <= KeyMarker is skipped). With VersionIDMarker: start with the
	// version of KeyMarker after (older than) VersionIDMarker.
	KeyMarker       string
	VersionIDMarker string
	MaxKeys         int // versions + delete markers + common prefixes; <= 0: empty page
	// MaxNameBytes > 0 ends the page early once its keys and prefixes
	// total that many bytes (ListParams.MaxNameBytes).
	MaxNameBytes int
}

// VersionEntry is a version or (Prefix != "") a common prefix.
type VersionEntry struct {
	Prefix  string
	Version Version
}

// VersionListResult is one page. When Truncated, NextKeyMarker and
// NextVersionIDMarker ("" after a common prefix) continue the listing.
type VersionListResult struct {
	Entries             []VersionEntry
	Truncated           bool
	NextKeyMarker       string
	NextVersionIDMarker string
}

// versionsState is the Archive's lazily built history: one build shared
// by concurrent callers (chunkio.Memo), kept once built; a lasting failure
// (a rewritten or missing manifest, a broken chain) is kept too, so
// versioned requests do not re-read the whole chain to fail the same way.
type versionsState struct {
	memo   chunkio.Memo[*Versions]
	mu     sync.Mutex
	closed bool
	charge MemoryCharge // the history's (Options.HistoryMemory)
}

// verEnt is one version of a key: the upload (chain link) and the file, an
// index into the archive's tree (latest version) or into the link's
// history index (older versions); -1 for a delete marker.
type verEnt struct {
	link int32
	file int32
}

// Versions is an archive's version history. It is immutable and safe for
// concurrent use.
type Versions struct {
	a *Archive

	// Chains only (nil for one upload):
	keys    *index.Index // every key any upload mentions (names and ends only)
	vstart  []uint32     // versions of key k: vers[vstart[k]:vstart[k+1]]
	vers    []verEnt     // newest first per key
	ids     []string     // upload id per link
	times   []time.Time  // created_at per link (delete markers' LastModified)
	shadows []*Archive   // per link: older versions' index (nil when none)
	set     *chunkio.Set // the shadows' chunk table and read state
	linkOf  map[string]int32
}

// Versions returns the archive's version history. For a single upload it
// costs nothing; for a chain it is built on first use (reading the chain's
// manifests again) and kept. Concurrent callers share one build; a caller
// whose ctx ends while waiting returns ctx's error.
func (a *Archive) Versions(ctx context.Context) (*Versions, error) {
	if len(a.tree.Chain) <= 1 {
		return &Versions{a: a}, nil
	}
	v, err := a.vers.memo.Do(ctx, func(ctx context.Context) (v *Versions, err error) {
		var charge MemoryCharge
		if a.opts.HistoryMemory != nil {
			if charge, err = a.opts.HistoryMemory(ctx); err != nil {
				return nil, fmt.Errorf("archive %q: version history: %w", a.name, err)
			}
		}
		// The build walks the archive's tree (a mapped index: guarded).
		if gerr := a.tree.Idx.Guard(func() { v, err = buildVersions(ctx, a) }); gerr != nil {
			err = gerr
		}
		if err != nil {
			if charge != nil {
				charge.Release()
			}
			return nil, fmt.Errorf("archive %q: version history: %w", a.name, err)
		}
		if charge != nil {
			charge.Settle(v.Bytes())
			a.vers.mu.Lock()
			closed := a.vers.closed
			if !closed {
				a.vers.charge = charge
			}
			a.vers.mu.Unlock()
			if closed {
				charge.Release() // built after the archive was closed
			}
		}
		return v, nil
	}, func(err error) bool { return !backend.IsRetryable(err) })
	if err != nil {
		return nil, err
	}
	a.vers.mu.Lock()
	closed := a.vers.closed
	a.vers.mu.Unlock()
	if closed {
		v.close() // built after the archive was closed
	}
	return v, nil
}

// closeVersions stops the history's shadow archives' background work (Close).
func closeVersions(a *Archive) {
	a.vers.mu.Lock()
	a.vers.closed = true
	charge := a.vers.charge
	a.vers.charge = nil
	a.vers.mu.Unlock()
	if charge != nil {
		charge.Release()
	}
	if v, ok := a.vers.memo.Peek(); ok {
		v.close()
	}
}

func (v *Versions) close() {
	if v.set != nil {
		v.set.Close()
	}
}

// openVersion returns the shadow archive holding an older version's File
// and the File as that archive knows it.
func openVersion(a *Archive, f File) (*Archive, File, error) {
	v, _ := a.vers.memo.Peek()
	ver, idx := index.Link(f), index.Ordinal(f)
	if v == nil || ver < 0 || int(ver) >= len(v.shadows) || v.shadows[ver] == nil ||
		idx < 0 || int(idx) >= v.shadows[ver].tree.Idx.N() {
		return nil, File{}, fmt.Errorf("archive %s: key %s: version reference %d/%d is not of this archive: %w", a.name, f.Key, ver, idx, ErrBadRange)
	}
	sh := v.shadows[ver]
	f = index.WithLink(f, 0)
	return sh, f, nil
}

// buildVersions reads the chain's manifests again and resolves every
// (key, upload) mention.
func buildVersions(ctx context.Context, a *Archive) (*Versions, error) {
	defer runtime.KeepAlive(a)
	fs := newFileStore()
	top, err := fetchManifest(ctx, a.store, a.bucket, a.manifestKey, a.opts.Limits, fs)
	if err != nil {
		return nil, err
	}
	chain, err := loadChain(ctx, a.store, a.bucket, top, a.opts.Limits, fs)
	if err != nil {
		return nil, err
	}
	if len(chain) != len(a.tree.Chain) {
		return nil, fmt.Errorf("%w: manifest %s: the chain has %d upload(s) now, %d when opened", ErrBrokenChain, a.manifestKey, len(chain), len(a.tree.Chain))
	}
	v := &Versions{a: a, ids: slices.Clone(a.tree.Chain), times: make([]time.Time, len(chain)), linkOf: map[string]int32{}}
	for i, l := range chain {
		if l.uploadID != a.tree.Chain[i] {
			return nil, fmt.Errorf("%w: manifest %s: upload %d of the chain is %q now, %q when opened", ErrBrokenChain, l.key, i, l.uploadID, a.tree.Chain[i])
		}
		v.times[i] = l.m.CreatedAt
		v.linkOf[l.uploadID] = int32(i)
	}

	r := newResolver(a.bucket, a.manifestKey, chain, fs, a.opts)
	r.init()
	if err := r.collectChunks(); err != nil {
		return nil, err
	}
	if err := r.keyErrors(); err != nil {
		return nil, err
	}
	order, starts := fs.sortMentions()
	var (
		names   strings.Builder
		ends    []uint32
		olds    = make([]survivors, len(chain))
		mi      int // position in the archive's tree
		matched int
	)
	for li := range olds {
		olds[li].parts = map[int32][]uint32{}
	}
	cur := &a.tree.Idx
	linkOf := func(o uint64) int32 {
		l, _ := r.mention(int(uint32(o)))
		return l
	}
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && !isStart(starts, j) {
			j++
		}
		key := string(fs.key(int(uint32(order[i]))))
		names.WriteString(key)
		ends = append(ends, uint32(names.Len()))
		v.vstart = append(v.vstart, uint32(len(v.vers)))
		for mi < cur.N() && cur.RawKey(mi) < key {
			mi++
		}
		inTree := mi < cur.N() && cur.RawKey(mi) == key
		for k := i; k < j; {
			link := linkOf(order[k])
			l := k + 1
			for l < j && linkOf(order[l]) == link {
				l++
			}
			f, parts, isFile, err := r.decideGroup(order[k:l])
			if err != nil {
				return nil, err
			}
			e := verEnt{link: link, file: -1}
			latest := k == i
			switch {
			case latest && isFile != inTree:
				return nil, fmt.Errorf("%w: key %q: the manifests read again disagree with the opened tree (changed since open?)", ErrInvalidTree, key)
			case latest && isFile:
				e.file = int32(mi)
				matched++
			case isFile:
				o := &olds[link]
				e.file = int32(len(o.files))
				if parts != nil {
					o.parts[e.file] = parts
				}
				o.files = append(o.files, uint32(f))
			}
			v.vers = append(v.vers, e)
			k = l
		}
		i = j
	}
	v.vstart = append(v.vstart, uint32(len(v.vers)))
	if matched != cur.N() {
		return nil, fmt.Errorf("%w: %d key(s) of the opened tree are not in the manifests read again (changed since open?)", ErrInvalidTree, cur.N()-matched)
	}
	v.keys = &index.Index{Names: names.String(), Ends: ends}
	order, starts = nil, nil

	var all []uint32
	for _, o := range olds {
		all = append(all, o.files...)
	}
	origins, err := r.findOriginals(all)
	if err != nil {
		return nil, err
	}
	all = nil
	r.streamBounds()
	idxs := make([]index.Index, len(chain))
	for li, o := range olds {
		if len(o.files) == 0 {
			continue
		}
		if idxs[li], err = r.buildIndex(o, origins, false, false); err != nil {
			return nil, err
		}
		olds[li] = survivors{}
	}
	chunks := r.chunkTable()
	v.shadows = make([]*Archive, len(chain))
	for li := range chain {
		if idxs[li].N() == 0 {
			continue
		}
		if v.set == nil {
			co := a.opts.chunkOptions()
			co.Classes = a.set.Classes() // one storage state for every version
			// A tar walk keeps the names the versions' extents ask for.
			co.TarMembers = newTarWant(func() []*index.Index {
				var xs []*index.Index
				for _, sh := range v.shadows {
					if sh != nil {
						xs = append(xs, &sh.tree.Idx)
					}
				}
				return xs
			}).members
			v.set = chunkio.NewSet(a.store, a.bucket, chunks, co)
		}
		l := &chain[li]
		o := a.opts
		o.Name = a.name
		v.shadows[li] = newArchive(index.Tree{
			Upload:     l.uploadID,
			Version:    l.m.Version,
			CreatedAt:  l.m.CreatedAt,
			RegionName: l.m.Region,
			Chain:      a.tree.Chain[li:],
			Chunks:     chunks,
			Idx:        idxs[li],
		}, a.store, a.bucket, l.key, o, nil, nil, v.set) // one chunk table, one read state
	}
	for _, w := range r.warnings {
		a.log.Warn().Str("archive", a.name).Msg("version history: " + printableLog(w))
	}
	a.log.Info().Str("archive", a.name).Int("keys", len(ends)).Int("versions", len(v.vers)).
		Int("chunks", len(chunks)).Msg("version history built")
	return v, nil
}

// Bytes estimates the memory the history holds: its key table and
// versions, and per older upload the index of its older versions (as the
// index file would store it) with the chain's chunk table once. A single
// upload's history holds nothing.
func (v *Versions) Bytes() int64 {
	if v.keys == nil {
		return 0
	}
	n := int64(len(v.keys.Names)) + 4*int64(len(v.keys.Ends)) + 4*int64(len(v.vstart)) + 8*int64(len(v.vers))
	for _, id := range v.ids {
		n += 2*int64(len(id)) + 24 + 64 // the id, its linkOf entry, its time
	}
	meta := &index.Meta{Prov: &index.Provenance{}}
	var chunks []chunkio.Chunk
	for _, sh := range v.shadows {
		if sh == nil {
			continue
		}
		t := index.Tree{Chain: sh.tree.Chain, Idx: sh.tree.Idx}
		chunks = sh.tree.Chunks
		n += max(index.FileBytes(&t, meta), 0)
	}
	if chunks != nil {
		n += max(index.FileBytes(&index.Tree{Chunks: chunks}, meta), 0)
	}
	return n
}

// count is the number of versions of key k.
func (v *Versions) count(k int) int {
	if v.keys == nil {
		return 1
	}
	return int(v.vstart[k+1] - v.vstart[k])
}

// keyIndex is the sorted key table versions are listed from.
func (v *Versions) keyIndex() *index.Index {
	if v.keys == nil {
		return &v.a.tree.Idx
	}
	return v.keys
}

// version builds version j (0 = newest) of key k.
func (v *Versions) version(k, j int) Version {
	if v.keys == nil {
		return Version{File: v.a.tree.Idx.File(k), VersionID: v.a.tree.Upload, IsLatest: true}
	}
	e := v.vers[int(v.vstart[k])+j]
	out := Version{VersionID: v.ids[e.link], IsLatest: j == 0}
	switch {
	case e.file < 0:
		out.DeleteMarker = true
		out.Key = v.keys.KeyAt(k)
		out.ModTime = v.times[e.link].UTC()
	case j == 0:
		out.File = v.a.tree.Idx.File(int(e.file))
	default:
		out.File = v.shadows[e.link].tree.Idx.File(int(e.file))
		out.File = index.WithLink(out.File, e.link)
	}
	return out
}

// StatVersion looks up version versionID of key ("" = the latest version,
// which may be a delete marker) in O(log n + versions of the key). For an
// archive served from its index file mapped in place, a file truncated
// under the server fails the request with a panic whose value wraps
// index.ErrFileChanged, as Archive.Stat does.
func (v *Versions) StatVersion(key, versionID string) (ver Version, ok bool) {
	v.a.tree.Idx.Must(func() { ver, ok = v.statVersion(key, versionID) })
	return ver, ok
}

func (v *Versions) statVersion(key, versionID string) (Version, bool) {
	x := v.keyIndex()
	defer runtime.KeepAlive(x)
	k := x.Search(key)
	if k >= x.N() || x.RawKey(k) != key {
		return Version{}, false
	}
	if versionID == "" {
		return v.version(k, 0), true
	}
	j := v.find(k, versionID)
	if j < 0 {
		return Version{}, false
	}
	return v.version(k, j), true
}

// find returns the position of versionID among key k's versions, or -1.
func (v *Versions) find(k int, versionID string) int {
	if v.keys == nil {
		if versionID == v.a.tree.Upload {
			return 0
		}
		return -1
	}
	li, ok := v.linkOf[versionID]
	if !ok {
		return -1
	}
	for j, e := range v.vers[v.vstart[k]:v.vstart[k+1]] {
		if e.link == li {
			return j
		}
	}
	return -1
}

// ListVersions returns one page of versions, delete markers and (with a
// Delimiter) common prefixes, keys in byte order and each key's versions
// newest first, in O(log n + page) (common prefixes skip their keys with
// a galloping search, as List does). A VersionIDMarker that is not a
// version of KeyMarker is ErrUnknownVersion. A fault reading an index
// mapped in place (a file truncated under the server) is an error
// wrapping index.ErrFileChanged.
func (v *Versions) ListVersions(p VersionListParams) (res VersionListResult, err error) {
	if gerr := v.a.tree.Idx.Guard(func() { res, err = v.listVersions(p) }); gerr != nil {
		return VersionListResult{}, fmt.Errorf("archive %s: list versions: %w", v.a.name, gerr)
	}
	return res, err
}

func (v *Versions) listVersions(p VersionListParams) (VersionListResult, error) {
	x := v.keyIndex()
	defer runtime.KeepAlive(x)
	return PageVersions(chainTable{v, x}, p, "archive "+v.a.name)
}

// chainTable is an upload chain's versions as a VersionTable: the keys of
// the chain's key index, each with its versions newest first.
type chainTable struct {
	v *Versions
	x *index.Index
}

func (t chainTable) Len() int                          { return t.x.N() }
func (t chainTable) Key(i int) string                  { return t.x.RawKey(i) }
func (t chainTable) Search(s string) int               { return t.x.Search(s) }
func (t chainTable) SkipPrefix(i int, p string) int    { return t.x.SkipPrefix(i, p) }
func (t chainTable) Count(i int) int                   { return t.v.count(i) }
func (t chainTable) Find(i int, versionID string) int  { return t.v.find(i, versionID) }
func (t chainTable) Version(i, j int) (Version, error) { return t.v.version(i, j), nil }
func (t chainTable) KeepPrefix(cp string) string       { return t.x.Own(cp) }
