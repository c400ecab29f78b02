package archiveview

// storage.go: files of archived uploads. A file's bytes live in one or
// more backend objects (chunks, direct objects; for chains and dedup,
// possibly an ancestor upload's), whose storage class and restore state
// the chunk layer keeps (chunkio.Classes). From those this file answers:
//
//   - a file's storage class: the coldest among the objects holding its
//     bytes (backend.Coldness), STANDARD when nothing else is known;
//   - a file's restore state, aggregated as what a RestoreObject of the
//     file would answer: absent while any archived object has no restore
//     (nobody asked, or its copy expired: a restore is needed, 202), else
//     "ongoing" while any is being restored (409), else "done" with the
//     earliest expiry (200); absent too with no archived object;
//   - restores: RestoreObject to each object holding the file's bytes that
//     needs a restore and has none, once each (chunkio.Classes.Restore);
//   - reads: Open refuses a range whose bytes lie in an object that cannot
//     be read now with an error wrapping ErrArchived, before any fetch; a
//     range touching only readable objects is served.
//
// Versions served through versionId follow the same rules: an older
// version's objects are the ones its own extents point at.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/internal/index"
	"github.com/wharf-s3/wharf/backend"
)

// ErrArchived is wrapped by a read of bytes in an archived object without
// a finished restore (backend.ErrArchived; the chain holds an
// *backend.ArchivedError naming the class and tier).
var ErrArchived = backend.ErrArchived

// ErrNotArchived is returned by Restore for a file none of whose objects
// needs a restore (backend.ErrNotArchived).
var ErrNotArchived = backend.ErrNotArchived

// RefreshStorageClasses lists the upload prefixes holding the archive's
// objects (one ListObjectsV2 per 1000 objects of each prefix) and records
// each object's storage class and restore state (chunkio.Classes.Load).
// Open calls it when Options.StorageClasses is set; the catalog calls it
// again on every rescan. A failed listing is returned (and logged) but
// never fatal: the objects it did not cover are HEADed when needed.
func (a *Archive) RefreshStorageClasses(ctx context.Context) error {
	return a.refreshStorageClasses(ctx)
}

// refreshStorageClasses is RefreshStorageClasses using the prefixes Open
// listed ahead (while it read the manifests).
func (a *Archive) refreshStorageClasses(ctx context.Context, ahead ...chunkio.Listing) error {
	keys := make([]string, len(a.tree.Chunks))
	for i := range a.tree.Chunks {
		keys[i] = a.tree.Chunks[i].Key
	}
	if err := a.set.Classes().Load(ctx, keys, ahead...); err != nil {
		return fmt.Errorf("archive %s: storage classes: %w", a.name, err)
	}
	return nil
}

// StorageObject is one backend object holding bytes of a file, with what
// is known of its storage.
type StorageObject struct {
	chunkio.ObjectClass
	// Size is the object's stored (compressed) size: the manifest's, else
	// the store's (0 = unknown).
	Size int64
}

// FileStorage is the storage of one file.
type FileStorage struct {
	// Class is the coldest storage class among the file's objects
	// ("STANDARD" when none is known); Tier its Intelligent-Tiering access
	// tier when that object is in an archive tier.
	Class, Tier string
	// Archived: some object needs a restore (whatever its restore state).
	Archived bool
	// Readable: every object can be read now.
	Readable bool
	// Restore is the aggregated restore state (see the file comment).
	Restore backend.RestoreStatus
	// Objects are the distinct objects holding the file's bytes, in the
	// order the file's bytes use them.
	Objects []StorageObject
}

// fileChunks returns the distinct chunk indexes of f's extents, in file
// order, and the archive whose chunk table they index (a version's shadow).
func fileChunks(a *Archive, f File) (*Archive, []int32, error) {
	if index.Link(f) != 0 {
		sh, vf, err := openVersion(a, f)
		if err != nil {
			return nil, nil, err
		}
		return fileChunks(sh, vf)
	}
	if index.Ordinal(f) < 0 || int(index.Ordinal(f)) >= a.tree.Idx.N() {
		return nil, nil, fmt.Errorf("archive %s: key %s: not a file of this archive: %w", a.name, f.Key, ErrBadRange)
	}
	var (
		out  []int32
		seen chunkSet
	)
	exts, err := readExtents(a, f)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range exts {
		if e.Chunk < 0 || int(e.Chunk) >= len(a.tree.Chunks) {
			return nil, nil, fmt.Errorf("archive %s: key %s: extent of chunk %d: %w", a.name, f.Key, e.Chunk, ErrCorrupt)
		}
		if seen.add(e.Chunk) {
			out = append(out, e.Chunk)
		}
	}
	return a, out, nil
}

