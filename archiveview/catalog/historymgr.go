package catalog

// The manager's side of dataset histories (history.go): one per dataset
// bucket, for the archive it serves, built on the first request that
// needs it and dropped when the bucket serves another version.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// historyState is a dataset bucket's history for the archive it serves.
type historyState struct {
	arc    *archiveview.Archive
	params HistoryParams
	once   sync.Once
	done   chan struct{}
	ctx    context.Context // the build's: cm.base, cancelled by retire
	cancel context.CancelFunc
	h      *DatasetHistory // set before done is closed (or at once for a history of one version)
	err    error

	used atomic.Int64 // Unix nanoseconds of its last request (the eviction order)
	// charge is what the built history holds of the index budgets
	// (historyIndexShare), returned once (releaseCharge).
	chargeMu sync.Mutex
	charge   indexCharge
}

// ErrHistoryBuilding is wrapped by the error of a request that waited its
// bound for a dataset history still being built (503 SlowDown: retry).
var ErrHistoryBuilding = fmt.Errorf("the dataset's version history is still being built: %w", backend.ErrUnavailable)

// History returns the version history of dataset bucket name, whose
// archive the request looked up as a (archiveview.History; s3api's
// Config.History). dataset is false for a bucket that is not a dataset's
// (its archive's own chain is its history). Without build it never starts
// the history and returns nil when it is not built yet: the plain GET and
// HEAD path, which must not open older versions. With build it starts the
// history in the background (once; historyBuildsMax builds at a time
// across every dataset bucket, the others queued) and waits for it up to the catalog's
// open wait, then an error wrapping ErrHistoryBuilding. A history of one
// version (a pinned bucket, a first version) costs nothing and is always
// there.
func (cm *Manager) History(ctx context.Context, name string, a *archiveview.Archive, build bool) (h archiveview.History, dataset bool, err error) {
	// The request path: an atomic load and map lookups, no lock, once the
	// bucket's history state exists.
	if !(*cm.dsNames.Load())[name] {
		return nil, false, nil
	}
	if v, ok := cm.hists.Load(histKey{name, a}); ok {
		if hs := v.(*historyState); !hs.failed() {
			return cm.useHistory(ctx, name, hs, build)
		}
	}
	cm.dsMu.Lock()
	st := cm.datasets[name]
	if st == nil {
		cm.dsMu.Unlock()
		return nil, false, nil
	}
	served := (*archiveview.Archive)(nil)
	if st.entry != nil {
		served, _, _ = st.entry.State()
	}
	if served == nil || served != a {
		cm.dsMu.Unlock()
		if build {
			return nil, true, fmt.Errorf("dataset bucket %s: the version served changed during the request: %w", name, backend.ErrUnavailable)
		}
		return nil, true, nil
	}
	hs := st.hist
	if hs == nil || hs.arc != a || hs.failed() {
		cm.dropHistory(name, st)
		hs = cm.newHistoryState(name, st, a)
		st.hist = hs
		cm.hists.Store(histKey{name, a}, hs)
	}
	cm.dsMu.Unlock()
	return cm.useHistory(ctx, name, hs, build)
}

// useHistory is History's answer from bucket name's history state hs,
// marked used now: its history once built, else with build the wait for
// it (waitHistory), else nothing.
func (cm *Manager) useHistory(ctx context.Context, name string, hs *historyState, build bool) (archiveview.History, bool, error) {
	hs.used.Store(time.Now().UnixNano())
	if dh := hs.ready(); dh != nil {
		return dh, true, nil
	}
	if !build {
		return nil, true, nil
	}
	return cm.waitHistory(ctx, name, hs)
}

// histKey names a history: the bucket and the archive it serves (buckets
// sharing an archive may have different histories: pinned or followed).
type histKey struct {
	name string
	a    *archiveview.Archive
}

// dropHistory retires st's history, if any. Called with cm.dsMu held.
func (cm *Manager) dropHistory(name string, st *datasetState) {
	if st.hist == nil {
		return
	}
	cm.hists.Delete(histKey{name, st.hist.arc})
	st.hist.retire(cm)
	st.hist = nil
}

// waitHistory starts hs's build (once) and waits for it up to the open
// wait.
func (cm *Manager) waitHistory(ctx context.Context, name string, hs *historyState) (archiveview.History, bool, error) {
	hs.start(cm)
	t := time.NewTimer(cm.catalog.OpenWait)
	defer t.Stop()
	select {
	case <-hs.done:
	case <-ctx.Done():
		return nil, true, ctx.Err()
	case <-t.C:
		return nil, true, fmt.Errorf("dataset bucket %s: %w", name, ErrHistoryBuilding)
	}
	if hs.err != nil {
		return nil, true, hs.err
	}
	return hs.h, true, nil
}

