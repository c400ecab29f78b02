package integration

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestDemo runs the README's command (`wharf demo`) and reads the sample
// bucket back: every key and every byte must be the embedded sample tree's.
func TestDemo(t *testing.T) {
	home := clientHome(t)
	srv, err := startWharf(suite.bin, "demo", []string{"demo", "--listen", "127.0.0.1:0"}, baseEnv(home))
	if err != nil {
		t.Fatal(err)
	}
	sample, _ := filepath.Abs("../cmd/wharf/sample")
	want, err := treeKeys(sample)
	if err != nil {
		t.Fatal(err)
	}
	c := sdkClient(srv, "")
	got := map[string]int64{}
	var order []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("sample")})
	for pages := 1; p.HasMorePages(); pages++ {
		if limit := listPageCap(len(want), 1000); pages > limit {
			t.Fatalf("ListObjectsV2 sample still truncated after %d pages for %d keys: a continuation loop", limit, len(want))
		}
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("ListObjectsV2 sample: %v\n%s", err, tail(srv.Logs(), 20))
		}
		for _, o := range out.Contents {
			got[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
			order = append(order, aws.ToString(o.Key))
		}
	}
	checkListing(t, "wharf demo: ListObjectsV2 sample", want, got, order)
	for _, k := range order {
		resp, err := http.Get(srv.url + "/sample/" + escapePath(k))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("wharf demo: GET sample/%s: %s %v", k, resp.Status, err)
		}
		w, _ := os.ReadFile(filepath.Join(sample, filepath.FromSlash(k)))
		assertSameBytes(t, "wharf demo (curl-style GET)", k, b, w)
	}
	if !regexp.MustCompile(`s3 ls s3://sample/`).MatchString(srv.Logs()) {
		t.Fatalf("wharf demo did not print the commands to try:\n%s", srv.Logs())
	}
	// The commands name the address it serves on (the port --listen's 0
	// picked), not ":0".
	if !regexp.MustCompile(`aws --endpoint-url ` + regexp.QuoteMeta(srv.url) + ` --no-sign-request s3 ls s3://sample/`).MatchString(srv.Logs()) {
		t.Fatalf("wharf demo's commands do not name %s:\n%s", srv.url, srv.Logs())
	}
	m := regexp.MustCompile(`under (\S+)`).FindStringSubmatch(srv.Logs())
	if err := srv.Stop(); err != nil {
		t.Fatalf("wharf demo did not stop cleanly on SIGTERM: %v\n%s", err, tail(srv.Logs(), 20))
	}
	if m != nil {
		if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
			t.Fatalf("wharf demo left its temporary store %s behind (stat: %v)", m[1], err)
		}
	}
	t.Logf("wharf demo: %d sample files listed and served byte-identical anonymously; temp store removed on SIGTERM", len(order))
}

// escapePath percent-encodes a key for a URL path, keeping '/' and the
// unreserved characters (what S3 clients send).
func escapePath(k string) string {
	var b []byte
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c == '/' || c == '-' || c == '_' || c == '.' || c == '~' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') {
			b = append(b, c)
		} else {
			b = append(b, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&15])
		}
	}
	return string(b)
}
