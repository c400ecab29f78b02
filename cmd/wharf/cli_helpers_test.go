package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// TestMain lets a test run this binary as the wharf command (a child
// process with WHARF_TEST_RUN_MAIN=1), so signals, exit codes, terminals
// and pipes are the real ones without a separate go build.
func TestMain(m *testing.M) {
	if os.Getenv("WHARF_TEST_RUN_MAIN") == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// wharfCmd is the wharf command as a child process.
func wharfCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WHARF_TEST_RUN_MAIN=1", "TZ=UTC",
		"AWS_CONFIG_FILE=/nonexistent-wharf", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent-wharf", "AWS_EC2_METADATA_DISABLED=true")
	return cmd
}

// runWharf runs wharf as a child process and returns its output and exit
// status.
func runWharf(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := wharfCmd(ctx, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("wharf %s: %v", strings.Join(args, " "), err)
	}
	return o.String(), e.String(), code
}

// slowS3 is an in-process S3 server (gofakes3) whose object GETs can be
// slowed down, so a long command can be watched and interrupted.
type slowS3 struct {
	url    string
	client *s3.Client
	delay  atomic.Int64 // nanoseconds added to each object GET
	gets   atomic.Int64
	deny   sync.Map // "/bucket/key" → [2]string{S3 error code, message}: answered 403
}

// denyObject makes every request for bucket/key fail with 403 and the
// given S3 error code and message.
func (s *slowS3) denyObject(bucket, key, code, msg string) {
	s.deny.Store("/"+bucket+"/"+key, [2]string{code, msg})
}

func newSlowS3(t *testing.T, buckets ...string) *slowS3 {
	t.Helper()
	be := s3mem.New()
	for _, b := range buckets {
		if err := be.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	s := &slowS3{}
	h := gofakes3.New(be).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := s.deny.Load(r.URL.Path); ok {
			e := d.([2]string)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>r1</RequestId></Error>`, e[0], e[1])
			return
		}
		if r.Method == http.MethodGet && strings.Count(strings.Trim(r.URL.Path, "/"), "/") >= 1 {
			s.gets.Add(1)
			if d := time.Duration(s.delay.Load()); d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	s.client = s3.New(s3.Options{
		BaseEndpoint:               aws.String(srv.URL),
		Region:                     "us-east-1",
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	return s
}

// flags are the store flags that reach this server.
func (s *slowS3) flags() []string {
	return []string{"--store", "s3://", "--s3-endpoint", s.url, "--s3-path-style", "--s3-region", "us-east-1",
		"--s3-access-key", "AKIDTEST", "--s3-secret-key", "secret"}
}

// pack writes files as an archive into bucket and returns its manifest URL.
func (s *slowS3) pack(t *testing.T, files map[string][]byte, opt cargopack.Options) string {
	t.Helper()
	res, err := cargopack.Write(context.Background(), cargopack.S3Sink(s.client), cargopack.FromMap(files, time.Unix(1700000000, 0)), opt)
	if err != nil {
		t.Fatal(err)
	}
	return "s3://" + opt.Bucket + "/" + res.ManifestKey
}

// packDir writes files as an archive into a file store under dir and
// returns the manifest URL.
func packDir(t *testing.T, dir string, files map[string][]byte, mtime time.Time, opt cargopack.Options) (string, *cargopack.Result) {
	t.Helper()
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(files, mtime), opt)
	if err != nil {
		t.Fatal(err)
	}
	return "s3://" + opt.Bucket + "/" + res.ManifestKey, res
}

// noTempFiles fails if any .wharf-get-*.tmp file is left under dir.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(fi.Name(), ".wharf-get-") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}
