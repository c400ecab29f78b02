package catalog

// A dataset history's build opens its older versions ahead of the merge,
// in the walk's order, at most HistoryParams.Ahead at a time (history.go).

import (
	"context"
	"fmt"
	"sync"

	"github.com/wharf-s3/wharf/archiveview"
)

// historyOpens opens a history's older versions in the walk's order, up
// to HistoryParams.Ahead at a time (historyOpens.ahead), for the merge
// to take one by one (next, then done).
type historyOpens struct {
	p      HistoryParams
	cancel context.CancelFunc
	queue  chan *historyOpen // started opens, in order
	slots  chan struct{}     // one per version held: opening, opened, or being merged
	wg     sync.WaitGroup
}

// historyOpen is one version's open.
type historyOpen struct {
	done chan struct{}
	a    *archiveview.Archive
	err  error
}

// startOpens starts opening chain's versions in the background.
func startOpens(ctx context.Context, p HistoryParams, chain []HistoryVersion) *historyOpens {
	ahead := max(p.Ahead, 1)
	o := &historyOpens{p: p, queue: make(chan *historyOpen, ahead), slots: make(chan struct{}, ahead)}
	ctx, o.cancel = context.WithCancel(ctx)
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer close(o.queue)
		var prev *historyOpen
		for _, v := range chain {
			select {
			case o.slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if prev != nil {
				select {
				case <-prev.done:
					if prev.err != nil {
						return // the walk ends there: open nothing past it
					}
				default: // still opening (Ahead > 1): this one may be discarded
				}
			}
			op := &historyOpen{done: make(chan struct{})}
			prev = op
			o.queue <- op // never blocks: a slot is held per queued open
			held := make(chan struct{})
			var once sync.Once
			mark := func() { once.Do(func() { close(held) }) }
			o.wg.Add(1)
			go func() {
				defer o.wg.Done()
				defer close(op.done)
				defer mark()
				if p.OpenHeld != nil {
					op.a, op.err = p.OpenHeld(ctx, v, mark)
				} else {
					op.a, op.err = p.Open(ctx, v)
				}
			}()
			select {
			case <-held:
			case <-ctx.Done():
				return
			}
		}
	}()
	return o
}

// ahead reports opens more than one at a time.
func (o *historyOpens) ahead() bool { return max(o.p.Ahead, 1) > 1 }

// next waits for the next version's open (k: its place in the chain).
func (o *historyOpens) next(k int) (*archiveview.Archive, error) {
	op, ok := <-o.queue
	if !ok {
		return nil, fmt.Errorf("version %d: not opened: %w", k, context.Canceled)
	}
	<-op.done
	if op.err != nil {
		<-o.slots
	}
	return op.a, op.err
}

// done closes version k's archive after its merge and frees its slot.
func (o *historyOpens) done(_ int, a *archiveview.Archive) {
	o.p.Close(a, false)
	<-o.slots
}

// stop cancels the opens not yet taken and closes what they opened. The
// merge's own archive (taken by next, not yet done) is the caller's.
func (o *historyOpens) stop() {
	o.cancel()
	for op := range o.queue {
		<-op.done
		if op.a != nil {
			o.p.Close(op.a, false)
		}
	}
	o.wg.Wait()
}
