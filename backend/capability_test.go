package backend_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// readOnly hides every optional capability of the store it embeds: it is
// a plain backend.Store.
type readOnly struct{ backend.Store }

// TestAsMatchPutterThroughWrappers: AsPutter and AsMatchPutter answer for a
// wrapper what the store it wraps can do. Instrument and faults.Faulty
// have PutIfMatch methods whatever they wrap; before AsMatchPutter (and
// CanPutIfMatch) the shared index cache asserted the method directly, so an
// instrumented read-only store counted as one that replaces objects. The
// Glacier model passes both writes through to the store it wraps (a
// FileStore here: both). A write through a wrapper whose store cannot is
// ErrNotImplemented, never a silent no-op.
func TestAsMatchPutterThroughWrappers(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bkt"), 0o755); err != nil {
		t.Fatal(err)
	}
	fs := backend.NewFileStore(dir)
	metrics := func() *backend.Metrics { return backend.NewMetrics(prometheus.NewRegistry()) }
	glacier := faults.NewGlacier(faults.GlacierConfig{}).Store(fs)
	for _, tc := range []struct {
		name        string
		store       backend.Store
		puts, match bool
	}{
		{"FileStore", fs, true, true},
		{"Instrument(FileStore)", backend.Instrument(fs, metrics()), true, true},
		{"Faulty(Instrument(FileStore))", faults.NewFaulty(backend.Instrument(fs, metrics()), faults.FaultConfig{}), true, true},
		{"Instrument(Faulty(FileStore))", backend.Instrument(faults.NewFaulty(fs, faults.FaultConfig{}), metrics()), true, true},
		{"read-only", readOnly{fs}, false, false},
		{"Instrument(read-only)", backend.Instrument(readOnly{fs}, metrics()), false, false},
		{"Faulty(read-only)", faults.NewFaulty(readOnly{fs}, faults.FaultConfig{}), false, false},
		{"Instrument(Glacier(FileStore))", backend.Instrument(glacier, metrics()), true, true},
		{"Faulty(Glacier(FileStore))", faults.NewFaulty(glacier, faults.FaultConfig{}), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, puts := backend.AsPutter(tc.store)
			_, match := backend.AsMatchPutter(tc.store)
			if puts != tc.puts || match != tc.match {
				t.Fatalf("AsPutter %v, AsMatchPutter %v; want %v, %v", puts, match, tc.puts, tc.match)
			}
			mp, ok := tc.store.(backend.MatchPutter)
			if !ok || match {
				return
			}
			// The method is there but the capability is not: it refuses.
			_, err := mp.PutIfMatch(context.Background(), "bkt", "k", "etag", bytes.NewReader([]byte("x")), 1)
			if !errors.Is(err, backend.ErrNotImplemented) {
				t.Errorf("PutIfMatch through a wrapper that cannot: %v, want ErrNotImplemented", err)
			}
		})
	}
}
