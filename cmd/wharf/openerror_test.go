package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestServeOpenErrorsPublic (issue 20, finding 9): the store refuses one
// manifest with an AccessDenied whose text names the AWS account, the
// role, the backing bucket and the key. An anonymous client of that bucket
// gets 500 InternalError naming the bucket and saying the store denied
// access, and none of the store's text, nor the manifest's key; the log
// keeps the whole error. Another manifest downloads at 8 bytes per second:
// its bucket answers 503 SlowDown while it opens and 503 SlowDown "timed
// out" after --open-timeout (a transient failure: the open is tried again
// at the next rescan; 500 InternalError before), while the third bucket is
// served all along. On the old
// code the 500's message was the whole open error, ARN included.
func TestServeOpenErrorsPublic(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"denied", "slow", "fine"} {
		if _, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"a.txt": []byte(id + "\n")}, time.Unix(1700000000, 0)),
			cargopack.Options{Bucket: "lake", Prefix: "base", UploadID: id, FrameSize: 4 << 10}); err != nil {
			t.Fatal(err)
		}
	}
	const (
		deniedKey = "base/uploads/denied/manifest.json.gz"
		slowKey   = "base/uploads/slow/manifest.json.gz"
		arn       = "arn:aws:sts::123456789012:assumed-role/wharf-reader/i-0abc123"
	)
	storeText := fmt.Sprintf("User: %s is not authorized to perform: s3:GetObject on resource: arn:aws:s3:::lake/%s with an explicit deny", arn, deniedKey)
	cfg := serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: "file://" + dir,
		Discover: []string{"s3://lake/base"}, Anonymous: true, CacheBytes: 1 << 20, OpenWait: 50 * time.Millisecond,
		wrapStore: func(s backend.Store) backend.Store {
			return faults.NewFaulty(s, faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
				switch {
				case r.Op == "get" && r.Key == deniedKey:
					return faults.Fault{Kind: faults.FaultError, Err: &backend.Error{Op: "get", Bucket: "lake", Key: deniedKey,
						Err: fmt.Errorf("%w: AccessDenied: %s", backend.ErrAccessDenied, storeText)}}
				case r.Op == "get" && r.Key == slowKey:
					return faults.Fault{Bandwidth: 8}
				}
				return faults.Fault{}
			}})
		},
	}
	cfg.OpenTimeout = 2 * time.Second
	addr, admin, logs, _ := startServe(t, cfg)

	resp, body := sendReq(t, mustReq(t, "GET", "http://"+addr+"/slow/a.txt"))
	wantS3Error(t, "the bucket still opening", resp, body, 503, "SlowDown")
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body = sendReq(t, mustReq(t, "GET", "http://"+addr+"/fine/a.txt"))
		if resp.StatusCode == 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if resp.StatusCode != 200 || string(body) != "fine\n" {
		t.Fatalf("the other bucket while one opens slowly: %d %q", resp.StatusCode, body)
	}

	resp, body = sendReq(t, mustReq(t, "GET", "http://"+addr+"/denied/a.txt"))
	wantS3Error(t, "GET of the denied bucket", resp, body, 500, "InternalError")
	for _, secret := range []string{"arn:", "123456789012", "wharf-reader", "s3:GetObject", deniedKey, "manifest", "lake"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("the client is told %q: %s", secret, body)
		}
	}
	if !strings.Contains(string(body), "bucket denied could not be opened: the store denied this server access") {
		t.Errorf("the message does not name the bucket and the kind of failure: %s", body)
	}

	waitReady(t, admin) // the slow open ends at its deadline
	resp, body = sendReq(t, mustReq(t, "GET", "http://"+addr+"/slow/a.txt"))
	wantS3Error(t, "the slow bucket after its deadline", resp, body, 503, "SlowDown") // transient: tried again at the next rescan
	if !strings.Contains(string(body), "bucket slow could not be opened: its open timed out") || strings.Contains(string(body), slowKey) {
		t.Errorf("the timed-out bucket's message: %s", body)
	}
	if !strings.Contains(logs.String(), arn) || !strings.Contains(logs.String(), deniedKey) {
		t.Error("the log lacks the store's error (ARN and key)")
	}
}
