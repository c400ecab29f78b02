package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// fragile is one archive packed for a fault test.
type fragile struct {
	bucket string
	files  []srcFile
	res    *cargopack.Result
}

func packFragile(t *testing.T, bucket string, files []srcFile, opt cargopack.Options) *fragile {
	t.Helper()
	m := map[string][]byte{}
	for _, f := range files {
		m[f.key] = f.data
	}
	opt.Bucket, opt.Prefix, opt.UploadID, opt.SourcePath = srcBucket, "fragile/"+bucket, "up-"+bucket, "/srv/fragile/"+bucket
	res, err := cargopack.Write(context.Background(), cargopack.S3Sink(suite.s3client), cargopack.FromMap(m, treeMTime), opt)
	if err != nil {
		t.Fatal(err)
	}
	return &fragile{bucket, files, res}
}

func (f *fragile) archiveArg() []string {
	return []string{"--archive", f.bucket + "=s3://" + srcBucket + "/" + f.res.ManifestKey}
}

// corrupt flips one byte in the middle of every data object of f (each
// fault archive holds one file, so the flipped byte always lands in it).
func (f *fragile) corrupt(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, k := range f.res.ObjectKeys {
		out, err := suite.s3client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(srcBucket), Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(out.Body)
		out.Body.Close()
		b[len(b)/2] ^= 0x20
		if _, err := suite.s3client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srcBucket), Key: aws.String(k), Body: bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
}

// remove deletes every data object of f from the backend.
func (f *fragile) remove(t *testing.T) {
	t.Helper()
	for _, k := range f.res.ObjectKeys {
		if _, err := suite.s3client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(srcBucket), Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
}

// getOutcome GETs bucket/key (with a Range header unless rng is "") and
// classifies what the client saw; want is the correct body. The only right
// outcomes for damaged or missing data are a 5xx with an S3 error body
// naming the bucket and key, or a 200/206 whose body is aborted. It fails
// the test for anything else: wrong or short bytes as a clean 200/206, a
// 4xx (the client's fault, which this is not), or no response at all (a
// dropped connection or a crashed server).
//
// strictPrefix: the bytes before an aborted body must be correct too. The
// read core promises that for framed chunks (every frame is verified before
// use) and for partial reads of small extents without frame checksums
// (verified whole first). For whole-file reads of plain-tar, direct and
// unframed zstd data it promises only that the body is never complete: the
// file's sha256 is checked as the bytes stream and the final segment is held
// back (archiveview/read.go), so those may send unverified bytes first.
func getOutcome(t *testing.T, srv *wharfServer, bucket, key, rng string, want []byte, strictPrefix bool) string {
	t.Helper()
	what := bucket + "/" + key
	if rng != "" {
		what += " Range " + rng
	}
	c := &http.Client{Timeout: 60 * time.Second}
	req, _ := http.NewRequest(http.MethodGet, srv.url+"/"+bucket+"/"+escapePath(key), nil)
	okStatus := http.StatusOK
	if rng != "" {
		req.Header.Set("Range", rng)
		okStatus = http.StatusPartialContent
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: no response at all (%v), want a 5xx or an aborted body; server exited: %v\n%s", what, err, srv.Exited(), tail(srv.Logs(), 20))
	}
	defer resp.Body.Close()
	body, rerr := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == okStatus && rerr == nil:
		if bytes.Equal(body, want) {
			t.Fatalf("%s: %d with the original bytes although the backend copy is damaged (served from elsewhere?)", what, okStatus)
		}
		t.Fatalf("%s: WRONG BYTES SERVED: clean %d with %d bytes (want %d, damaged in the backend)", what, okStatus, len(body), len(want))
	case resp.StatusCode == okStatus:
		if !bytes.HasPrefix(want, body) {
			if !strictPrefix {
				return fmt.Sprintf("%d then aborted body after %d bytes, not all correct: whole-file read of a shape without frame checksums (%v)", okStatus, len(body), rerr)
			}
			t.Fatalf("%s: WRONG BYTES SERVED before the body was aborted (%d bytes received, %v)", what, len(body), rerr)
		}
		return fmt.Sprintf("%d then aborted body after %d correct bytes (%v)", okStatus, len(body), rerr)
	}
	if resp.StatusCode < 500 {
		t.Fatalf("%s: status %s for damaged backend data, want a 5xx: %q", what, resp.Status, body)
	}
	if !bytes.Contains(body, []byte("<Code>")) {
		t.Fatalf("%s: status %s without an S3 error body: %q", what, resp.Status, body)
	}
	if !bytes.Contains(body, []byte(key)) || !bytes.Contains(body, []byte(bucket)) {
		t.Fatalf("%s: error does not name the bucket (archive) and key: %s", what, body)
	}
	code := regexp.MustCompile(`<Code>([^<]*)</Code>`).FindSubmatch(body)
	msg := regexp.MustCompile(`<Message>([^<]*)</Message>`).FindSubmatch(body)
	if code == nil || msg == nil {
		t.Fatalf("%s: status %s with a malformed S3 error body: %q", what, resp.Status, body)
	}
	return fmt.Sprintf("%s %s: %s", resp.Status, code[1], msg[1])
}

