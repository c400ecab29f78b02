package faults

// Glacier: a model of S3's archive storage classes and restores, for tests
// and the bench. It gives each object a storage class (and, for
// INTELLIGENT_TIERING, an access tier), refuses reads of archived objects
// until a restore has completed, runs restores with a configurable delay,
// and answers RestoreObject with S3's status codes. The same model is put
// in front of a backend.Store (GlacierStore) or of an S3 server's
// http.Handler (GlacierHTTP, in front of gofakes3), so that unit tests and
// end-to-end tests with real clients see the same behaviour.
//
// The rules follow S3:
//
//   - GLACIER, DEEP_ARCHIVE and INTELLIGENT_TIERING in ARCHIVE_ACCESS or
//     DEEP_ARCHIVE_ACCESS need a restore; every other class is read
//     directly (backend.NeedsRestore).
//   - A GET of an object that needs a restore and has no finished one is
//     refused (403 InvalidObjectState, with StorageClass and AccessTier).
//     HEAD always works and reports x-amz-storage-class (except for
//     STANDARD), x-amz-archive-status and x-amz-restore.
//   - RestoreObject: 202 when a restore starts (it finishes Delay later),
//     409 RestoreAlreadyInProgress while one runs, 200 when a restored copy
//     exists (its expiry moves to now + Days), 403 InvalidObjectState for
//     an object that needs no restore, 400 for a request S3 would refuse
//     (backend.CheckRestore). A GLACIER or DEEP_ARCHIVE copy expires Days
//     after the restore finished, and the object is archived again. An
//     Intelligent-Tiering restore moves the object back to the frequent
//     tier for good.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// GlacierConfig configures a Glacier model.
type GlacierConfig struct {
	// Delay is how long a restore runs before its copy can be read.
	Delay time.Duration
	// TierDelay overrides Delay for a retrieval tier ("Expedited",
	// "Standard", "Bulk").
	TierDelay map[string]time.Duration
	// Now is the model's clock; nil = time.Now. Tests pass a fake clock to
	// step through a restore without waiting.
	Now func() time.Time
}

// RestoreCall is one RestoreObject the model answered.
type RestoreCall struct {
	Bucket, Key string
	Days        int
	Tier        string // as asked ("" = Standard)
	Result      backend.RestoreResult
	Err         error // nil when Result is set
	At          time.Time
}

// Glacier is the storage-class and restore model. It is safe for concurrent
// use.
type Glacier struct {
	cfg GlacierConfig

	mu       sync.Mutex
	classes  map[string]objClass // bucket\x00key
	prefixes []prefixClass
	restores map[string]*restoreRec // bucket\x00key
	calls    []RestoreCall
	refused  int // reads refused as archived
}

type objClass struct{ class, tier string }

type prefixClass struct {
	bucket, prefix string
	objClass
}

// restoreRec is one object's restore: it finishes at ready; a GLACIER or
// DEEP_ARCHIVE copy goes away at expiry (zero for Intelligent-Tiering).
type restoreRec struct {
	ready, expiry time.Time
}

// NewGlacier returns a model in which every object is STANDARD until
// SetClass or SetPrefixClass says otherwise.
func NewGlacier(cfg GlacierConfig) *Glacier {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Glacier{cfg: cfg, classes: map[string]objClass{}, restores: map[string]*restoreRec{}}
}

func objKey(bucket, key string) string { return bucket + "\x00" + key }

// SetClass gives bucket/key storage class class and, for
// INTELLIGENT_TIERING, access tier tier ("" = a frequent/infrequent tier).
// It forgets the object's restore.
func (g *Glacier) SetClass(bucket, key, class, tier string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.classes[objKey(bucket, key)] = objClass{class, tier}
	delete(g.restores, objKey(bucket, key))
}

// SetPrefixClass gives every object of bucket whose key starts with prefix
// (and has no class of its own from SetClass) class and tier; the longest
// matching prefix wins.
func (g *Glacier) SetPrefixClass(bucket, prefix, class, tier string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prefixes = append(g.prefixes, prefixClass{bucket, prefix, objClass{class, tier}})
}

// Forget drops every restore (restored copies and running restores), the
// log of RestoreObject calls and the refusal count; classes stay.
func (g *Glacier) Forget() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.restores = map[string]*restoreRec{}
	g.calls = nil
	g.refused = 0
}

// Calls returns every RestoreObject the model answered, in order.
func (g *Glacier) Calls() []RestoreCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls)
}

// Refusals is the number of reads (GET, ranged or whole) refused because
// the object was archived: zero means nobody tried to fetch archived bytes.
func (g *Glacier) Refusals() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}

func (g *Glacier) countRefusal() {
	g.mu.Lock()
	g.refused++
	g.mu.Unlock()
}

