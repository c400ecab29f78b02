package integration

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

const (
	srcBucket = "src" // the real (gofakes3) bucket every archive is packed into
	// Credentials wharf checks (SigV4); the secret has '+' and '/' on purpose.
	testAccessKey = "WHARFINTEGRATIONKEY1"
	testSecretKey = "s3cr3t+with/slash+and/plus/Z9"
	// Fake credentials of the gofakes3 backend (it does not verify them).
	backendKey    = "backend-fake-key"
	backendSecret = "backend-fake-secret"
)

// archiveSpec is one served bucket: its name, its final source tree on disk
// and the manifest URL wharf is given.
type archiveSpec struct {
	bucket      string
	dir         string           // final source tree (what clients must see)
	keys        map[string]int64 // key → size, from dir
	manifestURL string
	shapes      string // for logs
}

// fixture is the state shared by all tests, built once by TestMain.
type fixture struct {
	tmp       string
	bin       string // the wharf binary
	s3url     string // gofakes3 endpoint
	s3client  *s3.Client
	backend   *countingHandler
	archives  map[string]*archiveSpec
	keyed     *wharfServer
	anonymous *wharfServer
}

// suite is set by TestMain before any test runs and read-only afterwards.
var suite *fixture

// countingHandler counts the requests the backend S3 server receives, so
// the tests can assert wharf never lists the real bucket on the read path.
// startLists counts the listings made while a server was starting: each
// archive lists its upload prefixes once at open to learn the chunks'
// storage classes.
type countingHandler struct {
	h          http.Handler
	lists      atomic.Int64
	startLists atomic.Int64
	gets       atomic.Int64
	total      atomic.Int64
	paths      sync.Map // object GET path → *atomic.Int64

	starts  atomic.Int64 // start-ups under way
	mu      sync.Mutex
	listLog []string // every listing, for the failure message ("!" outside any start-up)
}

