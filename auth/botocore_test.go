package auth

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// capturedRequest is one request recorded from real botocore 1.43.11 by
// testdata/capture_botocore.py (a before-send hook; nothing was sent).
type capturedRequest struct {
	Name    string            `json:"name"`
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Now     int64             `json:"now"`
}

// TestBotocoreCapturedRequests replays requests signed by real botocore —
// SigV4 header auth with signed Range/If-Match/x-amz-checksum-mode, awkward
// keys, listing and location sub-resources, regions us-east-1/eu-west-1/auto,
// the default SigV2 presigned URL and an s3v4 presigned URL — with the clock
// at capture time, and checks each verifies and stops verifying when its
// path changes.
func TestBotocoreCapturedRequests(t *testing.T) {
	data, err := os.ReadFile("testdata/botocore-requests.json")
	if err != nil {
		t.Fatal(err)
	}
	var reqs []capturedRequest
	if err := json.Unmarshal(data, &reqs); err != nil {
		t.Fatal(err)
	}
	if len(reqs) < 8 {
		t.Fatalf("fixture has %d requests, want at least 8", len(reqs))
	}
	const capturedHost = "127.0.0.1:9999"
	for _, c := range reqs {
		t.Run(c.Name, func(t *testing.T) {
			now := time.Unix(c.Now, 0)
			v, err := New(testConfig(false, func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			srv := authServer(t, v)
			rest, ok := strings.CutPrefix(c.URL, "http://"+capturedHost)
			if !ok {
				t.Fatalf("fixture URL %q is not on %s", c.URL, capturedHost)
			}
			build := func(rest string) *http.Request {
				req, err := http.NewRequest(c.Method, srv.URL+rest, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = capturedHost
				for k, val := range c.Headers {
					req.Header.Set(k, val)
				}
				return req
			}
			wantOK(t, send(t, build(rest)), testAK)

			path, query, _ := strings.Cut(rest, "?")
			tampered := path + "x"
			if query != "" {
				tampered += "?" + query
			}
			wantErr(t, send(t, build(tampered)), "SignatureDoesNotMatch", 403)

			if c.Headers["Authorization"] == "" {
				return // presigned: the clock checks are covered elsewhere
			}
			later := now.Add(16 * time.Minute)
			v2, err := New(testConfig(false, func() time.Time { return later }))
			if err != nil {
				t.Fatal(err)
			}
			srv2 := authServer(t, v2)
			req := build(rest)
			req.URL.Host = strings.TrimPrefix(srv2.URL, "http://")
			wantErr(t, send(t, req), "RequestTimeTooSkewed", 403)
		})
	}
}

// cliRequest is one request recorded from a real command-line client by
// testdata/capture_server.py (see testdata/capture_clients.sh).
type cliRequest struct {
	Name    string              `json:"name"`
	Method  string              `json:"method"`
	Target  string              `json:"target"` // raw request-target as received
	Headers map[string][]string `json:"headers"`
	Now     int64               `json:"now"`
}

// TestCLICapturedRequests replays requests recorded on the wire from
// s3cmd 2.3 (SigV4 and --signature-v2), rclone 1.60 (SigV4, --s3-v2-auth,
// provider Other and Minio) and aws-cli 1.45 (cp and the default SigV2
// `s3 presign`), with the clock at capture time: each verifies, and each
// fails once its path changes.
func TestCLICapturedRequests(t *testing.T) {
	data, err := os.ReadFile("testdata/cli-requests.json")
	if err != nil {
		t.Fatal(err)
	}
	var reqs []cliRequest
	if err := json.Unmarshal(data, &reqs); err != nil {
		t.Fatal(err)
	}
	if len(reqs) < 10 {
		t.Fatalf("fixture has %d requests, want at least 10", len(reqs))
	}
	for _, c := range reqs {
		t.Run(c.Name, func(t *testing.T) {
			now := time.Unix(c.Now, 0)
			v, err := New(testConfig(false, func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			srv := authServer(t, v)
			build := func(target string) *http.Request {
				req, err := http.NewRequest(c.Method, srv.URL+target, nil)
				if err != nil {
					t.Fatal(err)
				}
				for k, vals := range c.Headers {
					if http.CanonicalHeaderKey(k) == "Host" {
						req.Host = vals[0]
						continue
					}
					for _, val := range vals {
						req.Header.Add(k, val)
					}
				}
				return req
			}
			wantOK(t, send(t, build(c.Target)), testAK)
			path, query, _ := strings.Cut(c.Target, "?")
			tampered := path + "x"
			if query != "" {
				tampered += "?" + query
			}
			wantErr(t, send(t, build(tampered)), "SignatureDoesNotMatch", 403)
		})
	}
}