// Started returns the keys (bucket/key) whose restore was started (202),
// in order; a key restored twice (after its copy expired) appears twice.
func (g *Glacier) Started() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, c := range g.calls {
		if c.Result == backend.RestoreStarted {
			out = append(out, c.Bucket+"/"+c.Key)
		}
	}
	return out
}

// classOf is the object's class and tier (g.mu held).
func (g *Glacier) classOf(bucket, key string) objClass {
	if c, ok := g.classes[objKey(bucket, key)]; ok {
		return c
	}
	best, n := objClass{class: backend.ClassStandard}, -1
	for _, p := range g.prefixes {
		if p.bucket == bucket && strings.HasPrefix(key, p.prefix) && len(p.prefix) > n {
			best, n = p.objClass, len(p.prefix)
		}
	}
	return best
}

// GlacierState is what the model says of one object at one moment.
type GlacierState struct {
	Class, Tier string // Tier: the Intelligent-Tiering access tier now ("" after a restore)
	Restore     backend.RestoreStatus
	Readable    bool // a GET is served
}

// State returns bucket/key's class, tier and restore state now.
func (g *Glacier) State(bucket, key string) GlacierState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stateLocked(bucket, key, g.cfg.Now())
}

func (g *Glacier) stateLocked(bucket, key string, now time.Time) GlacierState {
	c := g.classOf(bucket, key)
	st := GlacierState{Class: c.class, Tier: c.tier}
	rec := g.restores[objKey(bucket, key)]
	if rec != nil && !rec.expiry.IsZero() && !now.Before(rec.expiry) {
		delete(g.restores, objKey(bucket, key)) // the copy expired: archived again
		rec = nil
	}
	if rec != nil {
		st.Restore.Requested = true
		st.Restore.Ongoing = now.Before(rec.ready)
		if !st.Restore.Ongoing {
			st.Restore.Expiry = rec.expiry
			if c.class == backend.ClassIntelligentTiering {
				st.Tier = "" // moved back to the frequent tier
			}
		}
	}
	st.Readable = !backend.NeedsRestore(c.class, c.tier) || st.Restore.Done(now)
	return st
}

// restore runs one RestoreObject of an existing object.
func (g *Glacier) restore(bucket, key string, req backend.RestoreRequest) (backend.RestoreResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	res, err := g.restoreLocked(bucket, key, req, now)
	g.calls = append(g.calls, RestoreCall{Bucket: bucket, Key: key, Days: req.Days, Tier: req.Tier, Result: res, Err: err, At: now})
	return res, err
}

func (g *Glacier) restoreLocked(bucket, key string, req backend.RestoreRequest, now time.Time) (backend.RestoreResult, error) {
	st := g.stateLocked(bucket, key, now)
	c := g.classOf(bucket, key)
	if !backend.NeedsRestore(c.class, c.tier) {
		return 0, fmt.Errorf("%w: %s", backend.ErrNotArchived, c.class)
	}
	if err := backend.CheckRestore(c.class, c.tier, req); err != nil {
		return 0, err
	}
	switch {
	case st.Restore.Ongoing:
		return backend.RestoreInProgress, nil
	case st.Restore.Requested:
		if rec := g.restores[objKey(bucket, key)]; rec != nil && req.Days > 0 {
			rec.expiry = now.Add(time.Duration(req.Days) * 24 * time.Hour)
		}
		return backend.RestoreAlreadyRestored, nil
	}
	d := g.cfg.Delay
	if td, ok := g.cfg.TierDelay[tierOrStandard(req.Tier)]; ok {
		d = td
	}
	rec := &restoreRec{ready: now.Add(d)}
	if req.Days > 0 {
		rec.expiry = rec.ready.Add(time.Duration(req.Days) * 24 * time.Hour)
	}
	g.restores[objKey(bucket, key)] = rec
	return backend.RestoreStarted, nil
}

func tierOrStandard(t string) string {
	if t == "" {
		return backend.RetrievalStandard
	}
	return t
}

// decorate adds the model's class and restore state to an ObjectInfo as
// a HEAD (restoreKnown) or a listing reports it.
func (g *Glacier) decorate(bucket string, info backend.ObjectInfo, head bool) backend.ObjectInfo {
	st := g.State(bucket, info.Key)
	info.StorageClass, info.AccessTier = st.Class, st.Tier
	info.Restore = st.Restore
	info.RestoreKnown = head || st.Restore.Requested
	return info
}

// Store returns a backend.Store (and backend.Restorer) over inner that
// applies the model: archived objects refuse ReadRange and Get with an
// *backend.ArchivedError until restored, Stat and List report classes and
// restores, and Restore answers as S3's RestoreObject does.
func (g *Glacier) Store(inner backend.Store) *GlacierStore {
	return &GlacierStore{g: g, inner: inner}
}

