package catalog

// One open: a manifest opened holding one of OpenConcurrency slots,
// within the open deadline; a discovered or aliased upload's open first
// reserves its index memory (budget.go) and keeps its real index size
// charged until its archive is closed (closeArchive), and a chain's
// version history is charged likewise once built (chargeChainHistory).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// openExtra is what an open adds to the manager's options: key prefixes
// its objects may lie under (a dataset's versions folder), and noClasses
// to list no storage classes (a dataset history's older versions: no
// listing outside a scan); held, if set, is called once the open holds
// its index reservation, or failed to get it (a history's opens ahead
// take their memory in order).
type openExtra struct {
	allow     []string
	noClasses bool
	held      func()
	// hist: an older dataset version opened for this history, also
	// charged to histIndex (and never evicting this history for room).
	hist *historyState
	// charged: an open within the index budget (openReserved), whose
	// chain's version history is charged to it too once built.
	charged bool
}

// indexCharge is what an open archive holds of the index budgets.
type indexCharge struct {
	main, hist int64
}

// openArchive opens one manifest holding an open slot, within the open
// deadline; maxFiles > 0 tightens the manifests' file cap.
func (cm *Manager) openArchive(ctx context.Context, name, bucket, key string, maxFiles int, x openExtra) (*archiveview.Archive, error) {
	select {
	case cm.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-cm.slots }()
	return cm.openInSlot(ctx, name, bucket, key, maxFiles, x)
}

// openInSlot is openArchive for a caller that holds an open slot.
func (cm *Manager) openInSlot(ctx context.Context, name, bucket, key string, maxFiles int, x openExtra) (*archiveview.Archive, error) {
	o := cm.opts
	o.Name = name
	if x.charged {
		o.HistoryMemory = func(ctx context.Context) (archiveview.MemoryCharge, error) {
			return cm.chargeChainHistory(ctx, maxFiles)
		}
	}
	if len(x.allow) > 0 {
		o.AllowKeyPrefixes = append(slices.Clone(o.AllowKeyPrefixes), x.allow...)
	}
	if x.noClasses {
		o.StorageClasses = false
	}
	if maxFiles > 0 {
		o.Limits = o.Limits.WithDefaults()
		o.Limits.MaxFiles = min(o.Limits.MaxFiles, maxFiles)
	}
	octx, cancel := context.WithTimeout(ctx, cm.cfg.OpenTimeout)
	defer cancel()
	a, err := archiveview.Open(octx, cm.store, bucket, key, o)
	if err != nil && ctx.Err() == nil && errors.Is(octx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w after %s (--open-timeout): %w", ErrOpenTimeout, cm.cfg.OpenTimeout, err)
	}
	return a, err
}

// openUpload opens a discovered or aliased upload within the index memory
// budget. The first try reserves for the files a manifest of the listed
// size usually holds (at least minReserveFiles) and caps the manifest's
// files at that; a manifest that lists more is opened again with the
// whole per-upload reservation (MaxFilesPerUpload files, at most the
// budget).
func (cm *Manager) openUpload(ctx context.Context, name, bucket, key string, listed int64, x openExtra) (*archiveview.Archive, error) {
	capAll := cm.uploadFileCap()
	files := int(min(max(listed/storedBytesPerFile, minReserveFiles), int64(capAll)))
	for {
		a, err := cm.openReserved(ctx, name, bucket, key, files, x)
		// The manifest decoder names the MaxFiles cap that stopped it
		// (files, file_paths, deleted_paths, metadata entries) in
		// FilesLimit: retry only when it is the cap this open set.
		var me *manifest.Error
		if err == nil || !errors.Is(err, manifest.ErrTooLarge) || ctx.Err() != nil ||
			!errors.As(err, &me) || me.FilesLimit != files {
			return a, err
		}
		if files >= capAll {
			return nil, fmt.Errorf("%w (a discovered upload may list %d files per manifest and per chain: --max-files-per-upload %d, --index-memory %d at %d bytes per file)",
				err, capAll, cm.cfg.MaxFilesPerUpload, cm.index.limit, IndexBytesPerFile)
		}
		files = capAll
	}
}

// uploadFileCap is the most files a discovered or aliased upload's
// manifest, and its chain together, may list: MaxFilesPerUpload, at most
// what the whole index budget holds at IndexBytesPerFile.
func (cm *Manager) uploadFileCap() int {
	return int(min(int64(cm.cfg.MaxFilesPerUpload), cm.index.limit/IndexBytesPerFile))
}

// openReserved reserves files' index memory (waiting at most the open
// timeout), opens with that file cap, and keeps the archive's real index
// size charged until it is closed.
//
// An upload's open (not a history's) takes its open slot and its memory
// together (slotAndMemory), holding neither while it waits for the other:
// an open queued for a slot holds no memory, so the opens waiting for
// memory wait only for memory in use, never for the opens queued ahead of
// them. A history's older version keeps its order (its share, the
// budget, then a slot: historymgr.go).
func (cm *Manager) openReserved(ctx context.Context, name, bucket, key string, files int, x openExtra) (*archiveview.Archive, error) {
	x.charged = true
	want := int64(files) * IndexBytesPerFile
	if x.hist == nil {
		got, err := cm.slotAndMemory(ctx, want)
		if err := x.reserved(ctx, name, bucket, key, err); err != nil {
			return nil, err
		}
		a, err := cm.openInSlot(ctx, name, bucket, key, files, x)
		<-cm.slots
		if err != nil {
			cm.index.release(got)
			return nil, err
		}
		cm.charge(a, indexCharge{main: cm.index.adjust(got, indexHeap(a))})
		return a, nil
	}
	wctx, cancel := context.WithTimeout(ctx, cm.cfg.OpenTimeout)
	// The history's share first, then the whole budget: always in that
	// order, so no open holds the budget while it waits for the share.
	hist, err := cm.reserveHistoryShare(wctx, want, x.hist)
	var got int64
	if err == nil {
		got, err = cm.index.reserve(wctx, want)
		if err != nil {
			cm.histIndex.release(hist)
		}
	}
	cancel()
	if err := x.reserved(ctx, name, bucket, key, err); err != nil {
		return nil, err
	}
	a, err := cm.openArchive(ctx, name, bucket, key, files, x)
	if err != nil {
		cm.index.release(got)
		cm.histIndex.release(hist)
		return nil, err
	}
	heap := indexHeap(a)
	// At least a little per open version: an index served in place is
	// still a version held open (its file, its chunk state).
	cm.charge(a, indexCharge{main: cm.index.adjust(got, heap), hist: cm.histIndex.adjust(hist, max(heap, minHistoryCharge))})
	return a, nil
}

