package cargopack

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// newFakeS3 starts gofakes3 in-process and returns a client for it.
func newFakeS3(t *testing.T, bucket string) *s3.Client {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(srv.Close)
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("AK", "SK", ""),
	})
}

func getObject(t *testing.T, c *s3.Client, bucket, key string) ([]byte, *s3.GetObjectOutput) {
	t.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, out
}

// TestS3Sink writes a framed archive and a direct upload through the real
// aws-sdk-go-v2 client into gofakes3 and reads every object back.
func TestS3Sink(t *testing.T) {
	client := newFakeS3(t, "bkt")
	src := independentSources()
	for _, direct := range []bool{false, true} {
		opt := Options{Bucket: "bkt", Prefix: "pre", UploadID: "s3test", FrameSize: 16 << 10, Direct: direct}
		if direct {
			opt.UploadID = "s3direct"
			opt.FrameSize = 0
		}
		res, err := Write(context.Background(), S3Sink(client), FromMap(src, testMTime), opt)
		if err != nil {
			t.Fatalf("Write to S3: %v", err)
		}
		raw, out := getObject(t, client, "bkt", res.ManifestKey)
		if aws.ToString(out.ContentEncoding) != "gzip" {
			t.Errorf("manifest Content-Encoding %q, want gzip", aws.ToString(out.ContentEncoding))
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("manifest: %v", err)
		}
		var m manifest.Manifest
		if err := json.NewDecoder(zr).Decode(&m); err != nil {
			t.Fatal(err)
		}
		// Read the same archive from a DirSink copy through the shared checks.
		p := &packed{dir: t.TempDir(), res: res, m: &m, src: src, opt: opt}
		for _, k := range res.ObjectKeys {
			b, _ := getObject(t, client, "bkt", k)
			dst := filepath.Join(p.dir, "bkt", filepath.FromSlash(k))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if direct {
			for _, e := range m.Files {
				b, _ := getObject(t, client, "bkt", p.storedKey(t, e.S3Key))
				if !bytes.Equal(b, src[p.relOf(e.Path)]) {
					t.Errorf("%s: direct object differs", e.Path)
				}
			}
			continue
		}
		for _, c := range m.Chunks {
			if strings.HasSuffix(c.S3Key, ".tar.zst") {
				checkFrames(t, p, c)
			}
		}
		checkOffsets(t, p)
	}
}

func TestS3SinkMissingBucket(t *testing.T) {
	client := newFakeS3(t, "exists")
	_, err := Write(context.Background(), S3Sink(client), FromMap(map[string][]byte{"a": []byte("x")}, testMTime),
		Options{Bucket: "nope", UploadID: "u"})
	if err == nil || !strings.Contains(err.Error(), "nope/uploads/u/shard-0/chunk-0.tar.zst") {
		t.Fatalf("error %v does not name the object", err)
	}
}
