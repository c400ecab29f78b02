package backend_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// refusingS3 is an S3 server whose clock is ahead of ours by ahead (behind
// when negative) and that answers every request status, with an S3 error
// document of code when code is set (a HEAD's answer has no body). It
// sends Age, so that the SDK does not correct its clock from Date: the
// answer is the same each time.
func refusingS3(t *testing.T, ahead time.Duration, status int, code string) (*backend.S3Store, *atomic.Int64) {
	t.Helper()
	var heads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", time.Now().Add(ahead).UTC().Format(http.TimeFormat))
		w.Header().Set("Age", "0")
		if r.Method == http.MethodHead {
			heads.Add(1)
		}
		if code != "" && r.Method != http.MethodHead {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(status)
			_, _ = w.Write([]byte("<Error><Code>" + code + "</Code><Message>refused</Message></Error>"))
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store, err := backend.NewS3Store(context.Background(), backend.S3Config{Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxRetries: 1, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return store, &heads
}

// TestS3ForbiddenSkewRule: a refusal is taken for a skewed clock
// (ErrClockSkew) only when it is a 403 without a code of its own whose
// Date is more than 15 minutes from the request's signing time, either
// way: a store clock behind ours counts as one ahead, 15 and a half
// minutes is past the window, and another status (a GET's 500 without
// a body gets the SDK's code for its status), or a 403 naming its
// own code (AccessDenied), with the same clocks is not a skew. (The
// answers carry Age, so no HEAD is sent twice here; the retry of a
// correctable skew is TestS3HeadClockSkew's.)
func TestS3ForbiddenSkewRule(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		ahead  time.Duration
		status int
		code   string
		get    bool
		skew   bool
	}{
		{"HEAD 403, store an hour behind", -time.Hour, http.StatusForbidden, "", false, true},
		{"HEAD 403, store 15.5 minutes ahead", 15*time.Minute + 30*time.Second, http.StatusForbidden, "", false, true},
		{"HEAD 404, store an hour ahead", time.Hour, http.StatusNotFound, "", false, false},
		{"GET 500 without a body, store an hour ahead", time.Hour, http.StatusInternalServerError, "", true, false},
		{"GET 403 AccessDenied, store an hour ahead", time.Hour, http.StatusForbidden, "AccessDenied", true, false},
	} {
		store, heads := refusingS3(t, c.ahead, c.status, c.code)
		var err error
		if c.get {
			var rc interface{ Close() error }
			rc, _, err = store.Get(ctx, "bkt", "k")
			if err == nil {
				rc.Close()
			}
		} else {
			_, err = store.Stat(ctx, "bkt", "k")
		}
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if got := errors.Is(err, backend.ErrClockSkew); got != c.skew {
			t.Errorf("%s: %v; ErrClockSkew %v, want %v", c.name, err, got, c.skew)
		}
		// Every answer carries Age, so the SDK corrects no clock from it:
		// a HEAD, skewed or not, is sent once (a second one would be
		// refused the same way: TestS3HeadSkewNotCorrectableSentOnce).
		if !c.get && heads.Load() != 1 {
			t.Errorf("%s: %d HEADs; want 1", c.name, heads.Load())
		}
	}
}
