package chunkio

// classes.go: the storage class and restore state of the objects an archive
// reads (its chunks and direct-upload objects), so that a read of bytes in
// an archived object fails at once with backend.ErrArchived instead of
// fetching, listings and HEAD can report classes without a request per
// file, and restores are sent once per object.
//
// Where the state comes from:
//
//   - Load lists the upload prefixes that hold the archive's keys (one
//     ListObjectsV2 per 1000 objects of each prefix; S3 reports each
//     object's StorageClass and, when it has one, its RestoreStatus). The
//     archive calls it at open and the catalog at every rescan.
//   - Where a listing is refused or did not cover a key (after a Load
//     tried), the object is HEADed once when first needed; a HEAD (also
//     one the read path makes for its own reasons, Observe) reports the
//     class, the Intelligent-Tiering tier and x-amz-restore.
//   - A GET the store refused as archived records the object's class and
//     tier (Refused), so the next read fails without a request.
//   - A listing names an Intelligent-Tiering object's class but not its
//     access tier (ListObjectsV2 has no x-amz-archive-status), so such an
//     object's tier is unknown until a HEAD or a refused GET reports it:
//     a need for its storage (HEAD, a listing with RestoreStatus, a
//     restore) HEADs it once; a plain read does not (S3's refusal tells
//     the tier). A rescan's listing makes the tier unknown again.
//   - Before Load was ever called nothing is asked: unknown objects are
//     read as STANDARD, and the store's refusal is what reveals them.
//
// Restore state changes while wharf runs (a restore finishes, a copy
// expires, someone restores through S3 directly), so it is kept briefly:
// the state of an archived object is trusted for RestoreTTL (default one
// minute) after it was learned, a finished restore until its expiry, and
// then refreshed with a HEAD when needed. Objects that need no restore are
// never HEADed for it.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/backend"
)

// DefaultRestoreTTL is how long the restore state of an archived object is
// trusted before a need for it HEADs the object again.
const DefaultRestoreTTL = time.Minute

// ClassBytesPerObject bounds the memory the state of one object takes
// (its map entry and objState, the key shared with the chunk table):
// measured at about 210 bytes (TestClassesMemoryPerObject holds it under
// 250). State exists only for an archive's own objects, so an archive
// whose classes are learned charges its index memory this much per chunk
// (archiveview.Info.StorageStateBytes).
const ClassBytesPerObject = 256

// ClassOptions configure a Classes.
type ClassOptions struct {
	// RestoreTTL: see DefaultRestoreTTL; 0 = the default.
	RestoreTTL time.Duration
	// Now is the clock (tests); nil = time.Now.
	Now    func() time.Time
	Logger zerolog.Logger
	// Name is the archive's display name, for logs.
	Name string
}

// Classes is the storage class and restore state of the objects of one
// bucket that an archive reads. The Sets of one archive (its tree and its
// version history) share one. It is safe for concurrent use.
type Classes struct {
	store  backend.Store
	bucket string
	ttl    time.Duration
	now    func() time.Time
	log    zerolog.Logger
	name   string

	// nonStandard counts the objects known to be in a class other than
	// STANDARD, so that archives with none answer without a lookup.
	nonStandard atomic.Int64

	mu       sync.Mutex
	objs     map[string]*objState
	loaded   bool     // a Load ran: unknown objects are HEADed when needed
	complete []string // prefixes whose last listing saw every object
}

