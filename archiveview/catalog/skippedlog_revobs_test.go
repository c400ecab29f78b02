package catalog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/backend"
)

// lockedLog is a log buffer safe for concurrent writes.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns what was logged since the last take.
func (l *lockedLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

// TestSkippedLogBounded: what discovery skips is an uploader's choice (any
// number of manifest-named objects in the wrong place, one writer
// heartbeat per writer), and the scan logged one warning per skipped
// object at every rescan (--rescan 1m: the same thousands of lines every
// minute), and /-/archives (no authentication) listed them all, encoded
// whole in memory per request. A skipped object is now logged once, by
// the first scan that skips it, at most 100 lines a scan and a line
// counting the rest; the page lists at most 1000, with skipped_total.
func TestSkippedLogBounded(t *testing.T) {
	dir := t.TempDir()
	const junk = 1100
	for i := range junk {
		p := filepath.Join(dir, "lake", "base", fmt.Sprintf("junk%04d", i), "x", "manifest.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, wait := range []bool{true, false} {
		t.Run(fmt.Sprintf("WaitOpen=%v", wait), func(t *testing.T) {
			logs := &lockedLog{}
			cm := catalog.NewManager(catalog.Config{Store: backend.NewFileStore(dir), Discover: []string{"s3://lake/base"},
				WaitOpen: wait, RetireGrace: time.Hour, Logger: zerolog.New(logs)})
			defer cm.CloseAll()
			count := func(s string) int { return strings.Count(s, `"message":"discovery skipped"`) }
			if err := cm.Scan(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); !cm.Ready(); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the start's scan never settled")
				}
			}
			first := logs.take()
			if n := count(first); n == 0 || n > 100 {
				t.Errorf("the first scan logged %d 'discovery skipped' lines for %d skipped objects, want 1 to 100", n, junk)
			}
			if !strings.Contains(first, `"not_logged":1000`) {
				t.Errorf("the first scan does not say how many skipped objects it did not log one by one (not_logged 1000):\n%.2000s", first)
			}
			if err := cm.Scan(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			if n := count(logs.take()); n != 0 {
				t.Errorf("a rescan finding the same skipped objects logged %d 'discovery skipped' lines again, want 0", n)
			}
			p := cm.Page()
			if len(p.Skipped) > 1000 || p.SkippedTotal != junk {
				t.Errorf("/-/archives lists %d skipped objects (skipped_total %d), want at most 1000 and the total %d", len(p.Skipped), p.SkippedTotal, junk)
			}
		})
	}
}

// TestFailedOpenLogOnce: every scan logged an error line for each bucket
// whose archive failed to open, the same line again at every --rescan for
// as long as the upload stays broken (an uploader's choice: one line per
// broken upload per rescan). A failure is now logged when it is new (the
// bucket did not fail with the same error at the last settled scan), at
// most 100 a scan and a line counting the rest; the scan's summary still
// counts every failure ("failed").
func TestFailedOpenLogOnce(t *testing.T) {
	dir := t.TempDir()
	const broken = 120
	for i := range broken {
		p := filepath.Join(dir, "lake", "base", "uploads", fmt.Sprintf("up%04d", i), "manifest.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("not a manifest"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs := &lockedLog{}
	cm := catalog.NewManager(catalog.Config{Store: backend.NewFileStore(dir), Discover: []string{"s3://lake/base"},
		WaitOpen: true, RetireGrace: time.Hour, Logger: zerolog.New(logs)})
	defer cm.CloseAll()
	count := func(s string) int {
		return strings.Count(s, `"message":"archive could not be opened; its bucket answers this error"`)
	}
	if err := cm.Scan(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	first := logs.take()
	if n := count(first); n == 0 || n > 100 {
		t.Errorf("the first scan logged %d failed-open lines for %d broken uploads, want 1 to 100", n, broken)
	}
	if !strings.Contains(first, `"not_logged":20`) || !strings.Contains(first, `"failed":120`) {
		t.Errorf("the first scan does not count the failures it did not log (not_logged 20, failed 120):\n%.3000s", first)
	}
	if err := cm.Scan(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	again := logs.take()
	if n := count(again); n != 0 {
		t.Errorf("a rescan meeting the same failures logged %d failed-open lines again, want 0", n)
	}
	if !strings.Contains(again, `"failed":120`) {
		t.Errorf("the rescan's summary does not count the failures:\n%.3000s", again)
	}
}
