package progress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/rs/zerolog"
)

func TestSnapshotMath(t *testing.T) {
	for _, c := range []struct {
		name                string
		bytes, total        int64
		elapsed             time.Duration
		wantRate            float64
		wantETA             time.Duration
		wantUnknownETA      bool
		items, itemsTotal   int64
		wantItemsTotalKnown bool
	}{
		{name: "half way", bytes: 50, total: 100, elapsed: 10 * time.Second, wantRate: 5, wantETA: 10 * time.Second},
		{name: "done", bytes: 100, total: 100, elapsed: 4 * time.Second, wantRate: 25, wantETA: 0},
		{name: "nothing yet", bytes: 0, total: 100, elapsed: time.Second, wantRate: 0, wantUnknownETA: true},
		{name: "unknown total", bytes: 30, total: -1, elapsed: 3 * time.Second, wantRate: 10, wantUnknownETA: true},
		{name: "empty job", bytes: 0, total: 0, elapsed: time.Second, wantRate: 0, wantETA: 0},
		{name: "no time", bytes: 10, total: 100, elapsed: 0, wantRate: 0, wantUnknownETA: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := snapshot(c.bytes, c.total, 1, 2, c.elapsed)
			if s.Rate != c.wantRate {
				t.Errorf("rate %v, want %v", s.Rate, c.wantRate)
			}
			if c.wantUnknownETA {
				if s.ETA >= 0 {
					t.Errorf("ETA %v, want unknown", s.ETA)
				}
			} else if s.ETA != c.wantETA {
				t.Errorf("ETA %v, want %v", s.ETA, c.wantETA)
			}
			if s.Items != 1 || s.ItemsTotal != 2 || s.Bytes != c.bytes || s.Total != c.total {
				t.Errorf("counters not carried: %+v", s)
			}
		})
	}
}

func TestModeFor(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if m := ModeFor(w, false); m != ModeLog {
		t.Errorf("pipe: %v, want log", m)
	}
	if m := ModeFor(&bytes.Buffer{}, false); m != ModeLog {
		t.Errorf("buffer: %v, want log", m)
	}
	if m := ModeFor(w, true); m != ModeOff {
		t.Errorf("quiet: %v, want off", m)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	t.Setenv("TERM", "xterm")
	if m := ModeFor(tty, false); m != ModeBar {
		t.Errorf("pseudo-terminal: %v, want bar", m)
	}
	if m := ModeFor(tty, true); m != ModeOff {
		t.Errorf("pseudo-terminal, quiet: %v, want off", m)
	}
	t.Setenv("TERM", "dumb")
	if m := ModeFor(tty, false); m != ModeLog {
		t.Errorf("TERM=dumb: %v, want log", m)
	}
}

// logLines parses zerolog JSON lines.
func logLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for the Reporter's goroutine and the
// test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// TestLogMode: periodic lines while the work runs, then a final "done"
// line with every field.
func TestLogMode(t *testing.T) {
	var buf syncBuffer
	r := New(Options{Mode: ModeLog, Op: "verify", Items: "files", Log: zerolog.New(&buf), Interval: 20 * time.Millisecond})
	r.SetTotal(1000, 10)
	for i := 0; i < 10; i++ {
		r.Add(100)
		r.ItemDone()
		time.Sleep(15 * time.Millisecond)
	}
	s := r.Done(nil)
	if s.Bytes != 1000 || s.Items != 10 || s.ETA != 0 {
		t.Fatalf("final snapshot %+v", s)
	}
	lines := logLines(t, buf.Bytes())
	if len(lines) < 3 {
		t.Fatalf("%d log lines, want periodic lines and a final one:\n%s", len(lines), buf.Bytes())
	}
	for _, l := range lines[:len(lines)-1] {
		if l["message"] != "progress" || l["op"] != "verify" {
			t.Errorf("periodic line %v", l)
		}
	}
	last := lines[len(lines)-1]
	want := map[string]any{"message": "done", "op": "verify", "bytes": 1000.0, "total": 1000.0, "eta": 0.0, "items": 10.0, "items_total": 10.0}
	for k, v := range want {
		if last[k] != v {
			t.Errorf("final line %s = %v, want %v (%v)", k, last[k], v, last)
		}
	}
	if rate, _ := last["rate"].(float64); rate <= 0 {
		t.Errorf("final rate %v", last["rate"])
	}
	if el, _ := last["elapsed"].(float64); el <= 0 {
		t.Errorf("final elapsed %v", last["elapsed"])
	}
	// A middle line has a known ETA > 0 (work left, a rate).
	mid := lines[len(lines)/2]
	if eta, _ := mid["eta"].(float64); mid["bytes"].(float64) < 1000 && eta < 0 {
		t.Errorf("mid-way line has no ETA: %v", mid)
	}
	// Nothing after Done.
	n := len(buf.Bytes())
	r.Add(5)
	time.Sleep(60 * time.Millisecond)
	if len(buf.Bytes()) != n || r.Snapshot().Bytes != 1000 {
		t.Error("the reporter wrote or counted after Done")
	}
}

func TestLogModeStopped(t *testing.T) {
	var buf syncBuffer
	r := New(Options{Mode: ModeLog, Op: "get", Items: "files", Log: zerolog.New(&buf), Interval: time.Hour})
	r.SetTotal(500, -1)
	r.Add(200)
	s := r.Done(context.Canceled)
	if s.Bytes != 200 {
		t.Fatalf("bytes %d", s.Bytes)
	}
	lines := logLines(t, buf.Bytes())
	if len(lines) != 1 || lines[0]["message"] != "stopped" || lines[0]["bytes"] != 200.0 || lines[0]["items_total"] != -1.0 {
		t.Fatalf("lines %v", lines)
	}
}

func TestOffMode(t *testing.T) {
	var out, log syncBuffer
	r := New(Options{Mode: ModeOff, Op: "x", Out: &out, Log: zerolog.New(&log), Interval: time.Millisecond})
	r.SetTotal(10, 1)
	r.Add(10)
	time.Sleep(10 * time.Millisecond)
	if s := r.Done(nil); s.Bytes != 10 {
		t.Fatalf("bytes %d", s.Bytes)
	}
	if len(out.Bytes())+len(log.Bytes()) != 0 {
		t.Fatalf("quiet reporter wrote %q %q", out.Bytes(), log.Bytes())
	}
}

var (
	rateRE = regexp.MustCompile(`[0-9.]+ (B|KiB|MiB)/s`)
	etaRE  = regexp.MustCompile(`\[[0-9a-z.]+:[0-9a-z.]+\]`)
)

// TestBarMode draws into a buffer: redrawn lines (carriage returns) with
// the op, the items, bytes of the total, a rate and elapsed:ETA, and the
// final line ends with a newline; nothing is drawn after Done.
func TestBarMode(t *testing.T) {
	for _, c := range []struct {
		name  string
		total int64
		err   error
	}{
		{"complete", 64 << 10, nil},
		{"stopped", 64 << 10, context.Canceled},
		{"unknown total", -1, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf syncBuffer
			r := New(Options{Mode: ModeBar, Op: "get", Items: "files", Out: &buf})
			r.SetTotal(c.total, 4)
			n := 4
			if c.err != nil {
				n = 2
			}
			for i := 0; i < n; i++ {
				r.Add(16 << 10)
				r.ItemDone()
				time.Sleep(BarRefresh + 30*time.Millisecond)
			}
			r.Done(c.err)
			out := string(buf.Bytes())
			if !strings.Contains(out, "\r") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
				t.Errorf("not one redrawn line ending in a newline: %q", out)
			}
			last := out[strings.LastIndex(strings.TrimSuffix(out, "\n"), "\r")+1:]
			if !strings.Contains(last, "get ") || !strings.Contains(last, "files") {
				t.Errorf("last line lacks op and items: %q", last)
			}
			if !rateRE.MatchString(out) {
				t.Errorf("no rate drawn: %q", out)
			}
			if c.total > 0 {
				if !strings.Contains(out, "/64 KiB") || !etaRE.MatchString(out) {
					t.Errorf("no bytes of total or elapsed:ETA drawn: %q", out)
				}
			}
			if c.err == nil && c.total > 0 && !strings.Contains(last, "100%") {
				t.Errorf("complete bar's last line is not 100%%: %q", last)
			}
			if c.err != nil && !strings.Contains(last, "50%") {
				t.Errorf("stopped bar's last line is not at 50%%: %q", last)
			}
			k := len(buf.Bytes())
			time.Sleep(3 * BarRefresh)
			if len(buf.Bytes()) != k {
				t.Errorf("bar drawn after Done: %q", buf.Bytes()[k:])
			}
		})
	}
}

