package auth

import (
	"net/http"
	"testing"
	"time"
)

// TestAWSDocumentedVectors verifies the worked examples published in the
// AWS S3 documentation (sig-v4-header-based-auth.html "Examples",
// sigv4-query-string-auth.html, RESTAuthentication.html for SigV2). The
// requests are sent over HTTP with the documented Host header and the clock
// set to the documented time.
func TestAWSDocumentedVectors(t *testing.T) {
	const (
		docAK = "AKIAIOSFODNN7EXAMPLE"
		docSK = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	)
	cases := []struct {
		name    string
		now     time.Time
		host    string
		path    string
		headers map[string]string
	}{
		{"v4 GET object with range", time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC), "examplebucket.s3.amazonaws.com", "/test.txt",
			map[string]string{
				"Range":                "bytes=0-9",
				"X-Amz-Content-Sha256": emptyHash,
				"X-Amz-Date":           "20130524T000000Z",
				"Authorization":        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
			}},
		{"v4 GET bucket lifecycle", time.Date(2013, 5, 24, 0, 5, 0, 0, time.UTC), "examplebucket.s3.amazonaws.com", "/?lifecycle",
			map[string]string{
				"X-Amz-Content-Sha256": emptyHash,
				"X-Amz-Date":           "20130524T000000Z",
				"Authorization":        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
			}},
		{"v4 list objects", time.Date(2013, 5, 23, 23, 50, 0, 0, time.UTC), "examplebucket.s3.amazonaws.com", "/?max-keys=2&prefix=J",
			map[string]string{
				"X-Amz-Content-Sha256": emptyHash,
				"X-Amz-Date":           "20130524T000000Z",
				"Authorization":        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
			}},
		{"v4 presigned", time.Date(2013, 5, 24, 12, 0, 0, 0, time.UTC), "examplebucket.s3.amazonaws.com",
			"/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
			nil},
		{"v2 header GET object", time.Date(2007, 3, 27, 19, 40, 0, 0, time.UTC), "s3.amazonaws.com", "/johnsmith/photos/puppy.jpg",
			map[string]string{
				"Date":          "Tue, 27 Mar 2007 19:36:42 +0000",
				"Authorization": "AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU=",
			}},
		{"v2 query string", time.Date(2007, 3, 29, 3, 0, 0, 0, time.UTC), "s3.amazonaws.com",
			"/johnsmith/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1175139620&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D",
			nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := New(Config{Keys: []Key{{AccessKey: docAK, SecretKey: docSK}}, Now: func() time.Time { return c.now }})
			if err != nil {
				t.Fatal(err)
			}
			srv := authServer(t, v)
			req, err := http.NewRequest(http.MethodGet, srv.URL+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = c.host
			for k, val := range c.headers {
				req.Header.Set(k, val)
			}
			wantOK(t, send(t, req), docAK)

			// The same request one second off in its signed time fails.
			if d := req.Header.Get("X-Amz-Date"); d != "" {
				req.Header.Set("X-Amz-Date", d[:len(d)-2]+"1Z")
				wantErr(t, send(t, req), "SignatureDoesNotMatch", 403)
				req.Header.Set("X-Amz-Date", d)
			}
			// And so does the same request for another key.
			req.URL.Path, req.URL.RawPath = req.URL.Path+"2", ""
			wantErr(t, send(t, req), "SignatureDoesNotMatch", 403)
		})
	}
}
