package auth

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// Test keys: the secrets deliberately contain '+', '/', space, '%' and
// non-ASCII characters.
const (
	testAK     = "AKIAWHARFTEST0001"
	testSK     = "wJalr+XUt nFEMI/K7%MDENG/ü+bPxRfiCY=="
	grantAK    = "AKIAWHARFGRANTED"
	grantSK    = "s3cr3t with spaces & ünïcødé %41 +/="
	emptyHash  = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	otherHash  = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" // sha256("hello")
	unsignedPL = "UNSIGNED-PAYLOAD"
)

func testConfig(anonymous bool, now func() time.Time) Config {
	return Config{
		Keys: []Key{
			{AccessKey: testAK, SecretKey: testSK},
			{AccessKey: grantAK, SecretKey: grantSK, Buckets: []string{"granted"}},
		},
		Anonymous: anonymous,
		Now:       now,
	}
}

// outcome is what the test server reports for one request.
type outcome struct {
	AccessKey string `json:"ak"`
	Anonymous bool   `json:"anon"`
	Code      string `json:"code"`
	Message   string `json:"msg"`
	Status    int    `json:"status"`
	Other     string `json:"other"` // a non-*Error error (must never happen)
}

func (o outcome) String() string {
	if o.Code != "" || o.Other != "" {
		return o.Code + "/" + http.StatusText(o.Status) + ": " + o.Message + o.Other
	}
	return "ok ak=" + o.AccessKey
}

// authServer runs v.Authenticate behind a real net/http server, so requests
// arrive exactly as the wire and Go's server shape them (Host moved into
// r.Host, Transfer-Encoding into r.TransferEncoding, raw RequestURI).
func authServer(t *testing.T, v *Verifier) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := v.Authenticate(r)
		var o outcome
		var ae *Error
		switch {
		case err == nil:
			o.AccessKey, o.Anonymous = id.AccessKey, id.Anonymous()
		case errors.As(err, &ae):
			o.Code, o.Message, o.Status = ae.Code, ae.Message, ae.Status
		default:
			o.Other = err.Error()
		}
		b, _ := json.Marshal(o)
		w.Header().Set("X-Outcome", string(b)) // HEAD responses have no body
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// send performs req against the test server and returns the outcome.
func send(t *testing.T, req *http.Request) outcome {
	t.Helper()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	var o outcome
	if err := json.Unmarshal([]byte(resp.Header.Get("X-Outcome")), &o); err != nil {
		t.Fatalf("%s %s: status %d, no outcome: %v", req.Method, req.URL, resp.StatusCode, err)
	}
	if o.Other != "" {
		t.Fatalf("%s %s: Authenticate returned a non-*Error error: %s", req.Method, req.URL, o.Other)
	}
	return o
}

func wantOK(t *testing.T, o outcome, ak string) {
	t.Helper()
	if o.Code != "" || o.AccessKey != ak {
		t.Fatalf("want success as %q, got %v", ak, o)
	}
}

func wantErr(t *testing.T, o outcome, code string, status int) {
	t.Helper()
	if o.Code != code || o.Status != status {
		t.Fatalf("want %s/%d, got %v", code, status, o)
	}
}

// newReq builds a client request to srv with the given raw (already
// escaped) path and raw query, the way S3 SDKs build them.
func newReq(t *testing.T, srv *httptest.Server, method, rawPath, rawQuery string) *http.Request {
	t.Helper()
	u, err := url.Parse(srv.URL + rawPath)
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = rawQuery
	req, err := http.NewRequest(method, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
