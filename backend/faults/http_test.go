package faults

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestFaultyHTTPActions drives every HTTPAction over a real loopback
// connection, in front of a handler that serves one object with ranges, and
// checks what an HTTP client really receives.
func TestFaultyHTTPActions(t *testing.T) {
	obj := randBytes(40, 200000)
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "obj", time.Time{}, bytes.NewReader(obj))
	})
	fh := FaultyHTTP(origin, nil)
	srv := httptest.NewServer(fh)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	type result struct {
		status  int
		header  http.Header
		body    []byte
		bodyErr error
		elapsed time.Duration
	}
	do := func(t *testing.T, method, rng string) (result, error) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+"/bkt/some/key", nil)
		if err != nil {
			t.Fatal(err)
		}
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return result{}, err
		}
		defer resp.Body.Close()
		body, berr := io.ReadAll(resp.Body)
		return result{resp.StatusCode, resp.Header, body, berr, time.Since(t0)}, nil
	}
	s3Code := func(t *testing.T, body []byte) string {
		t.Helper()
		var doc struct {
			Code string
		}
		if err := xml.Unmarshal(body, &doc); err != nil {
			t.Fatalf("error body is not XML: %v: %q", err, body)
		}
		return doc.Code
	}

	tests := []struct {
		name   string
		method string
		rng    string
		fault  HTTPFault
		check  func(t *testing.T, r result, err error)
	}{
		{"pass", "GET", "bytes=100-199", HTTPFault{}, func(t *testing.T, r result, err error) {
			if err != nil || r.status != 206 || !bytes.Equal(r.body, obj[100:200]) || r.bodyErr != nil {
				t.Fatalf("status %d, %d bytes, errors %v / %v", r.status, len(r.body), err, r.bodyErr)
			}
		}},
		{"error default is 503 SlowDown", "GET", "", HTTPFault{Action: HTTPError}, func(t *testing.T, r result, err error) {
			if err != nil || r.status != 503 || s3Code(t, r.body) != "SlowDown" || r.header.Get("x-amz-request-id") == "" {
				t.Fatalf("status %d, body %q, err %v", r.status, r.body, err)
			}
		}},
		{"error 404 NoSuchKey", "GET", "", HTTPFault{Action: HTTPError, Status: 404}, func(t *testing.T, r result, err error) {
			if err != nil || r.status != 404 || s3Code(t, r.body) != "NoSuchKey" {
				t.Fatalf("status %d, body %q, err %v", r.status, r.body, err)
			}
		}},
		{"error with explicit code", "GET", "", HTTPFault{Action: HTTPError, Status: 500, Code: "Custom"}, func(t *testing.T, r result, err error) {
			if err != nil || r.status != 500 || s3Code(t, r.body) != "Custom" {
				t.Fatalf("status %d, body %q, err %v", r.status, r.body, err)
			}
		}},
		{"error on HEAD has no body", "HEAD", "", HTTPFault{Action: HTTPError, Status: 403}, func(t *testing.T, r result, err error) {
			if err != nil || r.status != 403 || len(r.body) != 0 {
				t.Fatalf("status %d, body %q, err %v", r.status, r.body, err)
			}
		}},
		{"reset before the response", "GET", "", HTTPFault{Action: HTTPReset, After: -1}, func(t *testing.T, r result, err error) {
			if err == nil {
				t.Fatalf("got a response (status %d), want a transport error", r.status)
			}
		}},
		{"reset mid-body", "GET", "", HTTPFault{Action: HTTPReset, After: 70000}, func(t *testing.T, r result, err error) {
			if err != nil || r.bodyErr == nil || len(r.body) > 70000 || !bytes.Equal(r.body, obj[:len(r.body)]) {
				t.Fatalf("err %v, body error %v, %d bytes", err, r.bodyErr, len(r.body))
			}
		}},
		{"truncate mid-body", "GET", "", HTTPFault{Action: HTTPTruncate, After: 50000}, func(t *testing.T, r result, err error) {
			if err != nil || !errors.Is(r.bodyErr, io.ErrUnexpectedEOF) || !bytes.Equal(r.body, obj[:50000]) {
				t.Fatalf("err %v, body error %v, %d bytes", err, r.bodyErr, len(r.body))
			}
			if r.header.Get("Content-Length") != strconv.Itoa(len(obj)) {
				t.Fatalf("Content-Length %q, want the full %d", r.header.Get("Content-Length"), len(obj))
			}
		}},
		{"ignore range", "GET", "bytes=10-19", HTTPFault{Action: HTTPIgnoreRange}, func(t *testing.T, r result, err error) {
			if err != nil || r.status != 200 || !bytes.Equal(r.body, obj) {
				t.Fatalf("err %v, status %d, %d bytes", err, r.status, len(r.body))
			}
		}},
		{"shift range", "GET", "bytes=10-19", HTTPFault{Action: HTTPShiftRange, After: 5}, func(t *testing.T, r result, err error) {
			want := "bytes 15-24/" + strconv.Itoa(len(obj))
			if err != nil || r.status != 206 || r.header.Get("Content-Range") != want || !bytes.Equal(r.body, obj[15:25]) {
				t.Fatalf("err %v, status %d, Content-Range %q, %d bytes", err, r.status, r.header.Get("Content-Range"), len(r.body))
			}
		}},
		{"extra bytes", "GET", "bytes=10-19", HTTPFault{Action: HTTPExtraBytes, After: 5}, func(t *testing.T, r result, err error) {
			want := append(append([]byte{}, obj[10:20]...), make([]byte, 5)...)
			if err != nil || r.status != 206 || r.bodyErr != nil || !bytes.Equal(r.body, want) {
				t.Fatalf("err %v / %v, status %d, %d bytes", err, r.bodyErr, r.status, len(r.body))
			}
			if r.header.Get("Content-Length") != "" {
				t.Fatalf("Content-Length %q kept", r.header.Get("Content-Length"))
			}
		}},
		{"stall mid-body", "GET", "", HTTPFault{Action: HTTPStall, After: 1000, Stall: 300 * time.Millisecond}, func(t *testing.T, r result, err error) {
			if err != nil || r.bodyErr != nil || !bytes.Equal(r.body, obj) || r.elapsed < 300*time.Millisecond {
				t.Fatalf("err %v / %v, %d bytes in %v", err, r.bodyErr, len(r.body), r.elapsed)
			}
		}},
		{"delay", "GET", "bytes=0-0", HTTPFault{Delay: 200 * time.Millisecond}, func(t *testing.T, r result, err error) {
			if err != nil || r.status != 206 || r.elapsed < 200*time.Millisecond {
				t.Fatalf("err %v, status %d after %v", err, r.status, r.elapsed)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fh.SetHook(func(HTTPRequest) HTTPFault { return tc.fault })
			defer fh.SetHook(nil)
			r, err := do(t, tc.method, tc.rng)
			tc.check(t, r, err)
		})
	}
}