// getsOf returns how many GETs of the object at path (/BUCKET/KEY) the
// backend received.
func (c *countingHandler) getsOf(path string) int64 {
	if n, ok := c.paths.Load(path); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// starting runs start (a server's start-up) and books the listings made
// meanwhile as start-up listings.
func (c *countingHandler) starting(start func() (*wharfServer, error)) (*wharfServer, error) {
	var (
		s   *wharfServer
		err error
	)
	c.startup(func() { s, err = start() })
	return s, err
}

// startup runs fn, a wharf start-up (that may fail), and books the
// listings made meanwhile as start-up listings.
func (c *countingHandler) startup(fn func()) {
	before := c.lists.Load()
	c.starts.Add(1)
	defer c.starts.Add(-1)
	fn()
	c.startLists.Add(c.lists.Load() - before)
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.total.Add(1)
	if r.Method == http.MethodGet {
		parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)
		if len(parts) == 1 || parts[1] == "" {
			if _, loc := r.URL.Query()["location"]; !loc {
				c.lists.Add(1)
				c.mu.Lock()
				mark := " "
				if c.starts.Load() == 0 {
					mark = "!"
				}
				c.listLog = append(c.listLog, mark+time.Now().Format("15:04:05.000")+" "+r.URL.RequestURI())
				c.mu.Unlock()
			}
		} else {
			c.gets.Add(1)
			n, _ := c.paths.LoadOrStore(r.URL.Path, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
	}
	c.h.ServeHTTP(w, r)
}

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func runSuite(m *testing.M) (code int, err error) {
	f := &fixture{archives: map[string]*archiveSpec{}}
	f.tmp, err = os.MkdirTemp("", "wharf-integration-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(f.tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// 1. Build the binary once.
	t0 := time.Now()
	f.bin = filepath.Join(f.tmp, "wharf")
	build := exec.CommandContext(ctx, "go", "build", "-o", f.bin, "./cmd/wharf")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return 1, fmt.Errorf("go build ./cmd/wharf: %v\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "integration: built wharf in %s\n", time.Since(t0).Round(time.Millisecond))

	// 2. The real S3 (gofakes3 in process, or WHARF_S3_BACKEND: s3backend_test.go).
	s3h, stopS3, err := startS3Backend(ctx, f.tmp)
	if err != nil {
		return 1, err
	}
	defer stopS3()
	f.backend = &countingHandler{h: s3h}
	startupBooks = f.backend
	ts := httptest.NewServer(f.backend)
	defer ts.Close()
	f.s3url = ts.URL
	f.s3client = s3.New(s3.Options{
		BaseEndpoint:               aws.String(ts.URL),
		Region:                     "us-east-1",
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(backendKey, backendSecret, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	if _, err := f.s3client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(srcBucket)}); err != nil {
		return 1, fmt.Errorf("creating backend bucket: %w", err)
	}

	// 3. Trees and archives.
	t0 = time.Now()
	if err := f.packAll(ctx); err != nil {
		return 1, err
	}
	fmt.Fprintf(os.Stderr, "integration: packed %d archives in %s\n", len(f.archives), time.Since(t0).Round(time.Millisecond))

	// 4. Two servers over the same archives.
	var archiveArgs []string
	for _, name := range f.bucketNames() {
		archiveArgs = append(archiveArgs, "--archive", name+"="+f.archives[name].manifestURL)
	}
	f.keyed, err = f.startServer("keyed", archiveArgs, true)
	if err != nil {
		return 1, err
	}
	defer f.keyed.Stop()
	f.anonymous, err = f.startServer("anonymous", archiveArgs, false)
	if err != nil {
		return 1, err
	}
	defer f.anonymous.Stop()
	listsBefore, startListsBefore := f.backend.lists.Load(), f.backend.startLists.Load()

	suite = f
	code = m.Run()

	// 5. Whole-suite checks: wharf never lists the real bucket on the read
	// path (only servers starting list, once per upload prefix), and both
	// servers shut down gracefully on SIGTERM.
	if n := f.backend.lists.Load() - listsBefore - (f.backend.startLists.Load() - startListsBefore); n != 0 {
		fmt.Fprintf(os.Stderr, "FAIL: wharf sent %d ListObjects requests to the backend while serving (want 0); every listing:\n  %s\n",
			n, strings.Join(f.backend.listLog, "\n  "))
		code = 1
	}
	fmt.Fprintf(os.Stderr, "integration: backend saw %d requests (%d object GETs) in total\n", f.backend.total.Load(), f.backend.gets.Load())
	for _, s := range []*wharfServer{f.keyed, f.anonymous} {
		if s.Exited() {
			fmt.Fprintf(os.Stderr, "FAIL: wharf serve (%s) exited during the tests: %v\n%s", s.name, s.err, s.Logs())
			code = 1
			continue
		}
		if err := s.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: wharf serve (%s) did not shut down cleanly on SIGTERM: %v\n%s", s.name, err, tail(s.Logs(), 20))
			code = 1
		}
	}
	return code, nil
}

// serverEnv is the wharf subprocess environment: fake backend credentials,
// a private HOME, nothing from the user's AWS configuration.
func (f *fixture) serverEnv() []string {
	home := filepath.Join(f.tmp, "server-home")
	os.MkdirAll(home, 0o755)
	return append(baseEnv(home),
		"AWS_ACCESS_KEY_ID="+backendKey,
		"AWS_SECRET_ACCESS_KEY="+backendSecret,
		"AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE="+filepath.Join(home, "aws-config-none"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "aws-credentials-none"),
		"AWS_EC2_METADATA_DISABLED=true",
	)
}

func (f *fixture) startServer(name string, archiveArgs []string, keyed bool) (*wharfServer, error) {
	args := []string{
		"serve",
		"--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0",
		"--store", "s3://",
		"--s3-endpoint", f.s3url,
		"--s3-path-style",
		"--s3-region", "us-east-1",
	}
	if keyed {
		args = append(args, "--access-key", testAccessKey, "--secret-key", testSecretKey)
	} else {
		args = append(args, "--anonymous")
	}
	args = append(args, archiveArgs...)
	s, err := startWharf(f.bin, name, args, f.serverEnv()) // books its start-up listings
	if err != nil {
		return nil, err
	}
	if keyed {
		s.accessKey, s.secretKey = testAccessKey, testSecretKey
	}
	fmt.Fprintf(os.Stderr, "integration: wharf serve (%s) at %s, admin %s\n", name, s.url, s.adminURL)
	return s, nil
}

func (f *fixture) bucketNames() []string {
	var ns []string
	for n := range f.archives {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// packAll writes every source tree to disk and packs it into the backend.
func (f *fixture) packAll(ctx context.Context) error {
	sink := cargopack.S3Sink(f.s3client)
	srcRoot := filepath.Join(f.tmp, "src")
	type job struct {
		bucket string
		files  []srcFile
		opt    cargopack.Options
		shapes string
	}
	jobs := []job{
		{"main", mainTree(), cargopack.Options{FrameSize: 256 << 10, ChunkSize: 4 << 20, Dedup: true, ContentHash: true},
			"framed zstd, 2,100-file directory, odd names, dedup, 9 MiB unsplit file"},
		{"media", mediaTree(), cargopack.Options{FrameSize: 256 << 10, ChunkSize: 4 << 20, ContentHash: true},
			"already-compressed files → plain .tar chunks"},
		{"split", splitTree(), cargopack.Options{FrameSize: 1 << 20, ChunkSize: 8 << 20, SplitSize: 8 << 20, ContentHash: true},
			"20 MiB file split in 8 MiB parts across chunks"},
		{"direct", directTree(), cargopack.Options{Direct: true, ContentHash: true},
			"direct upload (one object per file)"},
	}
	for _, j := range jobs {
		dir := filepath.Join(srcRoot, j.bucket)
		if err := writeTree(dir, j.files); err != nil {
			return err
		}
		opt := j.opt
		opt.Bucket, opt.Prefix, opt.UploadID = srcBucket, "archives/"+j.bucket, "up-"+j.bucket
		opt.SourcePath = "/srv/data/" + j.bucket
		files, err := cargopack.FromDir(dir)
		if err != nil {
			return fmt.Errorf("cargopack.FromDir(%s): %w", dir, err)
		}
		res, err := cargopack.Write(ctx, sink, files, opt)
		if err != nil {
			return fmt.Errorf("packing %s: %w", j.bucket, err)
		}
		if err := f.addArchive(j.bucket, dir, res.ManifestKey, j.shapes); err != nil {
			return err
		}
	}

	// The incremental chain: a base upload, then a delta with a modified
	// file, a new file and a tombstone, served as bucket "inc".
	base := filepath.Join(f.tmp, "inc-base")
	delta := filepath.Join(f.tmp, "inc-delta")
	final := filepath.Join(srcRoot, "inc")
	for dir, files := range map[string][]srcFile{base: incBase(), delta: incDelta(), final: incFinal()} {
		if err := writeTree(dir, files); err != nil {
			return err
		}
	}
	common := cargopack.Options{Bucket: srcBucket, Prefix: "archives/inc", SourcePath: "/srv/data/inc", FrameSize: 64 << 10, ContentHash: true}
	bf, err := cargopack.FromDir(base)
	if err != nil {
		return err
	}
	opt := common
	opt.UploadID, opt.SyncType = "up-inc-1", "full"
	if _, err := cargopack.Write(ctx, sink, bf, opt); err != nil {
		return fmt.Errorf("packing inc base: %w", err)
	}
	df, err := cargopack.FromDir(delta)
	if err != nil {
		return err
	}
	opt = common
	opt.UploadID, opt.PreviousManifestID, opt.SyncType = "up-inc-2", "up-inc-1", "incremental"
	opt.DeletedPaths = append(opt.DeletedPaths, incDeleted...) // Rel form; recorded as manifest paths
	res, err := cargopack.Write(ctx, sink, df, opt)
	if err != nil {
		return fmt.Errorf("packing inc delta: %w", err)
	}
	return f.addArchive("inc", final, res.ManifestKey, "incremental chain (modified, new, deleted)")
}

func (f *fixture) addArchive(bucket, dir, manifestKey, shapes string) error {
	keys, err := treeKeys(dir)
	if err != nil {
		return err
	}
	f.archives[bucket] = &archiveSpec{
		bucket: bucket, dir: dir, keys: keys, shapes: shapes,
		manifestURL: "s3://" + srcBucket + "/" + manifestKey,
	}
	return nil
}

// servers returns the two servers for table-driven client tests.
func (f *fixture) servers() []*wharfServer { return []*wharfServer{f.keyed, f.anonymous} }

// clientHome makes a private HOME for one external client run.
func clientHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".config"), 0o755)
	return home
}

// need returns the path of an external program or fails the test with the
// Debian package to install.
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s not found: install Debian package %s or run scripts/test.sh", prog, pkg)
	}
	return p
}

// run executes a command with env and returns stdout; a non-zero exit
// fails the test with stderr.
func run(t *testing.T, env []string, dir string, name string, args ...string) string {
	t.Helper()
	out, errOut, err := runErr(env, dir, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, tail(out, 30), tail(errOut, 30))
	}
	return out
}

func runErr(env []string, dir string, name string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.Dir = dir
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	if suite != nil && name == suite.bin {
		// A wharf command (ls, get, restore ...) reads archives itself,
		// outside any server's read path: its listings are booked apart.
		suite.backend.startup(func() { err = cmd.Run() })
	} else {
		err = cmd.Run()
	}
	return o.String(), e.String(), err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
