package backend_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestS3ClockSkew: a store answering 403 RequestTimeTooSkewed (this
// server's clock or the store's is wrong: every request fails the same way
// until an operator fixes a clock) fails with ErrAccessDenied and
// ErrClockSkew, never ErrUnavailable (which clients are told to retry, 503
// SlowDown, for as long as the misconfiguration lasts); the error names
// the cause, every such request is counted in
// wharf_backend_clock_skew_errors_total, and the hook that logs it is told
// once for a burst, not once per request. (A HEAD has no body, so its
// 403 names no code: a skewed Stat is access denied, as before.)
func TestS3ClockSkew(t *testing.T) {
	f := newFakeS3(t, func(c *backend.S3Config) { c.MaxRetries = 2 })
	f.put(t, "bkt", "k", []byte("hello"))
	f.fh.SetHook(func(faults.HTTPRequest) faults.HTTPFault {
		return faults.HTTPFault{Action: faults.HTTPError, Status: 403, Code: "RequestTimeTooSkewed"}
	})
	reg := prometheus.NewRegistry()
	m := backend.NewMetrics(reg)
	var told []error
	m.LogClockSkew(func(err error, refused int64) { told = append(told, err) })
	st := backend.Instrument(f.store, m)
	ctx := context.Background()
	for i := range 5 {
		f.fh.Reset()
		_, _, err := st.Get(ctx, "bkt", "k")
		backend.WantErr(t, err, backend.ErrAccessDenied, "bkt", "k")
		if !errors.Is(err, backend.ErrClockSkew) {
			t.Errorf("get %d: %v, want it to wrap ErrClockSkew", i, err)
		}
		if backend.IsRetryable(err) || errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("get %d: a clock skew is retryable (store unavailable): %v", i, err)
		}
		if s := err.Error(); !strings.Contains(s, "RequestTimeTooSkewed") || !strings.Contains(s, "clock") {
			t.Errorf("get %d: error %q does not name the cause (RequestTimeTooSkewed, the clocks)", i, s)
		}
		if n := len(f.fh.Log()); n != 1 {
			t.Errorf("get %d: %d requests to the store, want 1 (not retried)", i, n)
		}
	}
	f.fh.SetHook(nil)
	if got := testutil.ToFloat64(m.ClockSkewCounter()); got != 5 {
		t.Errorf("wharf_backend_clock_skew_errors_total = %v, want 5", got)
	}
	if len(told) != 1 {
		t.Errorf("the log hook was told %d times for a burst of 5, want once", len(told))
	}
}
