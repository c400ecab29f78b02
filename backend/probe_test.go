package backend_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestProbes: each probe passes against a store that has what it checks
// and fails, naming the store's answer, against one that has not.
func TestProbes(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t, nil)
	f.put(t, "bkt", "obj", []byte("hello"))
	restore405 := func(r faults.HTTPRequest) faults.HTTPFault {
		if r.Method == http.MethodPost {
			return faults.HTTPFault{Action: faults.HTTPError, Status: 405, Code: "MethodNotAllowed"}
		}
		return faults.HTTPFault{}
	}
	unknownKey := func(faults.HTTPRequest) faults.HTTPFault {
		return faults.HTTPFault{Action: faults.HTTPError, Status: 404, Code: "XAdminUserNotFound"}
	}
	ignoreIfMatch := func(r faults.HTTPRequest) faults.HTTPFault { return faults.HTTPFault{} }
	for _, tc := range []struct {
		name  string
		hook  func(faults.HTTPRequest) faults.HTTPFault
		probe func() error
		want  error // nil: passes
	}{
		{"restore: the Glacier model answers NoSuchKey", nil, func() error {
			return backend.ProbeRestore(ctx, faults.NewGlacier(faults.GlacierConfig{}).Store(backend.NewFileStore(t.TempDir())), "bkt")
		}, nil},
		{"restore: gofakes3 answers 405", nil, func() error { return backend.ProbeRestore(ctx, f.store, "bkt") }, backend.ErrNotImplemented},
		{"restore: 405 (SeaweedFS)", restore405, func() error { return backend.ProbeRestore(ctx, f.store, "bkt") }, backend.ErrNotImplemented},
		{"restore: a file store", nil, func() error { return backend.ProbeRestore(ctx, backend.NewFileStore(t.TempDir()), "bkt") }, backend.ErrNotImplemented},
		{"read: ok", nil, func() error { return backend.ProbeRead(ctx, f.store, "bkt") }, nil},
		{"read: unknown access key", unknownKey, func() error { return backend.ProbeRead(ctx, f.store, "bkt") }, backend.ErrRefused},
		{"read: no bucket", nil, func() error { return backend.ProbeRead(ctx, f.store, "nobkt") }, backend.ErrNotFound},
		// gofakes3 ignores If-Match; S3Store's own ETag check refuses.
		{"range+if-match: ok", ignoreIfMatch, func() error { return backend.ProbeRangeIfMatch(ctx, f.store, "bkt", "obj") }, nil},
		{"range+if-match: missing", nil, func() error { return backend.ProbeRangeIfMatch(ctx, f.store, "bkt", "none") }, backend.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.fh.SetHook(tc.hook)
			defer f.fh.SetHook(nil)
			err := tc.probe()
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("probe: %v, want %v", err, tc.want)
			}
		})
	}
}
