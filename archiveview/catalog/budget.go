package catalog

// The index memory budget of discovered uploads.
//
// An open of a discovered (or aliased) upload first reserves the memory
// its index may take while it is built, waiting (up to its open deadline)
// while the budget is used, and opens with a file cap that keeps it within
// that reservation. Once open, the reservation becomes the archive's real
// index size (its heap; nearly nothing for an index served from its file in
// place), plus the storage state of its chunks when classes are learned
// (archiveview.Info.StorageStateBytes), and is held until the archive is
// closed; a failed open returns it
// at once. An incremental chain's version history (built on its first
// versioned request) is charged too once built, until the archive is
// closed (chargeChainHistory). Configured archives (--archive) are not
// charged: they are
// opened before serving, and a failure there is fatal anyway.

import (
	"context"
	"fmt"
	"sync"
)

// DefaultIndexMemory is Config.IndexMemory's default: the index heap all
// discovered uploads may hold together.
const DefaultIndexMemory int64 = 1 << 30

// DefaultMaxFilesPerUpload is Config.MaxFilesPerUpload's default: files one
// manifest of a discovered upload may list.
const DefaultMaxFilesPerUpload = 5_000_000

// IndexBytesPerFile is what an open reserves per file it may list: the
// index is about 90 bytes per file with paths of ~32 bytes (measured:
// 45,032,352 bytes for 500,000 one-byte files), and building it from the
// manifest peaks at about 1.5 times that. Longer paths cost their extra
// bytes on top; the reservation becomes the real size once open.
const IndexBytesPerFile = 160

// minReserveFiles is the fewest files an open reserves for (small
// manifests open with this cap, so a tiny manifest is never refused).
const minReserveFiles = 16 << 10

// storedBytesPerFile is the stored (gzip) manifest bytes per file the first
// reservation assumes: measured, CargoShip's entries (path, times, a
// sha256) take 13 bytes each gzipped, and entries without checksums 10.8.
// A manifest that compresses better fails its first try on the file cap
// and is opened again with the whole per-upload reservation.
const storedBytesPerFile = 8

// historyIndexShare: the older versions a dataset bucket opens for its
// history (the build and versionId= reads, open or retiring after a
// read) hold together at most 1/historyIndexShare of --index-memory, or
// one version when a single one needs more (an open of a bucket's own
// older version may also use what that bucket's built history holds of
// the share: reserveHistoryShare); past it their opens wait
// (up to the open deadline, then 503 SlowDown), so that one client
// cycling through old versions cannot take the index memory the served
// versions and new uploads need.
const historyIndexShare = 4

// indexBudget is a byte budget with waits that end with the caller's
// context. It is safe for concurrent use.
type indexBudget struct {
	limit int64
	what  string // the budget, as its error names it

	mu      sync.Mutex
	used    int64
	changed chan struct{} // closed and replaced whenever used shrinks
	peak    int64
}

func newIndexBudget(limit int64, what string) *indexBudget {
	return &indexBudget{limit: limit, what: what, changed: make(chan struct{})}
}

// reserve takes n bytes (at most the whole limit), waiting while the
// budget cannot hold them, until ctx ends (then an error naming the
// budget). It returns what it took.
func (b *indexBudget) reserve(ctx context.Context, n int64) (int64, error) {
	return b.reserveFreeing(ctx, n, nil, nil)
}

// reserveFreeing is reserve that, each time the budget cannot hold the
// bytes, first calls free (if set) with how many are missing: true when
// it freed some (try again at once), false to wait for the budget.
// over, if set, is how many bytes this reservation may take beyond the
// limit (asked again at each try).
func (b *indexBudget) reserveFreeing(ctx context.Context, n int64, over func() int64, free func(short int64) bool) (int64, error) {
	for {
		var extra int64
		if over != nil {
			extra = max(over(), 0)
		}
		got, ok, ch, used := b.takeOver(n, extra)
		if ok {
			return got, nil
		}
		if free != nil && free(used+got-b.limit-extra) {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: waited for %d bytes of %s (%d, %d in use): %w",
				ErrIndexMemory, got, b.what, b.limit, used, ctx.Err())
		}
	}
}

// take is the budget's one rule: n bytes, capped at the whole limit, are
// taken if they fit now. Else it returns the capped n, false, the channel
// that is closed when the budget next shrinks (read under the same lock
// as the check, so no release is missed) and the bytes in use.
func (b *indexBudget) take(n int64) (got int64, ok bool, changed chan struct{}, used int64) {
	return b.takeOver(n, 0)
}

// takeOver is take with extra bytes allowed beyond the limit.
func (b *indexBudget) takeOver(n, extra int64) (got int64, ok bool, changed chan struct{}, used int64) {
	n = min(max(n, 0), b.limit)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit+extra {
		return n, false, b.changed, b.used
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return n, true, nil, b.used
}

// adjust changes a reservation of had bytes to want (an open archive's
// real index size, which may exceed what was reserved: it is charged
// whole, and later opens wait for it) and returns want.
func (b *indexBudget) adjust(had, want int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += want - had
	b.peak = max(b.peak, b.used)
	if want < had {
		close(b.changed)
		b.changed = make(chan struct{})
	}
	return want
}

// release returns n reserved bytes.
func (b *indexBudget) release(n int64) { b.adjust(n, 0) }

// state returns the bytes in use and the most ever in use.
func (b *indexBudget) state() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// budgetCharge is bytes of an index budget held by a MemoryCharge.
type budgetCharge struct {
	b    *indexBudget
	mu   sync.Mutex
	n    int64
	done bool
}

func (c *budgetCharge) Settle(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		c.n = c.b.adjust(c.n, max(n, 0))
	}
}

func (c *budgetCharge) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		c.done = true
		c.b.release(c.n)
	}
}