// chunkSet is a set of chunk indexes: a short list while small (most
// files lie in one or two chunks), a map beyond.
type chunkSet struct {
	list []int32
	m    map[int32]bool
}

// add adds ci and reports whether it was new.
func (s *chunkSet) add(ci int32) bool {
	if s.m != nil {
		if s.m[ci] {
			return false
		}
		s.m[ci] = true
		return true
	}
	for _, c := range s.list {
		if c == ci {
			return false
		}
	}
	s.list = append(s.list, ci)
	if len(s.list) > 16 {
		s.m = make(map[int32]bool, 2*len(s.list))
		for _, c := range s.list {
			s.m[c] = true
		}
	}
	return true
}

// StorageClass returns f's storage class from what is already known (no
// request): the coldest class of the objects holding its bytes, STANDARD
// when none is known. Listings use it.
func (a *Archive) StorageClass(f File) string {
	// The common case, nothing archived, before any work per file: every
	// version shares this state (versions.go), so it holds for them too.
	if !a.set.Classes().AnyNonStandard() {
		return backend.ClassStandard
	}
	arc, cis, err := fileChunks(a, f)
	if err != nil {
		return backend.ClassStandard
	}
	cl := arc.set.Classes()
	class, tier := backend.ClassStandard, ""
	for _, ci := range cis {
		oc := cl.Cached(arc.tree.Chunks[ci].Key)
		if backend.Coldness(oc.Class, oc.Tier) > backend.Coldness(class, tier) {
			class, tier = oc.Class, oc.Tier
		}
	}
	return class
}

// FileStorage returns f's storage: its class, readability, aggregated
// restore state and objects. Archived objects whose restore state is stale
// (older than the restore TTL) or was never reported are HEADed first;
// nothing else makes a request.
func (a *Archive) FileStorage(ctx context.Context, f File) (FileStorage, error) {
	_, st, err := fileStorage(ctx, a, f, -1)
	return st, err
}

// MaxFreshHeads is how many backend HEADs one HEAD of a file or one
// listing page with RestoreStatus may send to refresh stale restore
// states (FileStorageAtMost, PrepareStorageAtMost): two rounds of
// parallel HEADs. The other stale objects are answered from the state
// known already (the last listing or HEAD of them; S3 too answers a
// listing from its own state without waiting), and refreshed by a later
// request: states refreshed stay fresh for the restore TTL, so repeated
// requests move on to the next stale ones.
const MaxFreshHeads = 32

// FileStorageAtMost is FileStorage sending at most maxHeads HEADs (the
// first stale objects in file order; maxHeads < 0: no limit, 0: none),
// answering the other objects from what is known already. What a reading
// client asks for (HEAD, listings) uses it, so that one request cannot
// cost a HEAD per archived chunk of a large file; restores and wharf
// restore use FileStorage.
func (a *Archive) FileStorageAtMost(ctx context.Context, f File, maxHeads int) (FileStorage, error) {
	st, _, err := a.FileStorageCounted(ctx, f, maxHeads)
	return st, err
}

// FileStorageCounted is FileStorageAtMost also reporting how many stale
// objects it refreshed (each a HEAD, unless another request's HEAD of it
// was in flight or had just ended): what a caller charges to the client's
// allowance of HEADs.
func (a *Archive) FileStorageCounted(ctx context.Context, f File, maxHeads int) (FileStorage, int, error) {
	var refreshed int
	_, st, err := fileStorageCounting(ctx, a, f, maxHeads, &refreshed)
	return st, refreshed, err
}

// fileStorage is FileStorage refreshing at most maxHeads stale objects
// (< 0: all), also returning the archive whose chunk table holds f's
// objects (a version's shadow).
func fileStorage(ctx context.Context, a *Archive, f File, maxHeads int) (*Archive, FileStorage, error) {
	return fileStorageCounting(ctx, a, f, maxHeads, nil)
}

