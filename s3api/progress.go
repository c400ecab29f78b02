package s3api

import (
	"context"
	"net/http"
	"time"
)

// progressStep is the most one write hands the connection under one
// deadline: a cached frame slice (or an admin page, a goroutine dump) can
// be many MiB, and a client reading it slowly but steadily makes progress
// that a single deadline over the whole slice would not see.
const progressStep = 256 << 10

// ProgressWriter gives a response a progress deadline (Config.SendTimeout,
// the admin listener's --send-timeout): before the header, before every
// write and before each progressStep bytes of a larger write, the write
// deadline is moved to Timeout from now (http.ResponseController's
// SetWriteDeadline: the connection's on HTTP/1.1, the stream's on
// HTTP/2). A client that keeps reading is never cut off, however large
// one write is; one that takes nothing for Timeout fails the write, and
// OnFail (if set) is called. The one place of this rule: the S3
// handler's writer and WithProgressDeadline both use it.
//
// Timeout 0 sets no deadline. A writer that takes none (a test recorder)
// is written to as is.
type ProgressWriter struct {
	http.ResponseWriter
	Timeout time.Duration
	OnFail  func() // a write or flush failed (nil: nothing to do)

	rc  *http.ResponseController
	off bool // no deadline: Timeout is 0, or the writer refused one
}

// extend moves the deadline to Timeout from now: the client took
// everything written before, which is progress.
func (w *ProgressWriter) extend() {
	if w.off {
		return
	}
	if w.Timeout <= 0 {
		w.off = true
		return
	}
	if err := w.controller().SetWriteDeadline(time.Now().Add(w.Timeout)); err != nil {
		w.off = true
	}
}

// WriteHeader sets the deadline and sends the header.
func (w *ProgressWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

// Write writes p in steps of at most progressStep bytes, each under a
// deadline of its own.
func (w *ProgressWriter) Write(p []byte) (int, error) { return w.write(p, true) }

// write is Write; extendFirst false skips setting the deadline before the
// first step (the header was sent just now, under a fresh one).
func (w *ProgressWriter) write(p []byte, extendFirst bool) (int, error) {
	if extendFirst {
		w.extend()
	}
	if w.off || len(p) <= progressStep {
		n, err := w.ResponseWriter.Write(p)
		if err != nil {
			w.failed()
		}
		return n, err
	}
	total := 0
	for len(p) > 0 {
		step := min(len(p), progressStep)
		if total > 0 {
			w.extend()
		}
		n, err := w.ResponseWriter.Write(p[:step])
		total += n
		if err != nil {
			w.failed()
			return total, err
		}
		p = p[step:]
	}
	return total, nil
}

// Flush keeps http.Flusher for handlers that flush (promhttp, pprof).
func (w *ProgressWriter) Flush() {
	w.extend()
	if err := w.controller().Flush(); err != nil && err != http.ErrNotSupported {
		w.failed()
	}
}

// controller is the writer's http.ResponseController, made on first use.
func (w *ProgressWriter) controller() *http.ResponseController {
	if w.rc == nil {
		w.rc = http.NewResponseController(w.ResponseWriter)
	}
	return w.rc
}

func (w *ProgressWriter) failed() {
	if w.OnFail != nil {
		w.OnFail()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *ProgressWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// WithProgressDeadline gives every response of h a ProgressWriter of
// timeout d whose failed write cancels the request's context, so a
// handler waiting on it (the pprof profile and trace handlers sleep on
// it) ends at once: the admin listener's responses get the S3 listener's
// rule. Without it a stalled reader of /debug/pprof/trace held the tracer
// and let the runtime's trace buffers grow for as long as the trace ran.
func WithProgressDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		h.ServeHTTP(&ProgressWriter{ResponseWriter: w, Timeout: d, OnFail: cancel}, r.WithContext(ctx))
	})
}