// newHistoryState prepares the history of st's served version a. Called
// with cm.dsMu held.
func (cm *Manager) newHistoryState(name string, st *datasetState, a *archiveview.Archive) *historyState {
	ref := st.ref
	hs := &historyState{arc: a, done: make(chan struct{})}
	p := HistoryParams{
		Store:    cm.store,
		Ref:      ref,
		Current:  HistoryVersion{ID: st.ptr.VersionID, ManifestKey: st.ptr.ManifestKey, Created: a.Created()},
		Archive:  a,
		Previous: st.ptr.PreviousVersionID,
		Limit:    cm.cfg.DatasetHistory,
		Log:      cm.log,
		Open: func(ctx context.Context, v HistoryVersion) (*archiveview.Archive, error) {
			return cm.openUpload(ctx, name+"@"+v.ID, ref.Bucket, v.ManifestKey, v.ManifestSz,
				openExtra{allow: []string{ref.VersionsRoot()}, noClasses: true, hist: hs}) // no listing outside a scan
		},
		Ahead:       cmp.Or(cm.cfg.historyAhead, historyOpenAhead),
		ListTimeout: cm.cfg.OpenTimeout, // a stalled listing cannot hold a build turn
		OpenHeld: func(ctx context.Context, v HistoryVersion, held func()) (*archiveview.Archive, error) {
			return cm.openUpload(ctx, name+"@"+v.ID, ref.Bucket, v.ManifestKey, v.ManifestSz,
				openExtra{allow: []string{ref.VersionsRoot()}, noClasses: true, held: held, hist: hs})
		},
		Close: func(old *archiveview.Archive, inUse bool) {
			if inUse {
				cm.retire(readyEntry(old.Name(), old)) // reads may be in flight: after the grace
				return
			}
			cm.closeArchive(old)
		},
	}
	hs.params = p
	hs.ctx, hs.cancel = context.WithCancel(cm.base)
	if p.Previous == "" || p.Limit == 1 {
		// A history of one version: no store request.
		hs.h, _ = BuildHistory(context.Background(), p)
		hs.once.Do(func() {})
		close(hs.done)
	}
	return hs
}

// ready returns the built history, or nil.
func (hs *historyState) ready() *DatasetHistory {
	select {
	case <-hs.done:
		return hs.h
	default:
		return nil
	}
}

// failed reports a build that ended in an error (the next request tries
// again).
func (hs *historyState) failed() bool {
	select {
	case <-hs.done:
		return hs.err != nil
	default:
		return false
	}
}

// start builds the history in the background, once, in one of the
// manager's historyBuildsMax turns (waiting for it until hs is retired).
func (hs *historyState) start(cm *Manager) {
	hs.once.Do(func() {
		ctx := hs.ctx
		cm.jobs.Add(1)
		go func() {
			defer cm.jobs.Done()
			defer hs.cancel()
			ref := hs.params.Ref
			var (
				h   *DatasetHistory
				err error
			)
			t0 := time.Now()
			select {
			case cm.builds <- struct{}{}: // a turn (historyBuildsMax at a time)
				h, err = BuildHistory(ctx, hs.params)
				<-cm.builds
				if err == nil {
					if err = cm.chargeHistory(ctx, hs, h); err != nil {
						h.Close()
						h = nil
					}
				}
			case <-ctx.Done(): // retired (or shut down) while waiting for a turn
				err = fmt.Errorf("dataset %s: history: waiting for a build turn: %w", ref.URL(), ctx.Err())
			}
			if err != nil {
				if errors.Is(err, context.Canceled) {
					err = fmt.Errorf("dataset %s: history: %w", ref.URL(), backend.ErrUnavailable)
				}
				cm.log.Error().Err(err).Str("dataset", ref.URL()).Msg("dataset history not built")
			} else {
				cm.log.Info().Str("dataset", ref.URL()).Str("version_id", hs.params.Current.ID).
					Int("versions", len(h.versions)).Int("keys", len(h.keys)).Int("key_versions", len(h.vers)).Int64("bytes", h.Bytes()).
					Str("ended", h.ended).Dur("took", time.Since(t0)).Msg("dataset history built")
			}
			hs.h, hs.err = h, err
			close(hs.done)
		}()
	})
}

// retire stops a build in progress and retires the older versions the
// history holds open.
func (hs *historyState) retire(cm *Manager) {
	hs.cancel()
	hs.once.Do(func() { // never started: nothing to wait for, and no history
		// A request that found hs before it was retired gets a retry
		// (503), not a history that is not there.
		hs.err = fmt.Errorf("dataset %s: history: the version served changed before it was built: %w",
			hs.params.Ref.URL(), backend.ErrUnavailable)
		close(hs.done)
	})
	cm.retired.Add(1)
	go func() {
		defer cm.retired.Done()
		<-hs.done
		if hs.h != nil {
			hs.h.Close()
		}
		cm.releaseCharge(hs)
	}()
}

