package backend_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// TestS3HeadCachedForbiddenNotSkew: a HEAD's 403 from a cache in front of
// the store (a CDN, a caching proxy) carries the origin's Date of when it
// was made and an Age of how long it was kept: the clocks agree (Date +
// Age is now), and the 403 is a missing permission, not a skewed clock.
// It was told as RequestTimeTooSkewed by Date alone ("check both clocks
// (NTP)"), and sent twice, the operator sent after a clock that is right.
func TestS3HeadCachedForbiddenNotSkew(t *testing.T) {
	for _, kept := range []time.Duration{20 * time.Minute, 3 * time.Hour} {
		t.Run(kept.String(), func(t *testing.T) {
			var heads atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				heads.Add(1)
				w.Header().Set("Date", time.Now().Add(-kept).UTC().Format(http.TimeFormat))
				w.Header().Set("Age", strconv.Itoa(int(kept.Seconds())))
				w.WriteHeader(http.StatusForbidden)
			}))
			t.Cleanup(srv.Close)
			t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
			store, err := backend.NewS3Store(context.Background(), backend.S3Config{Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
				AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxRetries: 2, MaxBackoff: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, err = store.Stat(context.Background(), "bkt", "k")
			backend.WantErr(t, err, backend.ErrAccessDenied, "bkt", "k")
			if errors.Is(err, backend.ErrClockSkew) {
				t.Errorf("a cached 403 (Date %s ago, Age %s): %v; want access denied, no ErrClockSkew", kept, kept, err)
			}
			if n := heads.Load(); n != 1 {
				t.Errorf("%d HEADs for a cached 403; want 1", n)
			}
		})
	}
}

// TestS3HeadSkewNotCorrectableSentOnce: a HEAD refused for a skewed clock
// whose answer carries Age is not sent again: the SDK does not correct its
// clock from a Date it takes for a cache's (any Age header), so a second
// HEAD signed by the same clock is refused the same way, a request paid
// for nothing on every failing Stat. It is still ErrClockSkew.
func TestS3HeadSkewNotCorrectableSentOnce(t *testing.T) {
	store, heads := skewedS3(t, time.Hour, true, false)
	_, err := store.Stat(context.Background(), "bkt", "k")
	if !errors.Is(err, backend.ErrClockSkew) {
		t.Fatalf("Stat with a skew the SDK cannot correct: %v; want ErrClockSkew", err)
	}
	if n := heads.Load(); n != 1 {
		t.Errorf("%d HEADs; want 1 (a second one, signed by the same clock, is refused the same way)", n)
	}
}