// objState is what is known of one object.
type objState struct {
	class, tier string
	size        int64 // 0 = unknown
	// etag is the first ETag a listing or a HEAD reported ("" = none):
	// the object the archive was opened over. A direct object's first GET
	// carries it as If-Match (Set.pinListed), so a replaced object is
	// refused before any byte is sent.
	etag string

	// The flags side by side (one word, not one each with its padding:
	// there is an objState per object of the archive).
	classKnown bool
	// tierKnown: tier is what a HEAD or a refused GET reported, not a
	// listing's guess (a listing names no Intelligent-Tiering tier).
	tierKnown    bool
	present      bool // seen in a listing or a HEAD
	restoreKnown bool // restore is what the store reported (not a guess)

	restore   backend.RestoreStatus
	restoreAt time.Time // when the restore state was learned (zero = never)

	head *headRun // the HEAD in flight, if any
	// restore1 holds a token while one RestoreObject decision (and its
	// request) runs; others wait for it as long as their context lasts.
	// Made on the object's first restore (c.mu held).
	restore1 chan struct{}
}

type headRun struct {
	done chan struct{}
	err  error
}

// NewClasses returns an empty state for bucket in store.
func NewClasses(store backend.Store, bucket string, o ClassOptions) *Classes {
	c := &Classes{store: store, bucket: bucket, ttl: o.RestoreTTL, now: o.Now, log: o.Logger, name: o.Name,
		objs: map[string]*objState{}}
	if c.ttl <= 0 {
		c.ttl = DefaultRestoreTTL
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// Now is the clock the state is judged by.
func (c *Classes) Now() time.Time { return c.now() }

// ObjectClass is what is known of one object at one moment.
type ObjectClass struct {
	Key string
	// Class is the storage class; "" = unknown (read as STANDARD).
	Class string
	// Tier is the Intelligent-Tiering access tier when archived, else "".
	Tier string
	// TierKnown says Tier was reported by a HEAD or a refused GET. It is
	// false for an Intelligent-Tiering object known only from a listing,
	// which names no access tier: it may be archived all the same.
	TierKnown bool
	// Size is the object's size as the store reported it (0 = unknown).
	Size int64
	// Restore is the restore state; RestoreKnown says the store reported it.
	Restore      backend.RestoreStatus
	RestoreKnown bool
}

// Archived reports whether the object needs a restore to be read.
func (o ObjectClass) Archived() bool { return backend.NeedsRestore(o.Class, o.Tier) }

// Readable reports whether a GET of the object is served at now.
func (o ObjectClass) Readable(now time.Time) bool {
	return !o.Archived() || o.Restore.Done(now)
}

// uploadPrefix is the listing prefix for a key: its upload's directory
// ("…/uploads/<id>/") when the key lies under one, else the key's own
// directory ("" for a key without '/').
func uploadPrefix(key string) string {
	if i := strings.LastIndex(key, "/uploads/"); i >= 0 || strings.HasPrefix(key, "uploads/") {
		start := i + len("/uploads/")
		if i < 0 {
			start = len("uploads/")
		}
		if j := strings.IndexByte(key[start:], '/'); j > 0 {
			return key[:start+j+1]
		}
	}
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i+1]
	}
	return ""
}

