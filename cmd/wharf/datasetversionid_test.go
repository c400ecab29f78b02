package main

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestServeDatasetVersionIDs: GET and HEAD with versionId= of every kind
// on a published dataset's bucket, over HTTP, answer what AWS answers: a
// version id of a wrong form (a path, a control character, too long, as
// dataset.ValidVersionID) 400 InvalidArgument "Invalid version id
// specified"; an empty one 400 InvalidArgument; a well-formed id that is
// no version 404 NoSuchVersion; a delete marker's 405 MethodNotAllowed
// with x-amz-delete-marker: true and its version id; a version its bytes
// with x-amz-version-id.
func TestServeDatasetVersionIDs(t *testing.T) {
	d := newHistoryLake(t)
	addr, _, _, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: "s3://", S3: d.s3Config(),
		Aliases:   []serveAlias{{Name: "sea", Target: "s3://lake/datasets/sea@current"}},
		Anonymous: true, CacheBytes: 16 << 20, RetireGrace: 10 * time.Millisecond, WaitOpen: true,
	})
	cases := []struct {
		name, key, id string
		status        int
		code          string
		header        map[string]string
		body          []byte
	}{
		{"a version", "changed.txt", hsIDs[0], 200, "", map[string]string{"x-amz-version-id": hsIDs[0]}, hsFiles[0]["changed.txt"]},
		{"unknown", "changed.txt", "20991231T000000Z-ffffff", 404, "NoSuchVersion", nil, nil},
		{"before the key existed", "new.txt", hsIDs[0], 404, "NoSuchVersion", nil, nil},
		{"delete marker", "gone.txt", hsIDs[2], 405, "MethodNotAllowed", map[string]string{"x-amz-delete-marker": "true", "x-amz-version-id": hsIDs[2]}, nil},
		{"empty", "changed.txt", "", 400, "InvalidArgument", nil, nil},
		{"path", "changed.txt", "../" + hsIDs[0], 400, "InvalidArgument", nil, nil},
		{"slash", "changed.txt", hsIDs[0] + "/uploads", 400, "InvalidArgument", nil, nil},
		{"control character", "changed.txt", hsIDs[0] + "\x01", 400, "InvalidArgument", nil, nil},
		{"too long", "changed.txt", strings.Repeat("9", 256), 400, "InvalidArgument", nil, nil},
	}
	for _, c := range cases {
		for _, method := range []string{"GET", "HEAD"} {
			req, err := http.NewRequest(method, "http://"+addr+"/sea/"+c.key+"?versionId="+url.QueryEscape(c.id), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.status {
				t.Errorf("%s %s: %d %s, want %d", method, c.name, resp.StatusCode, body, c.status)
				continue
			}
			for h, v := range c.header {
				if got := resp.Header.Get(h); got != v {
					t.Errorf("%s %s: %s %q, want %q", method, c.name, h, got, v)
				}
			}
			if method == "HEAD" {
				continue
			}
			if c.code != "" && !bytes.Contains(body, []byte("<Code>"+c.code+"</Code>")) {
				t.Errorf("%s %s: %s, want code %s", method, c.name, body, c.code)
			}
			if c.body != nil && !bytes.Equal(body, c.body) {
				t.Errorf("%s %s: %q, want %q", method, c.name, body, c.body)
			}
		}
	}
}
