package auth

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBodyOfUnknownLengthRefused: net/http's HTTP/2 server gives a request
// whose HEADERS frame did not end the stream, and that sent no
// content-length, ContentLength -1 and no Transfer-Encoding (the HTTP/2
// form of a chunked body). On GET and HEAD that is a body like any other:
// 400 InvalidRequest, before any credentials are looked at (an anonymous
// request too).
func TestBodyOfUnknownLengthRefused(t *testing.T) {
	v, err := New(testConfig(true, time.Now))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		r := httptest.NewRequest(m, "https://s3.example.com/b/k", nil)
		r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
		r.Body = io.NopCloser(strings.NewReader("body bytes"))
		r.ContentLength = -1
		_, err := v.AuthenticateQuery(r, nil)
		var ae *Error
		if !errors.As(err, &ae) || ae.Code != "InvalidRequest" || ae.Status != http.StatusBadRequest {
			t.Errorf("%s with a body of unknown length: %v, want 400 InvalidRequest", m, err)
		}
		// The same request without a body is served (anonymous).
		r.Body, r.ContentLength = http.NoBody, 0
		if _, err := v.AuthenticateQuery(r, nil); err != nil {
			t.Errorf("%s without a body: %v", m, err)
		}
	}
}
