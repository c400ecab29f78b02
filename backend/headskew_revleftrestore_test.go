package backend_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wharf-s3/wharf/backend"
)

// skewedS3 is an S3 server whose clock is ahead of ours by ahead: like S3,
// it refuses a request signed (X-Amz-Date) more than 15 minutes from its
// clock with 403, which for a HEAD has no body and so no code, and sends
// its clock in Date. age sends an Age header, with which the SDK does not
// trust Date to correct its clock (a cached answer). deny refuses every
// HEAD with 403 (a missing permission).
func skewedS3(t *testing.T, ahead time.Duration, age, deny bool) (*backend.S3Store, *atomic.Int64) {
	t.Helper()
	var heads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().Add(ahead).UTC()
		w.Header().Set("Date", now.Format(http.TimeFormat))
		if age {
			w.Header().Set("Age", "0")
		}
		if r.Method != http.MethodHead {
			w.WriteHeader(http.StatusNotImplemented)
			return
		}
		heads.Add(1)
		signed, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
		if d := now.Sub(signed); deny || err != nil || d > 15*time.Minute || d < -15*time.Minute {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Length", "5")
		w.Header().Set("ETag", `"5d41402abc4b2a76b9719d911017c592"`)
		w.Header().Set("Last-Modified", now.Format(http.TimeFormat))
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store, err := backend.NewS3Store(context.Background(), backend.S3Config{Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxRetries: 2, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return store, &heads
}

// TestS3HeadClockSkew: a HEAD refused for a skewed clock (a 403 with no
// body: no RequestTimeTooSkewed to read) is known by the store's Date
// against the request's signing time. Where the SDK can correct its clock
// from that Date (as it does, and retries, for a GET's
// RequestTimeTooSkewed), the HEAD is sent once more and succeeds; where it
// cannot, the HEAD fails as a GET does: ErrAccessDenied with ErrClockSkew,
// its text naming the clocks, counted in
// wharf_backend_clock_skew_errors_total. On the code before, both were a
// plain access denied ("Forbidden"), uncounted: a wrong clock looked like
// a missing permission, and every first HEAD after a start failed.
func TestS3HeadClockSkew(t *testing.T) {
	ctx := context.Background()
	t.Run("correctable", func(t *testing.T) {
		store, heads := skewedS3(t, time.Hour, false, false)
		info, err := store.Stat(ctx, "bkt", "k")
		if err != nil || info.Size != 5 {
			t.Fatalf("Stat with the store's clock an hour ahead: %+v %v; want it to succeed with the corrected clock", info, err)
		}
		if n := heads.Load(); n != 2 {
			t.Errorf("%d HEADs; want 2 (the refused one, then one signed by the corrected clock)", n)
		}
	})
	t.Run("not correctable", func(t *testing.T) {
		store, heads := skewedS3(t, time.Hour, true, false)
		m := backend.NewMetrics(prometheus.NewRegistry())
		st := backend.Instrument(store, m)
		_, err := st.Stat(ctx, "bkt", "k")
		backend.WantErr(t, err, backend.ErrAccessDenied, "bkt", "k")
		if !errors.Is(err, backend.ErrClockSkew) || backend.IsRetryable(err) {
			t.Fatalf("Stat with a skew the SDK cannot correct: %v; want ErrClockSkew, not retryable", err)
		}
		if s := err.Error(); !strings.Contains(s, "RequestTimeTooSkewed") || !strings.Contains(s, "clock") {
			t.Errorf("error %q does not name the cause (RequestTimeTooSkewed, the clocks)", s)
		}
		if got := testutil.ToFloat64(m.ClockSkewCounter()); got != 1 {
			t.Errorf("wharf_backend_clock_skew_errors_total = %v; want 1", got)
		}
		if n := heads.Load(); n > 2 {
			t.Errorf("%d HEADs; want at most 2", n)
		}
	})
	t.Run("a 403 within the window is access denied", func(t *testing.T) {
		store, heads := skewedS3(t, 10*time.Minute, false, true)
		_, err := store.Stat(ctx, "bkt", "k")
		backend.WantErr(t, err, backend.ErrAccessDenied, "bkt", "k")
		if errors.Is(err, backend.ErrClockSkew) {
			t.Errorf("a 403 with the clocks 10 minutes apart (S3 allows 15): %v; want no ErrClockSkew", err)
		}
		if n := heads.Load(); n != 1 {
			t.Errorf("%d HEADs; want 1", n)
		}
	})
}
