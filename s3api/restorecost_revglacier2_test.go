package s3api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// statCountStore counts the HEADs (Stat) sent to the Glacier model.
// inflate is added to every size it reports (a store holding larger
// objects than the manifest says).
type statCountStore struct {
	*faults.GlacierStore
	stats   atomic.Int64
	inflate int64
}

func (s *statCountStore) Stat(ctx context.Context, bucket, key string) (backend.ObjectInfo, error) {
	s.stats.Add(1)
	oi, err := s.GlacierStore.Stat(ctx, bucket, key)
	if err == nil && s.inflate > 0 {
		oi.Size += s.inflate
	}
	return oi, err
}

func (s *statCountStore) List(ctx context.Context, bucket, prefix string, fn func(backend.ObjectInfo) error) error {
	return s.GlacierStore.List(ctx, bucket, prefix, func(oi backend.ObjectInfo) error {
		if s.inflate > 0 {
			oi.Size += s.inflate
		}
		return fn(oi)
	})
}

// otherAK is a second access key of the cost fixture.
const otherAK = "AKIDOTHERKEY"

// costFixture serves big.bin over 48 GLACIER chunks (a part per chunk)
// and other.bin in DEEP_ARCHIVE chunks
// with a restore-status TTL of 1 ns (every state is stale at once: the
// worst case of a client paging every TTL), counting the HEADs.
type costFixture struct {
	store  *statCountStore
	g      *faults.Glacier
	reg    *prometheus.Registry
	logs   *syncWriter
	url    string
	chunks int
}

func newCostFixture(t *testing.T, cfg s3api.Config) *costFixture {
	t.Helper()
	return newCostFixtureInflated(t, cfg, 0)
}

// newCostFixtureInflated is newCostFixture over a store reporting every
// object inflate bytes larger than the manifest says.
func newCostFixtureInflated(t *testing.T, cfg s3api.Config, inflate int64) *costFixture {
	t.Helper()
	return newCostFixtureNamed(t, cfg, inflate, "big.bin")
}

// newCostFixtureNamed is newCostFixtureInflated with the archived file
// (of 40 chunks or more) under the key big.
func newCostFixtureNamed(t *testing.T, cfg s3api.Config, inflate int64, big string) *costFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	files := map[string][]byte{big: randBytes(43, 96<<10), "other.bin": randBytes(44, 16<<10)}
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(files, testMTime),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", FrameSize: 2 << 10, ChunkSize: 2 << 10, SplitSize: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour})
	seen := map[string]bool{}
	for _, e := range res.Manifest.Files {
		if strings.HasSuffix(e.Path, big) {
			seen[e.S3Key] = true
			g.SetClass("src", "p/"+e.S3Key, backend.ClassGlacier, "")
		} else if !seen[e.S3Key] {
			g.SetClass("src", "p/"+e.S3Key, backend.ClassDeepArchive, "")
		}
	}
	if len(seen) < 40 {
		t.Fatalf("test setup: big.bin lies in %d chunks, want 40 or more", len(seen))
	}
	store := &statCountStore{GlacierStore: g.Store(backend.NewFileStore(dir)), inflate: inflate}
	a, err := archiveview.Open(ctx, store, "src", res.ManifestKey,
		archiveview.Options{Name: testBucket, StorageClasses: true, RestoreTTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: testAK, SecretKey: testSK}, {AccessKey: otherAK, SecretKey: testSK}}})
	if err != nil {
		t.Fatal(err)
	}
	f := &costFixture{store: store, g: g, reg: prometheus.NewRegistry(), logs: &syncWriter{w: &bytes.Buffer{}}, chunks: len(seen)}
	cfg.Catalog = catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a})
	cfg.Verifier = v
	cfg.Logger = zerolog.New(f.logs)
	cfg.Registerer = f.reg
	cfg.AllowRestore = true
	srv := httptest.NewServer(s3api.New(cfg))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// TestRestoreStatusHeadsBounded: a reading key's listing with RestoreStatus
