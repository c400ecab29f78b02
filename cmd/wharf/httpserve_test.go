package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServeHTTP2BodyOnGet: over HTTP/2 a request body needs no
// Content-Length (HEADERS without END_STREAM, then DATA frames: the
// HTTP/2 form of a chunked body). A GET or HEAD sending one is refused
// with 400 InvalidRequest, as over HTTP/1.1, and is never served with its
// body left unread; a GET without a body is served on the same client.
func TestServeHTTP2BodyOnGet(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.pair(t, "s3", validNow)
	addr, _, _, _, _ := startTLSServe(t, frontDoorConfig{TLSCert: cert, TLSKey: key}, false)
	c := pki.client(true)
	for _, tc := range []struct {
		name   string
		method string
		body   string
		length int64 // the request's ContentLength: -1 = none sent
		status int
	}{
		{"GET without a body", "GET", "", 0, 200},
		{"GET with a body of no length", "GET", "smuggled bytes", -1, 400},
		{"HEAD with a body of no length", "HEAD", "smuggled bytes", -1, 400},
		{"GET with a Content-Length body", "GET", "smuggled bytes", 14, 400},
	} {
		var body io.Reader
		if tc.body != "" {
			body = io.NopCloser(strings.NewReader(tc.body)) // no Len: the client sends no content-length
		}
		req, err := http.NewRequest(tc.method, "https://"+addr+"/data/a.txt", body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = tc.length
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s: %s, want HTTP/2", tc.name, resp.Proto)
		}
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d %s, want %d", tc.name, resp.StatusCode, b, tc.status)
			continue
		}
		if tc.status == 400 && tc.method == "GET" && !strings.Contains(string(b), "<Code>InvalidRequest</Code>") {
			t.Errorf("%s: body %s, want InvalidRequest", tc.name, b)
		}
		if tc.status == 200 && string(b) != "hello\n" {
			t.Errorf("%s: body %q", tc.name, b)
		}
	}
}
