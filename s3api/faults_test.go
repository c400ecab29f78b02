package s3api_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// Backend failures before the first byte: a retryable one is 503 SlowDown,
// any other is 500 InternalError; both name the bucket and key. A reset in
// the middle of the body aborts the connection.
func TestBackendFaults(t *testing.T) {
	var faulty *faults.Faulty
	var mode atomic.Int32 // 0 none, 1 unavailable, 2 denied, 3 fail past the first 2 MiB
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true, wrap: func(s backend.Store) backend.Store {
		faulty = faults.NewFaulty(s, faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
			if r.Op != "range" && r.Op != "get" {
				return faults.Fault{}
			}
			switch mode.Load() {
			case 1:
				return faults.Fault{Kind: faults.FaultError}
			case 2:
				return faults.Fault{Kind: faults.FaultError, Err: backend.ErrAccessDenied}
			case 3:
				// Reads that start in the first 2 MiB of the chunk (where
				// big.bin begins) reset after 2 MiB; every read from there
				// on (a later part, a resume or a retry) fails for good.
				// By offset, not by arrival: the planner reads several
				// parts at once, and the part reads race to the store.
				if r.Off < 2<<20 {
					return faults.Fault{Kind: faults.FaultReset, After: 2 << 20}
				}
				return faults.Fault{Kind: faults.FaultError, Err: backend.ErrAccessDenied}
			}
			return faults.Fault{}
		}})
		return faulty
	}})
	mode.Store(1)
	resp, body := f.do(t, "GET", "/bkt/dir/a.bin", nil)
	e := wantError(t, resp, body, 503, "SlowDown")
	if e.Key != "dir/a.bin" || e.BucketName != "bkt" {
		t.Errorf("503 names %q/%q", e.BucketName, e.Key)
	}
	mode.Store(2)
	resp, body = f.do(t, "GET", "/bkt/dir/a.bin", map[string]string{"Range": "bytes=100-200"})
	e = wantError(t, resp, body, 500, "InternalError")
	if e.Key != "dir/a.bin" {
		t.Errorf("500 names %q", e.Key)
	}
	// Listing and HEAD never touch the store.
	before := faulty.Requests("range") + faulty.Requests("get")
	resp, body = f.do(t, "HEAD", "/bkt/dir/a.bin", nil)
	mustStatus(t, resp, body, 200)
	resp, body = f.do(t, "GET", "/bkt?list-type=2", nil)
	mustStatus(t, resp, body, 200)
	if after := faulty.Requests("range") + faulty.Requests("get"); after != before {
		t.Errorf("HEAD/list made %d store reads", after-before)
	}
	// Failure after the headers went out: broken body, never a clean short one.
	mode.Store(3)
	req, _ := http.NewRequest("GET", f.srv.URL+"/bkt/big.bin", nil)
	r2, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, rerr := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode == 200 && rerr == nil {
		for _, l := range faulty.Log() {
			t.Logf("%+v", l)
		}
		t.Fatalf("a failing store produced a clean %d-byte body of %d", len(got), len(f.files["big.bin"]))
	}
	if r2.StatusCode != 200 {
		t.Fatalf("status %d: the first frame should have been served", r2.StatusCode)
	}
	if !errors.Is(rerr, io.ErrUnexpectedEOF) {
		t.Errorf("body error %v, want unexpected EOF", rerr)
	}
	t.Logf("aborted after %d of %d bytes", len(got), len(f.files["big.bin"]))
	if r2.StatusCode == 200 && string(got) != string(f.files["big.bin"][:len(got)]) {
		t.Fatal("wrong bytes before the abort")
	}
}

// Checklist 36: a client disconnect cancels the archive's backend reads.
func Test36DisconnectCancelsBackendReads(t *testing.T) {
	var faulty *faults.Faulty
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true, wrap: func(s backend.Store) backend.Store {
		// 256 KiB/s per stream: big.bin (6 MiB) would take ~25 s.
		faulty = faults.NewFaulty(s, faults.FaultConfig{Bandwidth: 256 << 10})
		return faulty
	}})
	req, _ := http.NewRequest("GET", f.srv.URL+"/bkt/big.bin", nil)
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f.srv.CloseClientConnections()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(f.logs.String(), `"aborted":true`) {
		if time.Now().After(deadline) {
			t.Fatalf("handler still running 5 s after the client left (a full read takes ~25 s); logs:\n%s", f.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	n1 := faulty.BytesReturned()
	time.Sleep(500 * time.Millisecond)
	n2 := faulty.BytesReturned()
	if n2 != n1 {
		t.Errorf("backend bytes still flowing after the handler ended: %d → %d", n1, n2)
	}
	// The planner fetches the first part as several concurrent
	// sub-ranges (about 1.5 MB/s here in all), so some of the object was
	// read; had the disconnect not cancelled them, all of it would have
	// been (the whole object arrives in ~4 s).
	if total := int64(len(f.files["big.bin"])); n2 >= total {
		t.Errorf("read %d backend bytes (the whole object, %d) for a 1 KiB client read", n2, total)
	}
	t.Logf("backend bytes read before cancellation: %d of %d", n2, len(f.files["big.bin"]))
}
