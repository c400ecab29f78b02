// Package progress shows how far a long wharf command has got: bytes done
// of a total, the rate, the time left, and a count of items (files,
// chunks). verify, pack, index build and get use it; restore will.
//
// Contract:
//
//   - A Reporter is one command's progress. New starts it; Done ends it.
//   - SetTotal, Add and ItemDone may be called from any goroutine, at any
//     rate: they update atomic counters and never wait for output. Calls
//     after Done are ignored.
//   - A total < 0 is unknown: no percentage and no ETA, only bytes and rate.
//   - Output is drawn by one goroutine of the Reporter, in the Mode chosen
//     (ModeFor picks it):
//     ModeBar: a live line on a terminal, drawn with
//     github.com/schollz/progressbar/v3 and redrawn at most every
//     BarRefresh; Done draws the final state and ends the line.
//     ModeLog: anything else (a log file, CI, a pipe): one zerolog Info
//     line "progress" every Interval (default 5 s) and a last one at Done,
//     each with the fields op, bytes, total, rate (bytes/s, the average
//     since New), eta (seconds, -1 when unknown), elapsed (seconds), and
//     when the Reporter counts items (Options.Items set) items and
//     items_total. The last line's message is "done", or
//     "stopped" when Done is given an error.
//     ModeOff: nothing (--quiet).
//   - Done returns the final Snapshot, so a command can say what was done
//     (and what was left) after a Ctrl-C.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Mode is how a Reporter shows progress.
type Mode int

const (
	ModeOff Mode = iota // nothing
	ModeBar             // a live line on a terminal
	ModeLog             // periodic zerolog lines
)

func (m Mode) String() string {
	switch m {
	case ModeBar:
		return "bar"
	case ModeLog:
		return "log"
	}
	return "off"
}

// ModeFor picks the mode for output w: ModeOff when quiet, ModeBar when w
// is a terminal (and TERM is not "dumb"), ModeLog otherwise.
func ModeFor(w io.Writer, quiet bool) Mode {
	if quiet {
		return ModeOff
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb" {
		return ModeBar
	}
	return ModeLog
}

// DefaultInterval is how often ModeLog writes a line.
const DefaultInterval = 5 * time.Second

// BarRefresh is how often ModeBar redraws its line at most.
const BarRefresh = 150 * time.Millisecond

// Options configure a Reporter.
type Options struct {
	Mode Mode
	// Op names the work ("verify", "get", ...): the bar's label and the log
	// lines' op field.
	Op string
	// Items names what ItemDone counts ("files", "manifests"); "" means
	// the work counts no items (none are shown).
	Items string
	// Out receives the bar (ModeBar); usually os.Stderr.
	Out io.Writer
	// Log receives the lines of ModeLog.
	Log zerolog.Logger
	// Interval is ModeLog's period; <= 0 means DefaultInterval.
	Interval time.Duration
}

// Snapshot is the state of a Reporter at one moment.
type Snapshot struct {
	Bytes, Total      int64 // Total < 0: unknown
	Items, ItemsTotal int64 // ItemsTotal < 0: unknown
	Elapsed           time.Duration
	Rate              float64       // bytes per second, average since New
	ETA               time.Duration // < 0: unknown
}

// Reporter is one command's progress.
type Reporter struct {
	opts  Options
	start time.Time

	bytes, total       atomic.Int64
	items, itemsTotal  atomic.Int64
	done               atomic.Bool
	stop               chan struct{}
	wg                 sync.WaitGroup
	bar                *progressbar.ProgressBar // ModeBar; used by the drawing goroutine, then Done
	barMax, lastDrawn  int64
	lastItems          int64
	descriptionChanged bool
}

// New starts a Reporter. The totals start unknown (SetTotal sets them).
func New(o Options) *Reporter {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	r := &Reporter{opts: o, start: time.Now(), stop: make(chan struct{})}
	r.total.Store(-1)
	r.itemsTotal.Store(-1)
	switch o.Mode {
	case ModeBar:
		r.barMax = -1
		r.bar = r.newBar(-1)
		r.loop(BarRefresh, r.draw)
	case ModeLog:
		r.loop(o.Interval, func() { r.logLine("progress") })
	}
	return r
}

// SetTotal sets the bytes and items the work amounts to (< 0: unknown).
func (r *Reporter) SetTotal(bytes, items int64) {
	r.total.Store(bytes)
	r.itemsTotal.Store(items)
}

// Add records n more bytes done.
func (r *Reporter) Add(n int64) {
	if n != 0 && !r.done.Load() {
		r.bytes.Add(n)
	}
}

// ItemDone records one more item done.
func (r *Reporter) ItemDone() {
	if !r.done.Load() {
		r.items.Add(1)
	}
}