// TestFaultyHTTPLog checks what the hook and the log see of each request.
func TestFaultyHTTPLog(t *testing.T) {
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	var seen []HTTPRequest
	fh := FaultyHTTP(origin, func(r HTTPRequest) HTTPFault { seen = append(seen, r); return HTTPFault{} })
	srv := httptest.NewServer(fh)
	defer srv.Close()
	send := func(method, path, rng, ifMatch string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send("GET", "/b1/dir/k.bin", "bytes=1-2", `"etag"`)
	send("HEAD", "/b2/k", "", "")
	send("GET", "/b3?list-type=2&prefix=x", "", "")
	want := []HTTPRequest{
		{Method: "GET", Bucket: "b1", Key: "dir/k.bin", Range: "bytes=1-2", IfMatch: `"etag"`, N: 0},
		{Method: "HEAD", Bucket: "b2", Key: "k", N: 1},
		{Method: "GET", Bucket: "b3", Query: "list-type=2&prefix=x", N: 2},
	}
	log := fh.Log()
	if len(log) != len(want) || len(seen) != len(want) {
		t.Fatalf("log %+v, hook saw %+v", log, seen)
	}
	for i := range want {
		if log[i] != want[i] || seen[i] != want[i] {
			t.Errorf("request %d: log %+v, hook saw %+v, want %+v", i, log[i], seen[i], want[i])
		}
	}
	fh.Reset()
	send("GET", "/b1/k", "", "")
	if log := fh.Log(); len(log) != 1 || log[0].N != 0 {
		t.Fatalf("after Reset: %+v", log)
	}
}

// TestFaultyHTTPBandwidth: HTTPFault.Bandwidth paces a body at its rate
// (and only the body: a fault without it is not slowed), every byte
// intact, also over a ranged answer.
func TestFaultyHTTPBandwidth(t *testing.T) {
	obj := randBytes(41, 200000)
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "obj", time.Time{}, bytes.NewReader(obj))
	})
	var rate atomic.Int64 // set per case, read by the server's goroutines
	fh := FaultyHTTP(origin, func(HTTPRequest) HTTPFault { return HTTPFault{Bandwidth: rate.Load()} })
	srv := httptest.NewServer(fh)
	defer srv.Close()
	for _, tc := range []struct {
		name            string
		rate            int64
		rng             string
		want            []byte
		atLeast, atMost time.Duration
	}{
		{"unpaced", 0, "", obj, 0, 150 * time.Millisecond},
		{"1 MB/s", 1e6, "", obj, 190 * time.Millisecond, 2 * time.Second},
		{"1 MB/s, a 100,000-byte range", 1e6, "bytes=50000-149999", obj[50000:150000], 90 * time.Millisecond, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rate.Store(tc.rate)
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/bkt/key", nil)
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			t0 := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(t0)
			if err != nil || !bytes.Equal(body, tc.want) {
				t.Fatalf("body: %d bytes, err %v; want the %d bytes intact", len(body), err, len(tc.want))
			}
			if took < tc.atLeast || took > tc.atMost {
				t.Errorf("took %v, want %v..%v", took, tc.atLeast, tc.atMost)
			}
		})
	}
}
