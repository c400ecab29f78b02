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

	"github.com/wharf-s3/wharf/backend"
)

// TestS3StoreExpeditedUnavailable: S3's 503 GlacierExpeditedRetrievalNotAvailable
// (Expedited capacity exhausted) is ErrExpeditedUnavailable (and still
// ErrUnavailable), so that the client can be told to use another tier,
// and it is sent once: retrying an Expedited restore at once meets the
// same exhausted capacity. On the code before it was a bare
// ErrUnavailable (a client saw SlowDown and retried Expedited), after
// three RestoreObject requests.
func TestS3StoreExpeditedUnavailable(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.Contains(r.URL.RawQuery, "restore") {
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		posts.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>GlacierExpeditedRetrievalNotAvailable</Code><Message>Glacier expedited retrievals are currently not available, please try again later</Message><RequestId>1</RequestId></Error>`))
	}))
	defer srv.Close()
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store, err := backend.NewS3Store(context.Background(), backend.S3Config{
		Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxBackoff: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Restore(context.Background(), "b", "k", backend.RestoreRequest{Days: 1, Tier: backend.RetrievalExpedited})
	if !errors.Is(err, backend.ErrExpeditedUnavailable) || !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("restore: %v; want ErrExpeditedUnavailable (and ErrUnavailable)", err)
	}
	if n := posts.Load(); n != 1 {
		t.Fatalf("%d RestoreObject requests for one Expedited restore refused for capacity; want 1", n)
	}
}