// fileStorageCounting is fileStorage setting *refreshed (when not nil) to
// the number of stale objects refreshed.
func fileStorageCounting(ctx context.Context, a *Archive, f File, maxHeads int, refreshed *int) (*Archive, FileStorage, error) {
	arc, cis, err := fileChunks(a, f)
	if err != nil {
		return nil, FileStorage{}, err
	}
	cl := arc.set.Classes()
	objs := make([]StorageObject, len(cis))
	var stale []int
	for i, ci := range cis {
		c := &arc.tree.Chunks[ci]
		objs[i] = StorageObject{ObjectClass: cl.Cached(c.Key), Size: c.Size}
		if storageStale(objs[i].ObjectClass) && (maxHeads < 0 || len(stale) < maxHeads) {
			stale = append(stale, i)
		}
	}
	if refreshed != nil {
		*refreshed = len(stale)
	}
	if err := refreshStorage(ctx, cl, arc, cis, objs, stale); err != nil {
		return nil, FileStorage{}, fmt.Errorf("archive %s: key %s: %w", a.name, f.Key, err)
	}
	for i := range objs {
		if objs[i].Size <= 0 {
			objs[i].Size = objs[i].ObjectClass.Size
		}
	}
	return arc, summarize(objs, cl.Now()), nil
}

// refreshStorage refreshes objs[i] for each i of stale (Classes.Object,
// which HEADs it unless its state is fresh), at most maxStorageHeads at
// once, so that a file over many archived chunks costs rounds of parallel
// HEADs, not one after another. The first failure is returned (the others
// stop with ctx's end for them).
func refreshStorage(ctx context.Context, cl *chunkio.Classes, arc *Archive, cis []int32, objs []StorageObject, stale []int) error {
	if len(stale) == 1 {
		oc, err := cl.Object(ctx, arc.tree.Chunks[cis[stale[0]]].Key, true)
		objs[stale[0]].ObjectClass = oc
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
	)
	eachBounded(ctx, maxStorageHeads, len(stale), func(ctx context.Context, k int) bool {
		i := stale[k]
		oc, err := cl.Object(ctx, arc.tree.Chunks[cis[i]].Key, true)
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
			cancel()
			return false
		}
		objs[i].ObjectClass = oc
		return true
	})
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// storageStale reports whether FileStorage refreshes an object whose cached
// state is oc through Classes.Object, which HEADs it unless its state is
// fresh (PrepareStorage refreshes the same ones ahead): an archived object
// (its restore state may have moved), one of unknown class, or an
// Intelligent-Tiering object whose access tier only a listing told (a
// listing names none: it may be in an archive tier).
func storageStale(oc chunkio.ObjectClass) bool {
	return oc.Archived() || oc.Class == "" || oc.Class == backend.ClassIntelligentTiering && !oc.TierKnown
}

// maxStorageHeads bounds the HEADs PrepareStorage runs at once.
const maxStorageHeads = 16

// PrepareStorage refreshes, concurrently (at most 16 HEADs at a time), the
// restore state of the archived objects holding the bytes of files that
// FileStorage would HEAD one by one: a listing page asking for
// RestoreStatus calls it first, so that a page of archived files costs one
// round of parallel HEADs, not one HEAD after another. Failures are left
// for FileStorage to report.
func (a *Archive) PrepareStorage(ctx context.Context, files []File) {
	a.PrepareStorageAtMost(ctx, files, -1)
}

// PrepareStorageAtMost is PrepareStorage sending at most maxHeads HEADs
// (< 0: no limit), for the first stale objects in the files' order, and
// reports how many objects it refreshed. A listing page calls it with
// MaxFreshHeads and then answers every entry from the known state
// (FileStorageAtMost with 0).
func (a *Archive) PrepareStorageAtMost(ctx context.Context, files []File, maxHeads int) int {
	type job struct {
		cl  *chunkio.Classes
		key string
	}
	var jobs []job
	seen := map[string]bool{}
files:
	for _, f := range files {
		arc, cis, err := fileChunks(a, f)
		if err != nil {
			continue
		}
		cl := arc.set.Classes()
		for _, ci := range cis {
			key := arc.tree.Chunks[ci].Key
			if maxHeads >= 0 && len(jobs) >= maxHeads {
				break files
			}
			if !seen[key] && storageStale(cl.Cached(key)) {
				seen[key] = true
				jobs = append(jobs, job{cl, key})
			}
		}
	}
	eachBounded(ctx, maxStorageHeads, len(jobs), func(ctx context.Context, i int) bool {
		_, _ = jobs[i].cl.Object(ctx, jobs[i].key, true)
		return true
	})
	return len(jobs)
}

