package catalog

// The queue of background opens: the uploads a scan finds are as many as
// uploaders write, and each waits in the queue, not on a goroutine of its
// own.

import "sync"

// openQueue runs queued funcs in order on at most max goroutines, started
// as funcs are added and ending when the queue is empty.
type openQueue struct {
	max int

	mu      sync.Mutex
	queue   []func()
	workers int
}

// add queues f, starting a goroutine to run the queue when fewer than max
// run it.
func (q *openQueue) add(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, f)
	if q.workers < q.max {
		q.workers++
		go q.work()
	}
}

// work runs queued funcs until the queue is empty.
func (q *openQueue) work() {
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.workers--
			q.mu.Unlock()
			return
		}
		f := q.queue[0]
		q.queue[0] = nil
		q.queue = q.queue[1:]
		q.mu.Unlock()
		f()
	}
}

// enqueue runs open in the background, in order, on at most
// OpenConcurrency goroutines (cm.opens), counted in cm.jobs until it
// returns. An open whose entry was retired while queued runs with its
// context cancelled and ends at once.
func (cm *Manager) enqueue(open func()) {
	cm.jobs.Add(1)
	cm.opens.add(func() {
		open()
		cm.jobs.Done()
	})
}
