package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestSharedIndexReplicas (issue 14/16, issue 20 items 3 and 12): two
// replicas given the same --index-cache s3://BUCKET/PREFIX and the same
// --index-cache-secret-file. The first reads the manifest and publishes the
// archive's index (MACed) under the prefix; the second opens the archive
// from that index with no manifest GET, and both serve the same bytes. A
// damaged index object is refused (the replica reads the manifest again,
// serves the right bytes and replaces the object), so a fourth replica
// opens from the cache again; a replica holding another secret refuses the
// object and reads the manifest.
func TestSharedIndexReplicas(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{
		"shared/a.txt":   []byte("shared index\n"),
		"shared/big.bin": bytes.Repeat([]byte("replica "), 40000),
	}
	res, err := cargopack.Write(context.Background(), cargopack.S3Sink(suite.s3client), cargopack.FromMap(files, treeMTime),
		cargopack.Options{Bucket: srcBucket, Prefix: "replicas", UploadID: "up-replicas", SourcePath: "/srv/replicas", FrameSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	manifestPath := "/" + srcBucket + "/" + res.ManifestKey
	cache := "s3://" + srcBucket + "/wharf-index/"
	secretFile := func(secret string) string {
		p := filepath.Join(t.TempDir(), "index-secret")
		if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secret := secretFile("5b1f0e8d2c7a4e6f9d3b8a1c0e2f4d6b8a0c2e4f6a8b0d2f4e6a8c0b2d4f6e8a")
	args := []string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--store", "s3://",
		"--s3-endpoint", suite.s3url, "--s3-path-style", "--s3-region", "us-east-1", "--anonymous",
		"--archive", "rep=s3://" + srcBucket + "/" + res.ManifestKey, "--index-cache", cache}
	withSecret := append(slices.Clone(args), "--index-cache-secret-file", secret)

	serveAndCheck := func(name string, args []string) *wharfServer {
		t.Helper()
		srv, err := startWharf(suite.bin, name, args, suite.serverEnv())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Stop() })
		for key, want := range files {
			resp, err := http.Get(srv.url + "/rep/" + key)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Equal(got, want) {
				t.Errorf("%s: GET %s: %d, %d bytes (want %d)", name, key, resp.StatusCode, len(got), len(want))
			}
		}
		return srv
	}
	// publishedKey is the index object replica logs published (listing the
	// backend here would count as a wharf listing in the suite's check).
	publishedKey := func(srv *wharfServer) string {
		t.Helper()
		for _, line := range strings.Split(srv.Logs(), "\n") {
			if !strings.Contains(line, `"index cache: published"`) {
				continue
			}
			var ev struct{ Index string }
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatal(err)
			}
			_, name, _ := strings.Cut(ev.Index, " ")
			return "wharf-index/" + name
		}
		t.Fatalf("%s logs no index publication:\n%s", srv.name, tail(srv.Logs(), 20))
		return ""
	}

	a := serveAndCheck("replica-a", withSecret)
	if n := suite.backend.getsOf(manifestPath); n != 1 {
		t.Fatalf("replica a read the manifest %d times, want 1", n)
	}
	key := publishedKey(a)
	if _, err := suite.s3client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(srcBucket), Key: aws.String(key)}); err != nil {
		t.Fatalf("the published index %s: %v", key, err)
	}

	b := serveAndCheck("replica-b", withSecret)
	if n := suite.backend.getsOf(manifestPath); n != 1 {
		t.Errorf("replica b read the manifest (%d GETs in all), want it to open from the shared index", n)
	}
	if !strings.Contains(b.Logs(), "archive opened from index cache") {
		t.Errorf("replica b did not open from the shared index:\n%s", tail(b.Logs(), 20))
	}

	// Damage the shared index: the next replica refuses it, reads the
	// manifest, serves the right bytes and replaces the object.
	if _, err := suite.s3client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(srcBucket), Key: aws.String(key),
		Body: strings.NewReader("not an index")}); err != nil {
		t.Fatal(err)
	}
	c := serveAndCheck("replica-c", withSecret)
	if n := suite.backend.getsOf(manifestPath); n != 2 {
		t.Errorf("replica c, given a damaged index, read the manifest %d times in all, want 2", n)
	}
	if !strings.Contains(c.Logs(), "index object not authenticated") || !strings.Contains(c.Logs(), `"outcome":"damaged, replaced"`) {
		t.Errorf("replica c did not refuse and replace the damaged index:\n%s", tail(c.Logs(), 20))
	}
	serveAndCheck("replica-d", withSecret)
	if n := suite.backend.getsOf(manifestPath); n != 2 {
		t.Errorf("replica d, after the replacement, read the manifest (%d GETs in all, want 2)", n)
	}

	// A replica holding another secret refuses the object (and, as its
	// object is then unauthenticated to the others, replaces it).
	other := append(slices.Clone(args), "--index-cache-secret-file", secretFile("another secret of the fleet, at least 32 bytes long"))
	e := serveAndCheck("replica-e", other)
	if n := suite.backend.getsOf(manifestPath); n != 3 || !strings.Contains(e.Logs(), "MACed with another secret") {
		t.Errorf("replica e (another secret): %d manifest GETs in all, want 3; logs:\n%s", n, tail(e.Logs(), 20))
	}
}
