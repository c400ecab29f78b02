package chunkio

import (
	"context"
	"errors"
	"sync"
)

// Memo is a value computed once and shared: the read core's one "one
// flight per key, waiters retry" mechanism (a chunk's tar walk, an archive's
// version history; the frame cache keys its flights the same way, see
// FrameCache.get). The zero Memo is ready to use and must not be copied
// after first use.
//
// Do runs fill in the caller's goroutine when nothing is kept and no
// computation is running; concurrent callers wait for that one run instead
// of starting their own. Success is kept for good. A failure is kept only
// when keep says it is lasting (the data itself is bad); other failures
// (a backend hiccup, the filler's context ending) are handed to the callers
// waiting on that run and forgotten, so the next caller tries again. A
// waiter whose run failed only because the filler's context ended, while
// its own is alive, tries again (as often as that happens: its own context
// bounds it).
type Memo[V any] struct {
	mu   sync.Mutex
	kept bool
	v    V
	err  error
	run  *memoRun[V]
}

type memoRun[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// Do returns the kept result, the result of the run in progress, or the
// result of running fill itself. A caller whose ctx ends while it waits
// returns ctx's error (the run goes on for the others).
func (m *Memo[V]) Do(ctx context.Context, fill func(context.Context) (V, error), keep func(error) bool) (V, error) {
	for {
		m.mu.Lock()
		if m.kept {
			v, err := m.v, m.err
			m.mu.Unlock()
			return v, err
		}
		if r := m.run; r != nil {
			m.mu.Unlock()
			select {
			case <-r.done:
			case <-ctx.Done():
				var zero V
				return zero, ctx.Err()
			}
			if r.err != nil && isContextErr(r.err) && ctx.Err() == nil {
				// The filler's context ended, not ours: try again (wait on
				// the next run or run fill), however often, so other
				// callers' cancellations never fail this caller; its own
				// context bounds the wait.
				continue
			}
			return r.v, r.err
		}
		r := &memoRun[V]{done: make(chan struct{})}
		m.run = r
		m.mu.Unlock()

		r.v, r.err = fill(ctx)
		m.mu.Lock()
		m.run = nil
		if r.err == nil || (keep != nil && !isContextErr(r.err) && keep(r.err)) {
			m.kept, m.v, m.err = true, r.v, r.err
		}
		m.mu.Unlock()
		close(r.done)
		return r.v, r.err
	}
}

// Peek returns the kept value, if a run succeeded; it never waits.
func (m *Memo[V]) Peek() (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.kept && m.err == nil {
		return m.v, true
	}
	var zero V
	return zero, false
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// forgetFailure drops a kept failure (a kept success stays), so the next
// Do runs fill again; it reports whether there was one.
func (m *Memo[V]) forgetFailure() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.kept || m.err == nil {
		return false
	}
	var zero V
	m.kept, m.v, m.err = false, zero, nil
	return true
}

// Started reports whether a run is in progress or a result is kept.
func (m *Memo[V]) Started() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kept || m.run != nil
}