// GlacierStore is the model in front of a backend.Store (Glacier.Store).
type GlacierStore struct {
	g     *Glacier
	inner backend.Store
}

// refuse checks that the object exists (as S3 answers 404 first) and
// refuses the read of an archived object.
func (s *GlacierStore) refuse(ctx context.Context, op, bucket, key string) error {
	st := s.g.State(bucket, key)
	if st.Readable {
		return nil
	}
	if err := s.exists(ctx, op, bucket, key); err != nil {
		return err
	}
	s.g.countRefusal()
	return &backend.Error{Op: op, Bucket: bucket, Key: key,
		Err: &backend.ArchivedError{StorageClass: st.Class, AccessTier: st.Tier, Restore: st.Restore}}
}

// exists stats the object in the inner store, as S3 answers 404 before
// anything else; a store error is told as one of operation op.
func (s *GlacierStore) exists(ctx context.Context, op, bucket, key string) error {
	_, err := s.inner.Stat(ctx, bucket, key)
	var be *backend.Error
	if errors.As(err, &be) {
		return &backend.Error{Op: op, Bucket: bucket, Key: key, Err: be.Err}
	}
	return err
}

// ReadRange implements backend.Store.
func (s *GlacierStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	if err := s.refuse(ctx, "range", bucket, key); err != nil {
		return nil, backend.ObjectInfo{}, err
	}
	rc, info, err := s.inner.ReadRange(ctx, bucket, key, off, length, ifMatch)
	if err == nil {
		info = s.g.decorate(bucket, info, false)
	}
	return rc, info, err
}

// Get implements backend.Store.
func (s *GlacierStore) Get(ctx context.Context, bucket, key string) (io.ReadCloser, backend.ObjectInfo, error) {
	if err := s.refuse(ctx, "get", bucket, key); err != nil {
		return nil, backend.ObjectInfo{}, err
	}
	rc, info, err := s.inner.Get(ctx, bucket, key)
	if err == nil {
		info = s.g.decorate(bucket, info, false)
	}
	return rc, info, err
}

// Stat implements backend.Store: the info carries the class, tier and
// restore state, as a HEAD does.
func (s *GlacierStore) Stat(ctx context.Context, bucket, key string) (backend.ObjectInfo, error) {
	info, err := s.inner.Stat(ctx, bucket, key)
	if err != nil {
		return info, err
	}
	return s.g.decorate(bucket, info, true), nil
}

// List implements backend.Store: each object carries its class, and its
// restore state when it has a restore (as ListObjectsV2 with
// RestoreStatus reports it), never an Intelligent-Tiering access tier.
func (s *GlacierStore) List(ctx context.Context, bucket, prefix string, fn func(backend.ObjectInfo) error) error {
	return s.inner.List(ctx, bucket, prefix, func(info backend.ObjectInfo) error {
		info = s.g.decorate(bucket, info, false)
		info.AccessTier = "" // ListObjectsV2 has no archive status
		return fn(info)
	})
}

// PutIfMatch passes a conditional replacement through when the inner
// store can make one (backend.MatchPutter).
func (s *GlacierStore) PutIfMatch(ctx context.Context, bucket, key, etag string, body io.ReadSeeker, size int64) (bool, error) {
	return backend.PutIfMatchThrough(ctx, s.inner, bucket, key, etag, body, size)
}

// CanPutIfMatch reports whether the inner store can replace objects
// conditionally (backend.AsMatchPutter).
func (s *GlacierStore) CanPutIfMatch() bool {
	_, ok := backend.AsMatchPutter(s.inner)
	return ok
}

// Restore implements backend.Restorer.
func (s *GlacierStore) Restore(ctx context.Context, bucket, key string, req backend.RestoreRequest) (backend.RestoreResult, error) {
	if err := ctx.Err(); err != nil {
		return 0, &backend.Error{Op: "restore", Bucket: bucket, Key: key, Err: err}
	}
	if err := s.exists(ctx, "restore", bucket, key); err != nil {
		return 0, err
	}
	res, err := s.g.restore(bucket, key, req)
	if err != nil {
		return 0, &backend.Error{Op: "restore", Bucket: bucket, Key: key, Err: err}
	}
	return res, nil
}

// PutIfAbsent passes a write through (a new object is STANDARD until
// SetClass) when the inner store can write; over one that cannot it fails
// with backend.ErrNotImplemented and CanPut is false.
func (s *GlacierStore) PutIfAbsent(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64) (bool, error) {
	return backend.PutThrough(ctx, s.inner, bucket, key, body, size)
}

// CanPut reports whether the inner store can write (backend.AsPutter).
func (s *GlacierStore) CanPut() bool {
	_, ok := backend.AsPutter(s.inner)
	return ok
}
