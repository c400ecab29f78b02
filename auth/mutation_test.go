package auth

// Tests written for mutants that survived scripts/mutation.sh (TESTING.md
// lists them): limits tested exactly at the limit, components checked one at
// a time, and SigV4 requests signed here by hand where no SDK signs the shape
// (the time in a Date header, a Content-Length the client signed but its
// HTTP stack did not send).

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// handSignV4 signs req with SigV4 computed here, independently of the
// verifier: the canonical headers are exactly hdrs (lower-case name and
// value, in order; the caller includes "host"), the canonical URI is
// req.URL.EscapedPath(), the query must be empty, and the payload is the
// empty-body hash. The time is at, in the scope and the string to sign; the
// caller puts it in a header of its choice.
func handSignV4(req *http.Request, ak, sk, region string, at time.Time, hdrs [][2]string) {
	var names []string
	var canon strings.Builder
	for _, h := range hdrs {
		names = append(names, h[0])
		canon.WriteString(h[0] + ":" + h[1] + "\n")
	}
	creq := req.Method + "\n" + req.URL.EscapedPath() + "\n\n" + canon.String() + "\n" + strings.Join(names, ";") + "\n" + emptyHash
	sum := sha256.Sum256([]byte(creq))
	day := at.UTC().Format("20060102")
	scope := day + "/" + region + "/s3/aws4_request"
	sts := "AWS4-HMAC-SHA256\n" + at.UTC().Format("20060102T150405Z") + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	mac := func(key []byte, s string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	k := mac([]byte("AWS4"+sk), day)
	k = mac(k, region)
	k = mac(k, "s3")
	k = mac(k, "aws4_request")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+ak+"/"+scope+", SignedHeaders="+strings.Join(names, ";")+
		", Signature="+hex.EncodeToString(mac(k, sts)))
}

// TestSigV4HandSignedShapes: SigV4 shapes no SDK here produces.
func TestSigV4HandSignedShapes(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	host := strings.TrimPrefix(srv.URL, "http://")

	t.Run("control: x-amz-date", func(t *testing.T) {
		req := newReq(t, srv, "GET", "/b/k", "")
		d := now.UTC().Format("20060102T150405Z")
		req.Header.Set("X-Amz-Date", d)
		req.Header.Set("X-Amz-Content-Sha256", emptyHash)
		handSignV4(req, testAK, testSK, "us-east-1", now, [][2]string{{"host", host}, {"x-amz-content-sha256", emptyHash}, {"x-amz-date", d}})
		wantOK(t, send(t, req), testAK)
	})
	// AWS accepts the request time in Date when X-Amz-Date is absent.
	t.Run("time in the Date header", func(t *testing.T) {
		req := newReq(t, srv, "GET", "/b/k", "")
		d := now.UTC().Format(http.TimeFormat)
		req.Header.Set("Date", d)
		req.Header.Set("X-Amz-Content-Sha256", emptyHash)
		handSignV4(req, testAK, testSK, "us-east-1", now, [][2]string{{"date", d}, {"host", host}, {"x-amz-content-sha256", emptyHash}})
		wantOK(t, send(t, req), testAK)
	})
	// A client that signed "content-length:0" on a GET whose HTTP stack sent
	// no Content-Length (Go's client drops it): the verifier signs the 0 that
	// net/http records in r.ContentLength.
	t.Run("signed content-length:0 not sent", func(t *testing.T) {
		req := newReq(t, srv, "GET", "/b/k", "")
		d := now.UTC().Format("20060102T150405Z")
		req.Header.Set("X-Amz-Date", d)
		req.Header.Set("X-Amz-Content-Sha256", emptyHash)
		handSignV4(req, testAK, testSK, "us-east-1", now, [][2]string{{"content-length", "0"}, {"host", host}, {"x-amz-content-sha256", emptyHash}, {"x-amz-date", d}})
		wantOK(t, send(t, req), testAK)
	})
}

// TestSigV4SkewAtTheLimit: a request exactly 15 minutes off is accepted
// (the refusals at 16 minutes are in TestSigV4Refusals).
func TestSigV4SkewAtTheLimit(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	for _, d := range []time.Duration{maxSkew, -maxSkew} {
		req := newReq(t, srv, "GET", "/b/k", "")
		awsSign(t, req, testAK, testSK, "us-east-1", emptyHash, now.Add(d))
		wantOK(t, send(t, req), testAK)
	}
}