// uploadPrefixes returns the listing prefixes that hold keys, sorted, with
// a prefix covered by a shorter one dropped.
func uploadPrefixes(keys []string) []string {
	set := map[string]bool{}
	for _, k := range keys {
		set[uploadPrefix(k)] = true
	}
	var ps []string
	for p := range set {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	var out []string
	for _, p := range ps {
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// maxListedPerPrefix bounds how many objects one prefix's listing visits
// beyond the keys it is for: max(10000, 2×keys). Past it the listing stops
// and the prefix's objects are HEADed when needed.
func maxListedPerPrefix(wanted int) int { return max(10000, 2*wanted) }

// errListCap stops a listing that went past maxListedPerPrefix.
var errListCap = errors.New("listing larger than expected")

// Listing is one upload prefix listed ahead of Load (ListAhead), so that
// the listing can run while the archive's manifests are still being read.
type Listing struct {
	Prefix  string
	Objects []backend.ObjectInfo
	ok      bool // listed whole, within maxListedAhead objects
}

// maxListedAhead bounds a Listing (the smallest limit Load applies): a
// larger prefix is listed again by Load, with its own limit.
const maxListedAhead = 10000

// UploadPrefixOf is the prefix Load lists for key (its upload's directory).
func UploadPrefixOf(key string) string { return uploadPrefix(key) }

// ListAhead lists prefix of bucket for a later Load. A failed or capped
// listing is not used (Load lists that prefix itself).
func ListAhead(ctx context.Context, store backend.Store, bucket, prefix string) Listing {
	l := Listing{Prefix: prefix}
	err := store.List(ctx, bucket, prefix, func(oi backend.ObjectInfo) error {
		if len(l.Objects) >= maxListedAhead {
			return errListCap
		}
		l.Objects = append(l.Objects, oi)
		return nil
	})
	l.ok = err == nil
	if !l.ok {
		l.Objects = nil
	}
	return l
}

// Load lists the upload prefixes holding keys and records every key's
// class, size and (when the listing reports one) restore state. A prefix
// listed whole ahead (ahead, from ListAhead) is not listed again. It
// returns the first listing error (a refused listing is
// backend.ErrAccessDenied); objects of prefixes that could not be listed
// whole are HEADed when needed from then on.
func (c *Classes) Load(ctx context.Context, keys []string, ahead ...Listing) error {
	// want maps each key to itself: the state is kept under the caller's
	// key string (the chunk table's), not a copy from the listing.
	want := make(map[string]string, len(keys))
	for _, k := range keys {
		want[k] = k
	}
	// The distinct keys, sorted: the keys under a prefix are one run of
	// them, counted with two binary searches (not a scan of every key per
	// prefix: a chain of thousands of uploads has as many prefixes).
	sorted := make([]string, 0, len(want))
	for k := range want {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var firstErr error
	var complete []string
	for _, p := range uploadPrefixes(keys) {
		lo := sort.SearchStrings(sorted, p)
		hi := lo + sort.Search(len(sorted)-lo, func(i int) bool { return !strings.HasPrefix(sorted[lo+i], p) })
		n := hi - lo
		seen, limit := 0, maxListedPerPrefix(n)
		found := map[string]backend.ObjectInfo{}
		visit := func(oi backend.ObjectInfo) error {
			if seen++; seen > limit {
				return errListCap
			}
			if k, ok := want[oi.Key]; ok {
				found[k] = oi
			}
			return nil
		}
		var err error
		if l, ok := listedAhead(ahead, p); ok {
			for _, oi := range l.Objects {
				if err = visit(oi); err != nil {
					break
				}
			}
		} else {
			err = c.store.List(ctx, c.bucket, p, visit)
		}
		c.mu.Lock()
		now := c.now()
		for k, oi := range found {
			c.recordLocked(k, oi, now, true)
		}
		c.mu.Unlock()
		switch {
		case err == nil:
			complete = append(complete, p)
		case errors.Is(err, errListCap):
			c.log.Warn().Str("archive", c.name).Str("bucket", c.bucket).Str("prefix", p).Int("limit", limit).
				Msg("storage classes: listing stopped at its limit; the rest is HEADed when needed")
		default:
			if firstErr == nil {
				firstErr = err
			}
			c.log.Warn().Str("archive", c.name).Str("bucket", c.bucket).Str("prefix", p).Err(err).
				Msg("storage classes: listing failed; objects are HEADed when needed")
		}
	}
	c.mu.Lock()
	c.loaded = true
	c.complete = complete
	c.mu.Unlock()
	return firstErr
}

// listedAhead returns the whole listing of prefix among ahead.
func listedAhead(ahead []Listing, prefix string) (Listing, bool) {
	for _, l := range ahead {
		if l.ok && l.Prefix == prefix {
			return l, true
		}
	}
	return Listing{}, false
}

// obj returns key's state, creating it (c.mu held).
func (c *Classes) obj(key string) *objState {
	o := c.objs[key]
	if o == nil {
		o = &objState{}
		c.objs[key] = o
	}
	return o
}

// AnyNonStandard reports whether any object is known to be in a class
// other than STANDARD (when not, every file's class is STANDARD).
func (c *Classes) AnyNonStandard() bool { return c.nonStandard.Load() > 0 }

// setClassLocked sets o's class and tier, keeping nonStandard (c.mu held).
func (c *Classes) setClassLocked(o *objState, class, tier string) {
	if class == "" {
		class = backend.ClassStandard
	}
	class, tier = internName(class), internName(tier)
	was := o.classKnown && o.class != backend.ClassStandard
	o.class, o.tier, o.classKnown = class, tier, true
	switch now := class != backend.ClassStandard; {
	case now && !was:
		c.nonStandard.Add(1)
	case !now && was:
		c.nonStandard.Add(-1)
	}
}

// internName returns the constant for a storage class or access tier
// name wharf knows, so that a million objects of a listing share one
// string instead of a copy each; other names are returned as they are.
func internName(s string) string {
	for _, n := range [...]string{backend.ClassStandard, backend.ClassGlacier, backend.ClassDeepArchive,
		backend.ClassIntelligentTiering, backend.ClassGlacierIR, "STANDARD_IA", "ONEZONE_IA",
		backend.TierArchiveAccess, backend.TierDeepArchiveAccess} {
		if s == n {
			return n
		}
	}
	return s
}

// forgetClassLocked marks o's class unknown, keeping nonStandard (c.mu
// held).
func (c *Classes) forgetClassLocked(o *objState) {
	if o.classKnown && o.class != backend.ClassStandard {
		c.nonStandard.Add(-1)
	}
	o.classKnown, o.tierKnown = false, false
}

// recordLocked stores what a listing (listed) or a HEAD reported (c.mu
// held). A listing's Intelligent-Tiering entry names no access tier: the
// tier known before is kept, but is unknown again until a HEAD.
func (c *Classes) recordLocked(key string, oi backend.ObjectInfo, now time.Time, listed bool) {
	o := c.obj(key)
	tier, tierKnown := oi.AccessTier, true
	if listed && oi.StorageClass == backend.ClassIntelligentTiering && tier == "" {
		tierKnown = false
		if o.classKnown && o.class == backend.ClassIntelligentTiering {
			tier = o.tier
		}
	}
	c.setClassLocked(o, oi.StorageClass, tier)
	o.tierKnown = tierKnown
	o.present = true
	if oi.Size > 0 {
		o.size = oi.Size
	}
	if o.etag == "" {
		o.etag = oi.ETag
	}
	if oi.RestoreKnown {
		o.restore, o.restoreKnown, o.restoreAt = oi.Restore, true, now
	} else {
		o.restoreKnown, o.restoreAt = false, time.Time{}
	}
}

// Observe records a Stat's answer (a HEAD reports class and restore state).
// Infos without a storage class (stores without classes) are ignored.
func (c *Classes) Observe(oi backend.ObjectInfo) {
	if oi.StorageClass == "" || oi.Key == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recordLocked(oi.Key, oi, c.now(), false)
}

// Refused records that a read of key was refused as archived: the object
// is archived (class and tier from the store's error) and not readable for
// RestoreTTL, without another request.
func (c *Classes) Refused(key string, ae *backend.ArchivedError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.obj(key)
	if ae.StorageClass != "" {
		c.setClassLocked(o, ae.StorageClass, ae.AccessTier)
	} else if !o.classKnown || !backend.NeedsRestore(o.class, o.tier) {
		c.setClassLocked(o, backend.ClassGlacier, "") // S3 said archived without naming the class
	}
	o.present, o.tierKnown = true, true
	o.restore, o.restoreKnown, o.restoreAt = backend.RestoreStatus{}, false, c.now()
}

// covered reports whether a complete listing covered key (c.mu held): then
// an unknown key is missing, not unlisted.
func (c *Classes) coveredLocked(key string) bool {
	for _, p := range c.complete {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// snapshot is key's ObjectClass from the state (c.mu held).
func (c *Classes) snapshotLocked(key string) ObjectClass {
	oc := ObjectClass{Key: key}
	if o := c.objs[key]; o != nil && o.classKnown {
		oc.Class, oc.Tier, oc.TierKnown, oc.Size = o.class, o.tier, o.tierKnown, o.size
		oc.Restore, oc.RestoreKnown = o.restore, o.restoreKnown
	} else if o != nil {
		oc.Size = o.size
	}
	return oc
}

// listedETag returns the first ETag a listing or a HEAD reported for key,
// "" when none did.
func (c *Classes) listedETag(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.objs[key]; o != nil {
		return o.etag
	}
	return ""
}

// Cached returns what is known of key without any request.
func (c *Classes) Cached(key string) ObjectClass {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked(key)
}

// needsHead reports whether key's state must be asked for with a HEAD
// before it can be relied on: its class is unknown and no complete listing
// covered it (after a Load tried); when wantRestore, it is an
// Intelligent-Tiering object whose access tier only a listing told (see
// the file comment); or it is archived and its restore state is stale
// (older than RestoreTTL, a finished restore past its expiry) or, when
// wantRestore, was never reported by the store. c.mu held.
func (c *Classes) needsHeadLocked(key string, wantRestore bool, now time.Time) bool {
	o := c.objs[key]
	if o == nil || !o.classKnown {
		return c.loaded && !c.coveredLocked(key) && (o == nil || !o.present)
	}
	if wantRestore && o.class == backend.ClassIntelligentTiering && !o.tierKnown {
		return true
	}
	if !backend.NeedsRestore(o.class, o.tier) {
		return false
	}
	if o.restoreAt.IsZero() || (wantRestore && !o.restoreKnown) {
		return true
	}
	if o.restoreKnown && o.restore.Done(now) && !o.restore.Expiry.IsZero() {
		return false // a restored copy stays until its expiry
	}
	return now.Sub(o.restoreAt) >= c.ttl
}

// Object returns what is known of key, first HEADing it when its state
// must be refreshed (needsHead): wantRestore asks for the restore state as
// the store reports it (HEAD's x-amz-restore), not only "refused lately".
func (c *Classes) Object(ctx context.Context, key string, wantRestore bool) (ObjectClass, error) {
	for {
		c.mu.Lock()
		if !c.needsHeadLocked(key, wantRestore, c.now()) {
			oc := c.snapshotLocked(key)
			c.mu.Unlock()
			return oc, nil
		}
		o := c.obj(key)
		if r := o.head; r != nil {
			c.mu.Unlock()
			select {
			case <-r.done:
			case <-ctx.Done():
				return ObjectClass{Key: key}, ctx.Err()
			}
			if r.err != nil && !(isContextErr(r.err) && ctx.Err() == nil) {
				return ObjectClass{Key: key}, r.err
			}
			continue // done; or its caller left, not ours: HEAD again
		}
		r := &headRun{done: make(chan struct{})}
		o.head = r
		c.mu.Unlock()

		info, err := c.store.Stat(ctx, c.bucket, key)
		c.mu.Lock()
		o.head = nil
		switch {
		case err == nil:
			info.Key = key
			c.recordLocked(key, info, c.now(), false) // no class = STANDARD
			if !info.RestoreKnown {
				// A store that reports no restore state: trust it as
				// "none" for the TTL rather than asking again at once.
				o.restoreKnown, o.restoreAt = true, c.now()
			}
		case errors.Is(err, backend.ErrNotFound):
			c.forgetClassLocked(o)
			o.present = false
			err = nil
		}
		oc := c.snapshotLocked(key)
		c.mu.Unlock()
		r.err = err
		close(r.done)
		if err != nil {
			return ObjectClass{Key: key}, fmt.Errorf("storage class of %s: %w", key, err)
		}
		return oc, nil
	}
}

// CheckReadable returns nil when key can be read now (or nothing says
// otherwise), and an error wrapping backend.ErrArchived (an
// *backend.ArchivedError naming the class, tier and restore state) when it
// is archived without a finished restore. It HEADs the object only when
// its state must be refreshed (needsHead).
func (c *Classes) CheckReadable(ctx context.Context, key string) error {
	oc, err := c.Object(ctx, key, false)
	if err != nil {
		return err
	}
	if oc.Readable(c.now()) {
		return nil
	}
	return fmt.Errorf("object %s cannot be read: %w", key,
		&backend.ArchivedError{StorageClass: oc.Class, AccessTier: oc.Tier, Restore: oc.Restore})
}

// RestoreSent is the outcome of Restore for one object.
type RestoreSent struct {
	Object ObjectClass // the object's state before the decision
	// Sent reports whether a RestoreObject was sent.
	Sent   bool
	Result backend.RestoreResult
}

// ErrNoRestorer: the store cannot restore (it has no archive classes).
var ErrNoRestorer = errors.New("the store cannot restore objects")

// Restore restores key unless that is not needed: an object that is not
// archived is backend.ErrNotArchived; one whose restore is running is
// RestoreInProgress and one already restored RestoreAlreadyRestored, both
// without a request. Otherwise RestoreObject is sent. The decision and the
// request run one at a time per object, with its state refreshed first, so
// concurrent restores of files sharing an object send it once; a caller
// waits for another's decision only as long as ctx lasts.
func (c *Classes) Restore(ctx context.Context, key string, req backend.RestoreRequest) (RestoreSent, error) {
	c.mu.Lock()
	o := c.obj(key)
	if o.restore1 == nil { // made on first use: most objects are never restored
		o.restore1 = make(chan struct{}, 1)
	}
	turn := o.restore1
	c.mu.Unlock()
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return RestoreSent{Object: ObjectClass{Key: key}}, fmt.Errorf("object %s: waiting for another restore of it: %w", key, ctx.Err())
	}
	defer func() { <-turn }()
	oc, err := c.Object(ctx, key, true)
	if err != nil {
		return RestoreSent{Object: oc}, err
	}
	out := RestoreSent{Object: oc}
	switch {
	case !oc.Archived():
		if oc.Class == "" {
			return out, fmt.Errorf("object %s: %w", key, backend.ErrNotFound)
		}
		return out, fmt.Errorf("object %s (%s): %w", key, oc.Class, backend.ErrNotArchived)
	case oc.Restore.Ongoing:
		out.Result = backend.RestoreInProgress
		return out, nil
	case oc.Restore.Done(c.now()):
		out.Result = backend.RestoreAlreadyRestored
		return out, nil
	}
	r, ok := backend.AsRestorer(c.store)
	if !ok {
		return out, fmt.Errorf("object %s: %w", key, ErrNoRestorer)
	}
	res, err := r.Restore(ctx, c.bucket, key, req)
	out.Sent = true
	if err != nil {
		if errors.Is(err, backend.ErrNotArchived) {
			// The store says no restore is needed: our state is stale
			// (moved to a readable class, or an Intelligent-Tiering
			// object back in the frequent tier). The next need HEADs it
			// instead of sending again.
			c.mu.Lock()
			o.restoreKnown, o.restoreAt, o.tierKnown = false, time.Time{}, false
			c.mu.Unlock()
		}
		return out, err
	}
	out.Result = res
	c.mu.Lock()
	switch res {
	case backend.RestoreStarted, backend.RestoreInProgress:
		o.restore = backend.RestoreStatus{Requested: true, Ongoing: true}
		o.restoreKnown, o.restoreAt = true, c.now()
	default: // restored after all: the expiry is unknown, ask when needed
		o.restore = backend.RestoreStatus{Requested: true}
		o.restoreKnown, o.restoreAt = false, time.Time{}
	}
	c.mu.Unlock()
	return out, nil
}
