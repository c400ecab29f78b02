package backend_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
)

// TestS3ListStuckPagination: a server that ignores continuation-token
// (answering every page the same, truncated, with the same or a fresh next
// token) would make List loop forever; it fails with ErrBadResponse after
// the second page instead.
func TestS3ListStuckPagination(t *testing.T) {
	for _, tc := range []struct {
		name       string
		freshToken bool
	}{{"same token", false}, {"fresh token, same page", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var pages atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := pages.Add(1)
				token := "t"
				if tc.freshToken {
					token = fmt.Sprintf("t%d", n)
				}
				w.Header().Set("Content-Type", "application/xml")
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix></Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>%s</NextContinuationToken><Contents><Key>a</Key><Size>1</Size><ETag>"e"</ETag><LastModified>2024-01-01T00:00:00.000Z</LastModified></Contents></ListBucketResult>`, token)
			}))
			t.Cleanup(srv.Close)
			t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
			store, err := backend.NewS3Store(context.Background(), backend.S3Config{Endpoint: srv.URL, Region: "us-east-1",
				PathStyle: true, AccessKeyID: "AK", SecretAccessKey: "SK"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			seen := 0
			err = store.List(ctx, "bkt", "", func(backend.ObjectInfo) error { seen++; return nil })
			backend.WantErr(t, err, backend.ErrBadResponse, "bkt", "")
			if p := pages.Load(); p != 2 || seen != 1 {
				t.Errorf("%d pages asked, %d keys given; want 2 pages and the key once", p, seen)
			}
		})
	}
}
