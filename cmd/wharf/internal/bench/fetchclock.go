package bench

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// fetchClock is a backend.Store over wharf's backend that times the ranged
// reads of one measured request: when the first response arrived (the
// store returned its headers and body) and when the last body was consumed
// or closed, both from the start set by reset. With the cold-frame
// workload it splits a read into the fetch and what follows it (decode,
// hash, serve), on either S3 model. It does not pass optional capabilities
// (backend.Restorer) through: the workload it serves reads Standard
// objects only.
type fetchClock struct {
	backend.Store
	mu      sync.Mutex
	start   time.Time
	headers time.Duration // first response, 0 = none yet
	done    time.Duration // last body consumed or closed
}

// reset starts a new measurement at t0.
func (c *fetchClock) reset(t0 time.Time) {
	c.mu.Lock()
	c.start, c.headers, c.done = t0, 0, 0
	c.mu.Unlock()
}

// times returns the first response's and the last body's time since the
// start.
func (c *fetchClock) times() (headers, done time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.headers, c.done
}

func (c *fetchClock) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, backend.ObjectInfo, error) {
	rc, info, err := c.Store.ReadRange(ctx, bucket, key, off, length, ifMatch)
	if err != nil {
		return rc, info, err
	}
	c.mu.Lock()
	if d := time.Since(c.start); c.headers == 0 || d < c.headers {
		c.headers = d
	}
	c.mu.Unlock()
	return &clockedBody{ReadCloser: rc, c: c}, info, nil
}

func (c *fetchClock) finished() {
	c.mu.Lock()
	c.done = max(c.done, time.Since(c.start))
	c.mu.Unlock()
}

// clockedBody tells its fetchClock when it ends: at its first error
// (io.EOF included) or its Close, whichever is first.
type clockedBody struct {
	io.ReadCloser
	c     *fetchClock
	ended bool
}

func (b *clockedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.ended {
		b.ended = true
		b.c.finished()
	}
	return n, err
}

func (b *clockedBody) Close() error {
	if !b.ended {
		b.ended = true
		b.c.finished()
	}
	return b.ReadCloser.Close()
}