// TestBarOnPseudoTerminal draws the bar on a real pseudo-terminal, read
// back from its master side.
func TestBarOnPseudoTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(ptmx) // ends with EIO once the slave side is closed
		got <- b
	}()
	t.Setenv("TERM", "xterm")
	mode := ModeFor(tty, false)
	if mode != ModeBar {
		t.Fatalf("mode %v on a pseudo-terminal", mode)
	}
	r := New(Options{Mode: mode, Op: "verify", Items: "files", Out: tty})
	r.SetTotal(1<<20, 2)
	for i := 0; i < 4; i++ {
		r.Add(256 << 10)
		time.Sleep(BarRefresh + 20*time.Millisecond)
	}
	r.ItemDone()
	r.ItemDone()
	r.Done(nil)
	tty.Close()
	out := string(<-got)
	for _, want := range []string{"verify 2/2 files", "100%", "1.0 MiB", "/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal shows no %q: %q", want, out)
		}
	}
	if !etaRE.MatchString(out) {
		t.Errorf("terminal shows no elapsed:ETA: %q", out)
	}
}

// TestConcurrentAdds: counters are exact under concurrent callers (run
// with -race).
func TestConcurrentAdds(t *testing.T) {
	var buf syncBuffer
	r := New(Options{Mode: ModeBar, Op: "x", Out: &buf})
	r.SetTotal(8*1000*3, 8000)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				r.Add(3)
				r.ItemDone()
			}
		}()
	}
	wg.Wait()
	if s := r.Done(nil); s.Bytes != 24000 || s.Items != 8000 {
		t.Fatalf("%+v", s)
	}
}

// TestNoItems: a Reporter without Options.Items shows no item counts.
func TestNoItems(t *testing.T) {
	var log, bar syncBuffer
	r := New(Options{Mode: ModeLog, Op: "pack", Log: zerolog.New(&log)})
	r.SetTotal(10, -1)
	r.Add(10)
	r.Done(nil)
	lines := logLines(t, log.Bytes())
	if _, ok := lines[0]["items"]; ok || len(lines) != 1 {
		t.Errorf("log line has items: %v", lines)
	}
	b := New(Options{Mode: ModeBar, Op: "pack", Out: &bar})
	b.SetTotal(10, -1)
	b.Add(10)
	b.Done(nil)
	if out := string(bar.Bytes()); !strings.Contains(out, "pack 100%") || strings.Contains(out, "items") {
		t.Errorf("bar %q", out)
	}
}