// and its HEAD of a file over many archived chunks each cost at most 32
// backend HEADs (the rest answered from the state already known, as S3
// answers a listing without waiting), however many chunks are stale; and
// what the client sees stays true: the restore started is shown ongoing.
// On the code before, each request HEADed every stale chunk (48 here, one
// per archived chunk per --restore-status-ttl in general).
func TestRestoreStatusHeadsBounded(t *testing.T) {
	f := newCostFixture(t, s3api.Config{})
	c := noRetryClient(t, f.url)
	ctx := context.Background()
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("restore: %d %v", status, err)
	}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"ListObjectsV2 with RestoreStatus", func() error {
			out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket),
				OptionalObjectAttributes: []types.OptionalObjectAttributes{types.OptionalObjectAttributesRestoreStatus}})
			if err != nil {
				return err
			}
			for _, o := range out.Contents {
				if aws.ToString(o.Key) == "big.bin" && (o.RestoreStatus == nil || !aws.ToBool(o.RestoreStatus.IsRestoreInProgress)) {
					t.Errorf("listing shows big.bin's restore as %+v; want in progress", o.RestoreStatus)
				}
			}
			return nil
		}},
		{"HeadObject", func() error {
			out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String("big.bin")})
			if err != nil {
				return err
			}
			if r := aws.ToString(out.Restore); r != `ongoing-request="true"` || out.StorageClass != types.StorageClassGlacier {
				t.Errorf("HEAD big.bin: class %s restore %q; want GLACIER, ongoing", out.StorageClass, r)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 3 {
				before := f.store.stats.Load()
				if err := tc.do(); err != nil {
					t.Fatal(err)
				}
				if n := f.store.stats.Load() - before; n > 32 || n == 0 {
					t.Fatalf("one request made %d backend HEADs for %d stale archived chunks; want 1 to 32", n, f.chunks)
				}
			}
		})
	}
}

// TestRestoreBudgetPerKey: --max-restore-bytes-per-key bounds what one
// key may ask to restore per hour. A restore over the key's budget is
// 503 SlowDown with Retry-After, sends no RestoreObject and is counted;
// a file larger than the whole budget is restored as far as the budget
// goes (TestRestoreBudgetFileLargerThanBudget); another key has its own
// budget. On the code before, nothing bounded a key's restores.
func TestRestoreBudgetPerKey(t *testing.T) {
	f := newCostFixture(t, s3api.Config{MaxRestoreBytesPerKey: 1 << 20})
	c := noRetryClient(t, f.url)
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("first restore (larger than the budget, budget full): %d %v; want 202", status, err)
	}
	sent := len(f.g.Started())
	if sent == 0 || sent >= f.chunks {
		t.Fatalf("first restore sent %d RestoreObjects for %d chunks; want the budget's worth", sent, f.chunks)
	}
	status, err := restoreStatus(t, c, "other.bin", 1, types.TierBulk)
	if status != 503 || apiCode(err) != "SlowDown" {
		t.Fatalf("restore past the key's budget: %d %v; want 503 SlowDown", status, err)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("no HTTP response in %v", err)
	}
	// The budget is spent: the key waits until a chunk's charge (128 KiB
	// of 1 MiB an hour) is back.
	if ra, _ := strconv.Atoi(re.Response.Header.Get("Retry-After")); ra < 60 || ra > 3600 {
		t.Errorf("Retry-After %q; want the seconds until the budget holds a chunk's charge", re.Response.Header.Get("Retry-After"))
	}
	if n := len(f.g.Started()); n != sent {
		t.Fatalf("the throttled restore sent %d RestoreObjects", n-sent)
	}
	if v := testutil.ToFloat64(counterNamed(t, f.reg, "wharf_restores_throttled_total")); v != 1 {
		t.Errorf("wharf_restores_throttled_total = %v; want 1", v)
	}
	// A request invalid for the file's class (Expedited for Deep Archive)
	// is refused as such (400), not throttled: S3 checks the request first.
	if status, err := restoreStatus(t, c, "other.bin", 1, types.TierExpedited); status != 400 || apiCode(err) != "InvalidArgument" {
		t.Errorf("invalid restore past the budget: %d %v; want 400 InvalidArgument", status, err)
	}
	other := noRetryClientFor(t, f.url, otherAK)
	if status, err := restoreStatus(t, other, "other.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("another key's restore: %d %v; want 202 (its own budget)", status, err)
	}
}

// noRetryClientFor is noRetryClient for access key ak.
func noRetryClientFor(t *testing.T, url, ak string) *s3.Client {
	c := newSDKClient(t, url, ak, testSK)
	return s3.New(c.Options(), func(o *s3.Options) { o.RetryMaxAttempts = 1 })
}

// counterNamed returns the value of the unlabelled counter name in reg.
func counterNamed(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: "copy"},
				func() float64 { return mf.Metric[0].GetCounter().GetValue() })
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}