// eachBounded calls fn(ctx, i) for each i in [0, n) in order, at most
// limit at once: the one rule of storage's parallel HEADs and
// RestoreObjects. It starts no more calls once ctx ends or a call has
// returned false (those running finish), and returns when every call it
// started has returned.
func eachBounded(ctx context.Context, limit, n int, fn func(ctx context.Context, i int) bool) {
	sem := make(chan struct{}, limit)
	var (
		wg      sync.WaitGroup
		stopped atomic.Bool
	)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil || stopped.Load() {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if !fn(ctx, i) {
				stopped.Store(true)
			}
		}()
	}
	wg.Wait()
}

// summarize aggregates objects into a FileStorage at now.
func summarize(objs []StorageObject, now time.Time) FileStorage {
	fs := FileStorage{Class: backend.ClassStandard, Readable: true, Objects: objs}
	var (
		archived, done, ongoing int
		expiry                  time.Time
	)
	for _, o := range objs {
		if backend.Coldness(o.Class, o.Tier) > backend.Coldness(fs.Class, fs.Tier) {
			fs.Class, fs.Tier = o.Class, o.Tier
		}
		if !o.Readable(now) {
			fs.Readable = false
		}
		if !o.Archived() {
			continue
		}
		archived++
		switch {
		case o.Restore.Ongoing:
			ongoing++
		case o.Restore.Done(now):
			done++
			if e := o.Restore.Expiry; !e.IsZero() && (expiry.IsZero() || e.Before(expiry)) {
				expiry = e
			}
		}
	}
	if fs.Class != backend.ClassIntelligentTiering {
		fs.Tier = ""
	}
	fs.Archived = archived > 0
	switch {
	case ongoing+done < archived:
		// Some object still needs a restore: shown as never asked, as S3
		// shows an object nobody restored, so that a client restores now
		// rather than waiting out the restores running and only then
		// finding a restore is needed.
	case ongoing > 0:
		fs.Restore = backend.RestoreStatus{Requested: true, Ongoing: true}
	case archived > 0 && done == archived:
		fs.Restore = backend.RestoreStatus{Requested: true, Expiry: expiry}
	}
	return fs
}

// ObjectRestore is what Restore did for one object.
type ObjectRestore struct {
	StorageObject
	Sent   bool                  // a RestoreObject was sent
	Result backend.RestoreResult // started, already restored, in progress
}

// RestoreReport is what Restore did for a file (or a set of objects).
type RestoreReport struct {
	// Result is the answer S3 would give for the whole: RestoreStarted
	// when any restore started, else RestoreInProgress when any is still
	// running, else RestoreAlreadyRestored (every archived object is
	// restored).
	Result backend.RestoreResult
	// Objects are the archived objects, with what was done for each;
	// objects that need no restore are not listed.
	Objects []ObjectRestore
}

// Restore restores the objects holding f's bytes that need it: one
// RestoreObject per archived object that has no restore, none for objects
// already restored or being restored (chunkio.Classes.Restore). The request
// is checked against every archived object's class first
// (backend.CheckRestore: Days, tier, no Expedited for Deep Archive), so an
// invalid request sends nothing. A file none of whose objects is archived
// is ErrNotArchived.
func (a *Archive) Restore(ctx context.Context, f File, req backend.RestoreRequest) (RestoreReport, error) {
	arc, st, err := fileStorage(ctx, a, f, -1)
	if err != nil {
		return RestoreReport{}, err
	}
	rep, err := arc.RestoreObjects(ctx, st.Objects, req)
	if err != nil {
		return rep, fmt.Errorf("archive %s: key %s: %w", a.name, f.Key, err)
	}
	return rep, nil
}