// Snapshot returns the current state.
func (r *Reporter) Snapshot() Snapshot {
	return snapshot(r.bytes.Load(), r.total.Load(), r.items.Load(), r.itemsTotal.Load(), time.Since(r.start))
}

// snapshot derives the rate and the ETA: the rate is the average since the
// start, the ETA the bytes left at that rate; 0 once the total is reached,
// unknown (-1) without a total or before any byte.
func snapshot(bytes, total, items, itemsTotal int64, elapsed time.Duration) Snapshot {
	s := Snapshot{Bytes: bytes, Total: total, Items: items, ItemsTotal: itemsTotal, Elapsed: elapsed, ETA: -1}
	if sec := s.Elapsed.Seconds(); sec > 0 {
		s.Rate = float64(s.Bytes) / sec
	}
	switch {
	case s.Total >= 0 && s.Bytes >= s.Total:
		s.ETA = 0
	case s.Total >= 0 && s.Rate > 0:
		s.ETA = time.Duration(float64(s.Total-s.Bytes) / s.Rate * float64(time.Second))
	}
	return s
}

// Done ends the Reporter: it stops the drawing, shows the final state
// (err != nil: the work stopped early) and returns it. Done is idempotent.
func (r *Reporter) Done(err error) Snapshot {
	if r.done.Swap(true) {
		return r.Snapshot()
	}
	close(r.stop)
	r.wg.Wait()
	s := r.Snapshot()
	switch r.opts.Mode {
	case ModeBar:
		// Reaching the total finishes the bar, which draws the full line
		// and ends it; otherwise Exit keeps the line as it is and ends it.
		r.syncBar(s)
		if !r.bar.IsFinished() {
			r.bar.Exit()
		}
	case ModeLog:
		msg := "done"
		if err != nil {
			msg = "stopped"
		}
		r.logLine(msg)
	}
	return s
}

// loop runs f every d on the Reporter's goroutine until Done.
func (r *Reporter) loop(d time.Duration, f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				f()
			}
		}
	}()
}

func (r *Reporter) logLine(msg string) {
	s := r.Snapshot()
	eta := int64(-1)
	if s.ETA >= 0 {
		eta = int64(s.ETA.Round(time.Second) / time.Second)
	}
	ev := r.opts.Log.Info().Str("op", r.opts.Op).
		Int64("bytes", s.Bytes).Int64("total", s.Total).
		Int64("rate", int64(s.Rate)).Int64("eta", eta).
		Float64("elapsed", s.Elapsed.Round(time.Millisecond).Seconds())
	if r.opts.Items != "" {
		ev = ev.Int64("items", s.Items).Int64("items_total", s.ItemsTotal)
	}
	ev.Msg(msg)
}

// newBar makes the terminal bar for a total (< 0: unknown).
func (r *Reporter) newBar(max int64) *progressbar.ProgressBar {
	out := r.opts.Out
	return progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(out),
		progressbar.OptionSetDescription(r.description(Snapshot{ItemsTotal: r.itemsTotal.Load()})),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetWidth(20),
		progressbar.OptionFullWidth(),
		// No throttle of the library's own: the Reporter's goroutine draws
		// at most every BarRefresh, and Done must draw the final state.
		progressbar.OptionShowCount(),
		progressbar.OptionSpinnerType(14),
		// No spinner goroutine of the library's own: it would draw after
		// Done; the Reporter's goroutine redraws instead.
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(out) }),
	)
}

func (r *Reporter) description(s Snapshot) string {
	if r.opts.Items == "" {
		return r.opts.Op
	}
	if s.ItemsTotal >= 0 {
		return fmt.Sprintf("%s %d/%d %s", r.opts.Op, s.Items, s.ItemsTotal, r.opts.Items)
	}
	if s.Items > 0 {
		return fmt.Sprintf("%s %d %s", r.opts.Op, s.Items, r.opts.Items)
	}
	return r.opts.Op
}

// draw brings the bar up to date (the drawing goroutine only).
func (r *Reporter) draw() { r.syncBar(r.Snapshot()) }

// syncBar sets the bar to s: its total (a bar whose total was unknown is
// replaced once the total is known), its description and its bytes.
func (r *Reporter) syncBar(s Snapshot) {
	max := s.Total
	if max == 0 {
		max = -1 // the library needs a positive total; an empty job has no bar to fill
	}
	if max != r.barMax {
		r.bar.ChangeMax64(max)
		r.barMax = max
	}
	if s.Items != r.lastItems || !r.descriptionChanged {
		r.bar.Describe(r.description(s))
		r.lastItems, r.descriptionChanged = s.Items, true
	}
	if s.Bytes != r.lastDrawn || r.barMax < 0 {
		r.bar.Set64(s.Bytes) // with an unknown total, redraw for the rate
		r.lastDrawn = s.Bytes
	}
}