// reserved ends an open's wait for its index memory, err its outcome: it
// calls x.held, and returns nil, ctx's error once ctx has ended, or err
// naming the archive and its manifest.
func (x openExtra) reserved(ctx context.Context, name, bucket, key string, err error) error {
	if x.held != nil {
		x.held()
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("archive %q: manifest s3://%s/%s: %w", name, bucket, key, err)
}

// indexHeap is the index memory open archive a holds: its index's heap,
// nothing for an index served from its file in place, and the storage
// class and restore state of its chunks (Info.StorageStateBytes, kept on
// the heap either way).
func indexHeap(a *archiveview.Archive) int64 {
	info := a.Info()
	if !info.IndexInPlace {
		return info.IndexBytes + info.StorageStateBytes
	}
	return info.StorageStateBytes
}

// charge records what open archive a holds of the index budgets,
// returned when it is closed (closeArchive).
func (cm *Manager) charge(a *archiveview.Archive, c indexCharge) {
	cm.chargeMu.Lock()
	cm.charged[a] = c
	cm.chargeMu.Unlock()
}

// slotAndMemory takes an open slot and n bytes of the index budget (at
// most its limit) together and returns the bytes taken; the caller
// releases the slot. It holds neither while it waits for the other: with
// a slot and not the memory it gives the slot back and waits for the
// budget to shrink, then queues for a slot again. The memory waits end
// OpenTimeout after the first (an error wrapping ErrIndexMemory); the
// slot waits end with ctx, as openArchive's.
func (cm *Manager) slotAndMemory(ctx context.Context, n int64) (int64, error) {
	var deadline <-chan time.Time
	for {
		select {
		case cm.slots <- struct{}{}:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		got, ok, changed, used := cm.index.take(n)
		if ok {
			return got, nil
		}
		<-cm.slots
		if deadline == nil {
			t := time.NewTimer(cm.cfg.OpenTimeout)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-changed:
		case <-deadline:
			return 0, fmt.Errorf("%w: waited %s (--open-timeout) for %d bytes of %s (%d, %d in use)",
				ErrIndexMemory, cm.cfg.OpenTimeout, got, cm.index.what, cm.index.limit, used)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// minHistoryCharge is the least an open older dataset version holds of
// the history's share of index memory, whatever its index heap.
const minHistoryCharge = int64(minReserveFiles) * IndexBytesPerFile / 16

// closeArchive closes a and returns its index memory.
func (cm *Manager) closeArchive(a *archiveview.Archive) {
	_ = a.Close()
	cm.chargeMu.Lock()
	c, ok := cm.charged[a]
	delete(cm.charged, a)
	cm.chargeMu.Unlock()
	if ok {
		cm.releaseIndex(c)
	}
}

// chargeChainHistory is the archives' Options.HistoryMemory: building a
// chain's version history re-reads the chain's manifests under the file
// cap its archive was opened with (files), so it first reserves what that
// open did (files at IndexBytesPerFile, waiting at most the open
// timeout); once built the charge becomes the history's size, held in
// --index-memory until its archive is closed. A failure wraps
// ErrIndexMemory and ErrUnavailable (503 SlowDown; the next versioned
// request tries again).
func (cm *Manager) chargeChainHistory(ctx context.Context, files int) (archiveview.MemoryCharge, error) {
	if files <= 0 {
		files = cm.uploadFileCap()
	}
	wctx, cancel := context.WithTimeout(ctx, cm.cfg.OpenTimeout)
	defer cancel()
	got, err := cm.index.reserve(wctx, int64(files)*IndexBytesPerFile)
	if err != nil {
		if ctx.Err() == nil {
			// The wait's own deadline, not the request's end: no context
			// error in the chain, or the history's Memo would take it for
			// its filler's request ending and have each waiter in turn
			// wait the open timeout again.
			used, _ := cm.index.state()
			return nil, fmt.Errorf("%w: waited %s (--open-timeout) for %d bytes of %s to build a version history (%d, %d in use): %w",
				ErrIndexMemory, cm.cfg.OpenTimeout, min(int64(files)*IndexBytesPerFile, cm.index.limit), cm.index.what, cm.index.limit, used, backend.ErrUnavailable)
		}
		return nil, fmt.Errorf("%w: %w", err, backend.ErrUnavailable)
	}
	return &budgetCharge{b: cm.index, n: got}, nil
}

// releaseIndex returns charge c to the index budgets.
func (cm *Manager) releaseIndex(c indexCharge) {
	cm.index.release(c.main)
	cm.histIndex.release(c.hist)
}

// IndexMemory returns the index memory discovered uploads hold (open or
// reserved by an open in flight), the most they ever held, and the budget.
func (cm *Manager) IndexMemory() (used, peak, limit int64) {
	used, peak = cm.index.state()
	return used, peak, cm.index.limit
}