// RestoreObjects is Restore for a set of objects of this archive (wharf
// restore: the objects of many files), each restored at most once, at
// most 16 RestoreObjects at once, reported in objs' order. On an
// error the report still lists what was done before it (restores that
// started stand), and the object whose RestoreObject failed (Sent, with
// no Result).
func (a *Archive) RestoreObjects(ctx context.Context, objs []StorageObject, req backend.RestoreRequest) (RestoreReport, error) {
	var rep RestoreReport
	var archived []StorageObject
	seen := map[string]bool{}
	for _, o := range objs {
		if seen[o.Key] || !o.Archived() {
			continue
		}
		seen[o.Key] = true
		if err := backend.CheckRestore(o.Class, o.Tier, req); err != nil {
			return rep, fmt.Errorf("object %s: %w", o.Key, err)
		}
		archived = append(archived, o)
	}
	if len(archived) == 0 {
		return rep, fmt.Errorf("none of its objects is archived: %w", ErrNotArchived)
	}
	// At most maxStorageHeads RestoreObjects at once; after a failure no
	// new one is sent (those in flight finish and are reported).
	type result struct {
		out  chunkio.RestoreSent
		err  error
		done bool
	}
	results := make([]result, len(archived))
	eachBounded(ctx, maxStorageHeads, len(archived), func(ctx context.Context, i int) bool {
		out, err := a.set.Classes().Restore(ctx, archived[i].Key, req)
		results[i] = result{out: out, err: err, done: true}
		return err == nil || errors.Is(err, backend.ErrNotArchived)
	})
	started, inProgress, notArchived, unsent := 0, 0, 0, 0
	var firstErr error
	for i, r := range results {
		o := archived[i]
		switch {
		case !r.done:
			unsent++
			continue // not sent: a failure (or ctx's end) came first
		case errors.Is(r.err, backend.ErrNotArchived):
			notArchived++
			continue // moved to a readable class since: nothing to do
		case r.err != nil:
			// The restores started stand (and are billed): the report
			// keeps them, and the object whose request failed.
			if r.out.Sent {
				rep.Objects = append(rep.Objects, ObjectRestore{StorageObject: o, Sent: true})
			}
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		rep.Objects = append(rep.Objects, ObjectRestore{StorageObject: o, Sent: r.out.Sent, Result: r.out.Result})
		switch r.out.Result {
		case backend.RestoreStarted:
			started++
		case backend.RestoreInProgress:
			inProgress++
		}
	}
	if firstErr == nil && unsent > 0 {
		firstErr = fmt.Errorf("%d restores not sent: %w", unsent, ctx.Err())
	}
	if firstErr != nil {
		return rep, firstErr
	}
	if notArchived == len(archived) {
		// Every one is readable now (the store or a fresh HEAD said so):
		// as S3 answers a restore of an object that needs none.
		return rep, fmt.Errorf("none of its objects is archived any more: %w", ErrNotArchived)
	}
	switch {
	case started > 0:
		rep.Result = backend.RestoreStarted
	case inProgress > 0:
		rep.Result = backend.RestoreInProgress
	default:
		rep.Result = backend.RestoreAlreadyRestored
	}
	return rep, nil
}

// StorageObjects returns the distinct objects holding the bytes of files
// (sorted by key), with their storage refreshed as FileStorage does, and
// the stored size of every object of the archive's tree (the whole upload,
// with the ancestors' objects it uses).
func (a *Archive) StorageObjects(ctx context.Context, files []File) (objs []StorageObject, total int64, err error) {
	byKey := map[string]StorageObject{}
	for _, f := range files {
		st, err := a.FileStorage(ctx, f)
		if err != nil {
			return nil, 0, err
		}
		for _, o := range st.Objects {
			byKey[o.Key] = o
		}
	}
	for _, o := range byKey {
		objs = append(objs, o)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	for i := range a.tree.Chunks {
		total += a.tree.Chunks[i].Size
	}
	return objs, total, nil
}

// checkReadable refuses a read of f's bytes [off, off+n) when any object
// holding them cannot be read now (before any fetch).
func checkReadable(ctx context.Context, a *Archive, f File, exts []extent, off, n int64) error {
	end := off + n
	var checked chunkSet
	for _, e := range exts {
		if e.FileOff >= end || e.FileOff+e.Length <= off || n == 0 || !checked.add(e.Chunk) {
			continue
		}
		if err := a.set.CheckReadable(ctx, e.Chunk); err != nil {
			return fmt.Errorf("archive %s: key %s: chunk %s: %w", a.name, f.Key, a.tree.Chunks[e.Chunk].Key, err)
		}
	}
	return nil
}