func TestReliability(t *testing.T) {
	t.Run("corrupt-chunks", func(t *testing.T) {
		cases := []*fragile{
			packFragile(t, "fragile-framed", []srcFile{{"a.txt", textBytes(90, 300_000)}}, cargopack.Options{FrameSize: 32 << 10}),
			packFragile(t, "fragile-stream", []srcFile{{"a.txt", textBytes(92, 300_000)}}, cargopack.Options{}),
			packFragile(t, "fragile-plain", []srcFile{{"a.png", pngBytes(93, 300_000)}}, cargopack.Options{FrameSize: 32 << 10}),
			packFragile(t, "fragile-direct", []srcFile{{"a.bin", randomBytes(94, 300_000)}}, cargopack.Options{Direct: true}),
		}
		// Whole-file reads: strict for every shape: frames are verified before
		// use, and extents without frame checksums of at most 8 MiB (these
		// files) are verified whole before their first byte is sent.
		strictWhole := map[string]bool{"fragile-framed": true, "fragile-stream": true, "fragile-plain": true, "fragile-direct": true}
		var args []string
		for _, f := range cases {
			f.corrupt(t)
			args = append(args, f.archiveArg()...)
		}
		srv, err := suite.startServer("fragile", args, false)
		if err != nil {
			t.Fatal(err)
		}
		defer stopOrFail(t, srv)
		for _, f := range cases {
			for _, sf := range f.files {
				out := getOutcome(t, srv, f.bucket, sf.key, "", sf.data, strictWhole[f.bucket])
				t.Logf("reliability: one flipped byte in %s's backend object → GET %s: %s", f.bucket, sf.key, out)
				// A partial read around the damage: every shape must refuse
				// (small extents are verified whole before a partial read).
				out = getOutcome(t, srv, f.bucket, sf.key, "bytes=100000-199999", sf.data[100000:200000], true)
				t.Logf("reliability: one flipped byte in %s's backend object → GET %s Range bytes=100000-199999: %s", f.bucket, sf.key, out)
			}
		}
		// The failures are visible to operators.
		resp, err := http.Get(srv.adminURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`(?m)^wharf_checksum_failures_total ([0-9.e+]+)$`).FindSubmatch(metrics)
		if m == nil || string(m[1]) == "0" {
			t.Fatalf("wharf_checksum_failures_total after %d damaged reads: %q, want > 0", 2*len(cases), m)
		}
		t.Logf("reliability: wharf_checksum_failures_total = %s after the damaged reads", m[1])
	})
	t.Run("large-unframed", func(t *testing.T) {
		// Issue 12: files over the 8 MiB small-extent limit in every shape
		// no frame checksum covers. A ranged read far from the damage, and
		// `aws s3 cp` (parallel 8 MiB ranges), must both fail: the object
		// is read whole and checked before a byte of it is served.
		const size = 10 << 20
		cases := []*fragile{
			packFragile(t, "large-plain", []srcFile{{"a.png", pngBytes(81, size)}}, cargopack.Options{FrameSize: 1 << 20}),
			packFragile(t, "large-direct", []srcFile{{"a.bin", randomBytes(82, size)}}, cargopack.Options{Direct: true}),
			packFragile(t, "large-stream", []srcFile{{"a.txt", textBytes(83, size)}}, cargopack.Options{}),
			packFragile(t, "large-giant", []srcFile{{"a.txt", textBytes(84, size)}}, cargopack.Options{FrameSize: 1 << 20, NoSubFrames: true}),
		}
		args := []string{"--max-frame-bytes", "1MiB"} // the 10 MiB frame of large-giant is streamed
		for _, f := range cases {
			f.corrupt(t)
			args = append(args, f.archiveArg()...)
		}
		srv, err := suite.startServer("large-unframed", args, false)
		if err != nil {
			t.Fatal(err)
		}
		defer stopOrFail(t, srv)
		cli := findAWSCLIs(t)[0]
		env := awsEnv(t, srv)
		for _, f := range cases {
			sf := f.files[0]
			out := getOutcome(t, srv, f.bucket, sf.key, "bytes=100-199", sf.data[100:200], true)
			t.Logf("reliability: one flipped byte in the middle of %s → GET %s Range bytes=100-199: %s", f.bucket, sf.key, out)
			dst := filepath.Join(t.TempDir(), "copy")
			stdout, stderr, err := runErr(env, "", cli.path, "--endpoint-url", srv.url, "--no-sign-request",
				"s3", "cp", "s3://"+f.bucket+"/"+sf.key, dst)
			got, rerr := os.ReadFile(dst)
			switch {
			case err == nil:
				t.Fatalf("%s: aws s3 cp of the damaged file exited 0 (%d bytes written, equal to the source: %v)\n%s%s",
					f.bucket, len(got), bytes.Equal(got, sf.data), stdout, stderr)
			case rerr == nil && len(got) == len(sf.data):
				t.Fatalf("%s: aws s3 cp failed but left a complete-looking file (%v)", f.bucket, err)
			}
			t.Logf("reliability: damaged %s → aws s3 cp fails (%v): %s", f.bucket, err, strings.TrimSpace(tail(stderr, 1)))
		}
	})
	t.Run("missing-chunks", func(t *testing.T) {
		f := packFragile(t, "fragile-missing", []srcFile{{"a.txt", textBytes(95, 100_000)}, {"b.txt", textBytes(96, 1000)}}, cargopack.Options{FrameSize: 32 << 10})
		f.remove(t)
		srv, err := suite.startServer("fragile-missing", f.archiveArg(), false)
		if err != nil {
			// Refusing to start is acceptable if it names the missing object.
			if !strings.Contains(err.Error(), f.res.ObjectKeys[0]) {
				t.Fatalf("wharf serve over an archive with missing chunks failed without naming the chunk %s: %v", f.res.ObjectKeys[0], err)
			}
			t.Logf("reliability: missing chunk → wharf serve refuses to start, naming it")
			return
		}
		defer stopOrFail(t, srv)
		for _, sf := range f.files {
			t.Logf("reliability: chunk deleted from the backend → GET %s: %s", sf.key, getOutcome(t, srv, f.bucket, sf.key, "", sf.data, true))
			t.Logf("reliability: chunk deleted from the backend → GET %s Range bytes=0-99: %s", sf.key, getOutcome(t, srv, f.bucket, sf.key, "bytes=0-99", sf.data[:100], true))
		}
		// The operator learns which object is missing.
		if logs := srv.Logs(); !strings.Contains(logs, f.res.ObjectKeys[0]) {
			t.Errorf("the server's log does not name the missing chunk %s:\n%s", f.res.ObjectKeys[0], tail(logs, 20))
		}
		// And the server is still alive and serving: healthy, and the
		// archive's listing (which needs no chunk) still answers.
		if srv.Exited() {
			t.Fatalf("wharf serve exited after the reads of missing chunks:\n%s", tail(srv.Logs(), 20))
		}
		for _, u := range []string{srv.adminURL + "/healthz", srv.url + "/" + f.bucket + "?list-type=2"} {
			resp, err := http.Get(u)
			if err != nil {
				t.Fatalf("after the reads of missing chunks, GET %s: %v\n%s", u, err, tail(srv.Logs(), 20))
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("after the reads of missing chunks, GET %s: %s %q", u, resp.Status, body)
			}
		}
		t.Logf("reliability: after the missing-chunk reads wharf serve still answers /healthz and ListObjectsV2")
	})
	t.Run("missing-manifest", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		bad := "s3://" + srcBucket + "/no/such/uploads/x/manifest.json.gz"
		cmd := exec.CommandContext(ctx, suite.bin, "serve", "--listen", "127.0.0.1:0", "--store", "s3://",
			"--s3-endpoint", suite.s3url, "--s3-path-style", "--s3-region", "us-east-1", "--anonymous",
			"--archive", "main="+suite.archives["main"].manifestURL, "--archive", "broken="+bad)
		cmd.Env = suite.serverEnv()
		var (
			out []byte
			err error
		)
		suite.backend.startup(func() { out, err = cmd.CombinedOutput() }) // it opens "main" first
		if err == nil || ctx.Err() != nil {
			t.Fatalf("wharf serve with a missing manifest: err %v (ctx %v), want a non-zero exit before listening\n%s", err, ctx.Err(), out)
		}
		if !strings.Contains(string(out), "no/such/uploads/x/manifest.json.gz") {
			t.Fatalf("wharf serve with a missing manifest: the message does not name it:\n%s", out)
		}
		t.Logf("reliability: missing manifest → wharf serve exits %v naming it", err)
	})
	t.Run("lying-manifest", func(t *testing.T) {
		// A manifest whose file sizes and checksums do not match the chunk:
		// write an archive, then overwrite its chunks with another archive's.
		a := packFragile(t, "fragile-liar", []srcFile{{"a.txt", textBytes(97, 100_000)}}, cargopack.Options{FrameSize: 16 << 10})
		b := packFragile(t, "fragile-other", []srcFile{{"a.txt", textBytes(98, 100_000)}}, cargopack.Options{FrameSize: 16 << 10})
		ctx := context.Background()
		if len(a.res.ObjectKeys) != len(b.res.ObjectKeys) {
			t.Fatalf("test setup: %d vs %d objects", len(a.res.ObjectKeys), len(b.res.ObjectKeys))
		}
		for i, k := range a.res.ObjectKeys {
			out, err := suite.s3client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(srcBucket), Key: aws.String(b.res.ObjectKeys[i])})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(out.Body)
			out.Body.Close()
			if _, err := suite.s3client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srcBucket), Key: aws.String(k), Body: bytes.NewReader(body)}); err != nil {
				t.Fatal(err)
			}
		}
		srv, err := suite.startServer("fragile-liar", a.archiveArg(), false)
		if err != nil {
			t.Fatal(err)
		}
		defer stopOrFail(t, srv)
		t.Logf("reliability: chunk swapped for another archive's → GET a.txt: %s", getOutcome(t, srv, a.bucket, "a.txt", "", a.files[0].data, true))
	})
}