// TestSigV4MalformedAuthorization: each malformed part of the Authorization
// header is refused as malformed, with a message naming that part, before
// any key lookup or signature check.
func TestSigV4MalformedAuthorization(t *testing.T) {
	now := time.Now()
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	day := now.UTC().Format("20060102")
	sig := strings.Repeat("ab", 32)
	cred := testAK + "/" + day + "/us-east-1/s3/aws4_request"
	cases := []struct{ name, authz, msg string }{
		{"no Credential", "SignedHeaders=host, Signature=" + sig, "must contain Credential, SignedHeaders and Signature"},
		{"no SignedHeaders", "Credential=" + cred + ", Signature=" + sig, "must contain Credential, SignedHeaders and Signature"},
		{"no Signature", "Credential=" + cred + ", SignedHeaders=host", "must contain Credential, SignedHeaders and Signature"},
		{"credential of 4 parts", "Credential=" + testAK + "/" + day + "/us-east-1/s3, SignedHeaders=host, Signature=" + sig, "Credential is mal-formed"},
		{"credential of 2 parts", "Credential=" + testAK + "/" + day + ", SignedHeaders=host, Signature=" + sig, "Credential is mal-formed"},
		{"credential of 6 parts", "Credential=" + cred + "/x, SignedHeaders=host, Signature=" + sig, "Credential is mal-formed"},
		{"empty access key", "Credential=/" + day + "/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + sig, "Credential is mal-formed"},
		{"empty region", "Credential=" + testAK + "/" + day + "//s3/aws4_request, SignedHeaders=host, Signature=" + sig, "Credential is mal-formed"},
		{"wrong terminator", "Credential=" + testAK + "/" + day + "/us-east-1/s3/aws5_request, SignedHeaders=host, Signature=" + sig, "Credential is mal-formed"},
		{"credential date not a date", "Credential=" + testAK + "/" + day[:7] + "X/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + sig, "incorrect date format"},
		{"empty signed header name", "Credential=" + cred + ", SignedHeaders=host;, Signature=" + sig, "invalid header name"},
		{"upper-case signed header name", "Credential=" + cred + ", SignedHeaders=host;Range, Signature=" + sig, "invalid header name"},
		{"signed header name with ':'", "Credential=" + cred + ", SignedHeaders=host;x:y, Signature=" + sig, "invalid header name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := newReq(t, srv, "GET", "/b/k", "")
			req.Header.Set("X-Amz-Date", now.UTC().Format("20060102T150405Z"))
			req.Header.Set("X-Amz-Content-Sha256", emptyHash)
			req.Header.Set("Range", "bytes=0-1")
			req.Header.Set("Authorization", "AWS4-HMAC-SHA256 "+c.authz)
			o := send(t, req)
			wantErr(t, o, "AuthorizationHeaderMalformed", 400)
			if !strings.Contains(o.Message, c.msg) {
				t.Fatalf("message %q does not say %q", o.Message, c.msg)
			}
		})
	}
}

// TestSigV4UpperCasePayloadHash: x-amz-content-sha256 must be lower-case
// hex; the empty-body digest in upper case is refused as malformed, not
// compared as a digest.
func TestSigV4UpperCasePayloadHash(t *testing.T) {
	now := time.Now()
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	for _, h := range []string{strings.ToUpper(emptyHash), strings.Repeat("g", 64)} {
		req := newReq(t, srv, "GET", "/b/k", "")
		awsSign(t, req, testAK, testSK, "us-east-1", h, now)
		wantErr(t, send(t, req), "InvalidArgument", 400)
	}
}

// TestHostWithDefaultHTTPSPort: a client that signed the host without :443
// while its HTTP stack sent the port is accepted (the :80 case is in
// TestTransportEdgeCases).
func TestHostWithDefaultHTTPSPort(t *testing.T) {
	v, err := New(testConfig(false, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	req := newReq(t, srv, "GET", "/b/k", "")
	req.Host = "s3.example.com"
	awsSign(t, req, testAK, testSK, "us-east-1", emptyHash, time.Now())
	req.Host = "s3.example.com:443"
	wantOK(t, send(t, req), testAK)
}

// TestPartialQueryCredentialsNotAnonymous: a query carrying only part of the
// SigV2 presigned parameters is a (failed) signed request, never an
// anonymous one, even with anonymous access on.
func TestPartialQueryCredentialsNotAnonymous(t *testing.T) {
	v, err := New(testConfig(true, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	for _, q := range []string{"Signature=abc", "AWSAccessKeyId=" + testAK} {
		wantErr(t, send(t, newReq(t, srv, "GET", "/b/k", q)), "AccessDenied", 403)
	}
}

// TestNewRejectsBadFirstRune: a bad character in the first position of an
// access key is found like one anywhere else.
func TestNewRejectsBadFirstRune(t *testing.T) {
	for _, ak := range []string{" AK", ",AK", "/AK", ":AK", "=AK", "\x7fAK", "\tAK"} {
		if _, err := New(Config{Keys: []Key{{AccessKey: ak, SecretKey: "s"}}}); err == nil || !strings.Contains(err.Error(), "contains") {
			t.Errorf("access key %q: want a 'contains' error, got %v", ak, err)
		}
	}
}

// TestLoadKeysFileSizeLimit: a keys file of exactly maxKeysFile bytes is
// read whole (its last byte is the secret's last character); one byte more
// is refused.
func TestLoadKeysFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	const head = "keys:\n  - access_key: AKIABIG\n    secret_key: "
	secret := "s3cr3t-" + strings.Repeat("x", maxKeysFile-len(head)-len("s3cr3t-")-1) + "Z"
	p := filepath.Join(dir, "exact.yaml")
	if err := os.WriteFile(p, []byte(head+secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != maxKeysFile {
		t.Fatalf("test setup: size %v, %v", fi, err)
	}
	got, err := LoadKeysFile(p)
	if err != nil {
		t.Fatalf("file of exactly %d bytes: %v", maxKeysFile, err)
	}
	if len(got) != 1 || got[0].SecretKey != secret {
		t.Fatalf("secret read back with %d bytes, want %d", len(got[0].SecretKey), len(secret))
	}
	p2 := filepath.Join(dir, "over.yaml")
	if err := os.WriteFile(p2, []byte(head+secret+"Z"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeysFile(p2); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("file of %d bytes: want 'larger than', got %v", maxKeysFile+1, err)
	}
}

// handSignV2 signs a SigV2 header request for GET /b/k with the given Date
// (computed here, not by the verifier).
func handSignV2(req *http.Request, ak, sk, date string) {
	req.Header.Set("Date", date)
	m := hmac.New(sha1.New, []byte(sk))
	m.Write([]byte("GET\n\n\n" + date + "\n/b/k"))
	req.Header.Set("Authorization", "AWS "+ak+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
}

// TestSigV2Limits: SigV2 header skew and presigned expiry exactly at their
// limits, an empty access key, and a signature with bytes after it.
func TestSigV2Limits(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := authServer(t, v)
	t.Run("header: skew of exactly 15 minutes", func(t *testing.T) {
		for _, d := range []time.Duration{maxSkew, -maxSkew} {
			req := newReq(t, srv, "GET", "/b/k", "")
			handSignV2(req, testAK, testSK, now.Add(d).UTC().Format(http.TimeFormat))
			wantOK(t, send(t, req), testAK)
		}
	})
	t.Run("header: skew of 15 minutes and 1 second", func(t *testing.T) {
		for _, d := range []time.Duration{maxSkew + time.Second, -maxSkew - time.Second} {
			req := newReq(t, srv, "GET", "/b/k", "")
			handSignV2(req, testAK, testSK, now.Add(d).UTC().Format(http.TimeFormat))
			wantErr(t, send(t, req), "RequestTimeTooSkewed", 403)
		}
	})
	t.Run("header: unparsable Date", func(t *testing.T) {
		req := newReq(t, srv, "GET", "/b/k", "")
		handSignV2(req, testAK, testSK, "yesterday at noon")
		wantErr(t, send(t, req), "AccessDenied", 403)
	})
	t.Run("header: empty access key", func(t *testing.T) {
		req := newReq(t, srv, "GET", "/b/k", "")
		handSignV2(req, "", testSK, now.UTC().Format(http.TimeFormat))
		wantErr(t, send(t, req), "AuthorizationHeaderMalformed", 400)
	})
	t.Run("header: right signature followed by more base64", func(t *testing.T) {
		for _, junk := range []string{"x", "=", "AAAA"} {
			req := newReq(t, srv, "GET", "/b/k", "")
			handSignV2(req, testAK, testSK, now.UTC().Format(http.TimeFormat))
			wantOK(t, send(t, req), testAK)
			req.Header.Set("Authorization", req.Header.Get("Authorization")+junk)
			wantErr(t, send(t, req), "SignatureDoesNotMatch", 403)
		}
	})
	presigned := func(t *testing.T, expires int64) outcome {
		req, err := http.NewRequest(http.MethodGet, botoPresignV2(srv.URL, "b", "k", "", testAK, testSK, expires), nil)
		if err != nil {
			t.Fatal(err)
		}
		return send(t, req)
	}
	t.Run("presigned: expires this second", func(t *testing.T) {
		wantOK(t, presigned(t, now.Unix()), testAK)
	})
	t.Run("presigned: expired a second ago", func(t *testing.T) {
		wantErr(t, presigned(t, now.Unix()-1), "AccessDenied", 403)
	})
	t.Run("presigned: 7 days and the allowed skew ahead", func(t *testing.T) {
		wantOK(t, presigned(t, now.Add(maxPresignV2+maxSkew).Unix()), testAK)
	})
	t.Run("presigned: one second more", func(t *testing.T) {
		wantErr(t, presigned(t, now.Add(maxPresignV2+maxSkew).Unix()+1), "AccessDenied", 403)
	})
}

// TestParseHTTPDateRefusesGarbage: every accepted form parses, anything else
// is an error (never the zero time).
func TestParseHTTPDateRefusesGarbage(t *testing.T) {
	want := time.Date(2007, 3, 27, 19, 36, 42, 0, time.UTC)
	for _, s := range []string{
		"Tue, 27 Mar 2007 19:36:42 GMT",
		"Tuesday, 27-Mar-07 19:36:42 GMT",
		"Tue Mar 27 19:36:42 2007",
		"Tue, 27 Mar 2007 19:36:42 +0000",
		"Tue, 27 Mar 2007 19:36:42 UTC",
		"20070327T193642Z",
	} {
		if got, err := parseHTTPDate(s); err != nil || !got.Equal(want) {
			t.Errorf("parseHTTPDate(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "yesterday", "Tue, 27 Mar 2007 19:36:42", "2007-03-27"} {
		if got, err := parseHTTPDate(s); err == nil {
			t.Errorf("parseHTTPDate(%q) = %v, want an error", s, got)
		}
	}
}

// TestHostBucketOutsideBase: hosts that are not "<bucket>.<base>" name no
// bucket, whatever their length, and nothing is guessed without a base.
func TestHostBucketOutsideBase(t *testing.T) {
	for _, h := range []struct{ host, base string }{
		{"photos..", ""},
		{"photos.", ""},
		{"a-much-longer-host-name.org", "s3.example"},
		{"bucket.s3.example.evil", "s3.example"},
		{"bucket.xs3.example", "s3.example"},
	} {
		if got := HostBucket(h.host, h.base); got != "" {
			t.Errorf("HostBucket(%q, %q) = %q, want \"\"", h.host, h.base, got)
		}
	}
}

// TestSigningCandidatesOnlyWhenDifferent: a second signed host or canonical
// URI is tried only when it differs from the first and is not empty: a
// default port stripped from a named host, a path the client escaped other
// than the AWS way. A bare ":443" yields no empty host, and a request with
// no path (absolute form) no empty canonical URI.
func TestSigningCandidatesOnlyWhenDifferent(t *testing.T) {
	for _, c := range []struct {
		host string
		want []string
	}{
		{"s3.example.com", []string{"s3.example.com"}},
		{"s3.example.com:443", []string{"s3.example.com:443", "s3.example.com"}},
		{"s3.example.com:80", []string{"s3.example.com:80", "s3.example.com"}},
		{"s3.example.com:9000", []string{"s3.example.com:9000"}},
		{":443", []string{":443"}},
		{":80", []string{":80"}},
	} {
		if got := hostCandidates(c.host); strings.Join(got, " ") != strings.Join(c.want, " ") || len(got) != len(c.want) {
			t.Errorf("hostCandidates(%q) = %q, want %q", c.host, got, c.want)
		}
	}
	for _, uri := range []string{"/b/k", "http://s3.example.com"} {
		r, err := http.NewRequest("GET", uri, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.RequestURI = uri
		if got := uriCandidates(r); len(got) != 1 || got[0] == "" {
			t.Errorf("uriCandidates(%q) = %q, want one non-empty canonical URI", uri, got)
		}
	}
}