// chargeHistory charges the built history h of hs to the history's share
// of index memory and to the whole budget (a history is a cache: it is
// rebuilt when asked for again): if the share cannot hold it now, the
// least recently asked built history of another bucket is evicted first,
// then the next; with none left to evict it waits for the share up to
// the open timeout. A failure wraps ErrIndexMemory and ErrUnavailable
// (503 SlowDown; the next request builds again).
func (cm *Manager) chargeHistory(ctx context.Context, hs *historyState, h *DatasetHistory) error {
	n := h.Bytes()
	if cm.cfg.historyBytes != nil {
		n = cm.cfg.historyBytes(h)
	}
	wctx, cancel := context.WithTimeout(ctx, cm.cfg.OpenTimeout)
	defer cancel()
	hist, err := cm.reserveHistoryShare(wctx, n, hs)
	var main int64
	if err == nil {
		if main, err = cm.index.reserve(wctx, n); err != nil {
			cm.histIndex.release(hist)
		}
	}
	if err != nil {
		return fmt.Errorf("dataset %s: history of %d bytes: %w: %w", hs.params.Ref.URL(), n, err, backend.ErrUnavailable)
	}
	hs.chargeMu.Lock()
	hs.charge = indexCharge{main: main, hist: hist}
	hs.chargeMu.Unlock()
	return nil
}

// releaseCharge returns what hs's built history holds of the budgets
// (once: later calls return nothing).
func (cm *Manager) releaseCharge(hs *historyState) {
	hs.chargeMu.Lock()
	c := hs.charge
	hs.charge = indexCharge{}
	hs.chargeMu.Unlock()
	cm.releaseIndex(c)
}

// reserveHistoryShare takes n bytes of the history's share of index
// memory for hs (an open of one of its older versions, or its built
// history): at once if the share holds them, else after evicting the
// least recently asked built histories of other buckets, one at a time,
// when evicting them all would make the room; else it waits for the
// share (trying again at each release) until ctx ends.
//
// An open of hs's own older versions may also use what hs's built history
// holds of the share: a history never keeps its own bucket's versionId=
// reads waiting (it is never evicted for them, and without that room a
// history charged nearly the whole share made every one fail at the open
// deadline). So the share holds at most its limit plus one built
// history's charge, itself at most the limit; every byte is still charged
// to the index budget as well.
func (cm *Manager) reserveHistoryShare(ctx context.Context, n int64, hs *historyState) (int64, error) {
	own := func() int64 {
		hs.chargeMu.Lock()
		defer hs.chargeMu.Unlock()
		return hs.charge.hist
	}
	return cm.histIndex.reserveFreeing(ctx, n, own, func(short int64) bool { return cm.evictHistory(hs, short) })
}

// evictHistory drops the built, charged history least recently asked
// for, other than keep, and returns its charge at once; false when
// there is none, or when the charges of all of them together are less
// than short (evicting cannot make the room: none is evicted for
// nothing). The bucket builds its history again on its next versioned
// request; older versions it held open for reads retire after the grace.
func (cm *Manager) evictHistory(keep *historyState, short int64) bool {
	cm.dsMu.Lock()
	var (
		victim     *historyState
		victimName string
		evictable  int64
	)
	for name, st := range cm.datasets {
		hs := st.hist
		if hs == nil || hs == keep || hs.ready() == nil {
			continue
		}
		hs.chargeMu.Lock()
		charged := hs.charge.hist
		hs.chargeMu.Unlock()
		evictable += charged
		if charged > 0 && (victim == nil || hs.used.Load() < victim.used.Load()) {
			victim, victimName = hs, name
		}
	}
	if evictable < short {
		victim = nil
	}
	if victim != nil {
		cm.dropHistory(victimName, cm.datasets[victimName])
	}
	cm.dsMu.Unlock()
	if victim == nil {
		return false
	}
	cm.releaseCharge(victim)
	cm.log.Info().Str("dataset", victim.params.Ref.URL()).Str("bucket", victimName).
		Msg("dataset history evicted: the history share of index memory is needed by another bucket's history (it is built again when asked for)")
	return true
}

// retireHistories retires every dataset history (shutdown).
func (cm *Manager) retireHistories() {
	cm.dsMu.Lock()
	defer cm.dsMu.Unlock()
	for name, st := range cm.datasets {
		cm.dropHistory(name, st)
	}
}

// HistoryEntry is a dataset bucket's history on /-/archives.
type HistoryEntry struct {
	Versions    int    `json:"versions"`     // published versions in the history
	KeyVersions int    `json:"key_versions"` // versions and delete markers of every key
	Bytes       int64  `json:"bytes"`        // the history's memory (estimate)
	Ended       string `json:"ended"`        // why it ends where it ends
	Error       string `json:"error,omitempty"`
}

// entry is hs on /-/archives: nil while it is not built (nor failed).
func (hs *historyState) entry() *HistoryEntry {
	select {
	case <-hs.done:
	default:
		return nil
	}
	if hs.err != nil {
		return &HistoryEntry{Error: hs.err.Error()}
	}
	if hs.h == nil {
		return nil
	}
	return &HistoryEntry{Versions: len(hs.h.versions), KeyVersions: hs.h.KeyVersions(), Bytes: hs.h.Bytes(), Ended: hs.h.ended}
}

// historyBuildsMax is how many dataset histories the manager builds at a
// time, across every dataset bucket: each build lists a versions folder
// and holds older versions' indexes (within the index budget) and its
// walk's state (about 240 bytes per key), so many versioned requests for
// many datasets at once queue for a turn (each waiting request gets 503
// SlowDown after the open wait, the build goes on) instead of building
// every history at once.
const historyBuildsMax = 2
