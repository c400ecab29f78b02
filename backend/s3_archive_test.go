package backend_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// fakeClock is a settable clock for the Glacier model.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newGlacierS3 is gofakes3 behind the Glacier model's HTTP layer, with an
// S3Store pointed at it: S3Store sees archive classes on the wire.
func newGlacierS3(t *testing.T) (*backend.S3Store, *faults.Glacier, *fakeClock, *s3mem.Backend) {
	t.Helper()
	clock := &fakeClock{t: time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)}
	g := faults.NewGlacier(faults.GlacierConfig{Delay: time.Hour, Now: clock.Now})
	mem := s3mem.New()
	faker := gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(g.HTTP(faker.Server()))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store, err := backend.NewS3Store(context.Background(), backend.S3Config{
		Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxBackoff: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	return store, g, clock, mem
}

// TestS3StoreArchiveClasses: S3Store reads classes and restore states from
// HEAD and listings, maps a refused GET to an *ArchivedError carrying the
// class and tier, and maps RestoreObject's answers to results.
func TestS3StoreArchiveClasses(t *testing.T) {
	store, g, clock, mem := newGlacierS3(t)
	ctx := context.Background()
	data := backend.RandBytes(7, 3000)
	for _, k := range []string{"std", "glacier", "deep", "it-archive", "it-frequent", "ir"} {
		if _, err := mem.PutObject("b", k, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	g.SetClass("b", "glacier", backend.ClassGlacier, "")
	g.SetClass("b", "deep", backend.ClassDeepArchive, "")
	g.SetClass("b", "it-archive", backend.ClassIntelligentTiering, backend.TierArchiveAccess)
	g.SetClass("b", "it-frequent", backend.ClassIntelligentTiering, "")
	g.SetClass("b", "ir", backend.ClassGlacierIR, "")

	// Stat: class, tier and "no restore" known.
	for _, tc := range []struct{ key, class, tier string }{
		{"std", backend.ClassStandard, ""}, {"glacier", backend.ClassGlacier, ""}, {"deep", backend.ClassDeepArchive, ""},
		{"it-archive", backend.ClassIntelligentTiering, backend.TierArchiveAccess}, {"it-frequent", backend.ClassIntelligentTiering, ""},
		{"ir", backend.ClassGlacierIR, ""},
	} {
		info, err := store.Stat(ctx, "b", tc.key)
		if err != nil || info.StorageClass != tc.class || info.AccessTier != tc.tier || !info.RestoreKnown || info.Restore.Requested || info.Size != 3000 {
			t.Fatalf("Stat %s: %+v, %v; want %s/%s, no restore", tc.key, info, err, tc.class, tc.tier)
		}
	}

	// GETs: archived objects refused with their class and tier; others read.
	for _, tc := range []struct{ key, class, tier string }{
		{"glacier", backend.ClassGlacier, ""}, {"deep", backend.ClassDeepArchive, ""},
		{"it-archive", backend.ClassIntelligentTiering, backend.TierArchiveAccess},
	} {
		for _, op := range []string{"range", "get"} {
			var err error
			if op == "range" {
				_, _, err = backend.ReadAllRange(store, "b", tc.key, 10, 100, "")
			} else {
				_, _, err = store.Get(ctx, "b", tc.key)
			}
			var ae *backend.ArchivedError
			if !errors.Is(err, backend.ErrArchived) || !errors.As(err, &ae) || ae.StorageClass != tc.class || ae.AccessTier != tc.tier ||
				errors.Is(err, backend.ErrAccessDenied) || backend.IsRetryable(err) {
				t.Fatalf("%s %s: %v; want ErrArchived with %s/%s", op, tc.key, err, tc.class, tc.tier)
			}
			backend.WantErr(t, err, backend.ErrArchived, "b", tc.key)
		}
	}
	for _, k := range []string{"std", "it-frequent", "ir"} {
		if got, _, err := backend.ReadAllRange(store, "b", k, 10, 100, ""); err != nil || string(got) != string(data[10:110]) {
			t.Fatalf("range %s: %v", k, err)
		}
	}
	// A missing key is still 404, not archived.
	g.SetClass("b", "missing", backend.ClassGlacier, "")
	if _, _, err := backend.ReadAllRange(store, "b", "missing", 0, 1, ""); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("missing archived key: %v", err)
	}

	// Restores: 202, then 409 while running, then 200 once done.
	restorer, ok := backend.AsRestorer(store)
	if !ok {
		t.Fatal("S3Store is not a Restorer")
	}
	res, err := restorer.Restore(ctx, "b", "glacier", backend.RestoreRequest{Days: 2, Tier: backend.RetrievalBulk})
	if err != nil || res != backend.RestoreStarted {
		t.Fatalf("first restore: %v, %v", res, err)
	}
	info, err := store.Stat(ctx, "b", "glacier")
	if err != nil || !info.Restore.Requested || !info.Restore.Ongoing {
		t.Fatalf("Stat during the restore: %+v, %v", info, err)
	}
	if res, err := restorer.Restore(ctx, "b", "glacier", backend.RestoreRequest{Days: 2}); err != nil || res != backend.RestoreInProgress {
		t.Fatalf("restore while running: %v, %v", res, err)
	}
	if _, _, err := backend.ReadAllRange(store, "b", "glacier", 0, 10, ""); !errors.Is(err, backend.ErrArchived) {
		t.Fatalf("read while restoring: %v", err)
	}
	clock.Add(time.Hour)
	info, err = store.Stat(ctx, "b", "glacier")
	wantExp := time.Date(2031, 5, 8, 8, 8, 9, 0, time.UTC)
	if err != nil || !info.Restore.Requested || info.Restore.Ongoing || !info.Restore.Expiry.Equal(wantExp) {
		t.Fatalf("Stat after the restore: %+v, %v; want expiry %v", info.Restore, err, wantExp)
	}
	if got, _, err := backend.ReadAllRange(store, "b", "glacier", 10, 100, ""); err != nil || string(got) != string(data[10:110]) {
		t.Fatalf("read after the restore: %v", err)
	}
	if res, err := restorer.Restore(ctx, "b", "glacier", backend.RestoreRequest{Days: 2}); err != nil || res != backend.RestoreAlreadyRestored {
		t.Fatalf("restore of a restored copy: %v, %v", res, err)
	}

	// Listing: classes for all, restore status for the one restored.
	got := map[string]backend.ObjectInfo{}
	if err := store.List(ctx, "b", "", func(oi backend.ObjectInfo) error { got[oi.Key] = oi; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || got["deep"].StorageClass != backend.ClassDeepArchive || got["std"].StorageClass != backend.ClassStandard ||
		got["it-archive"].StorageClass != backend.ClassIntelligentTiering || got["deep"].RestoreKnown {
		t.Fatalf("listing %+v", got)
	}
	if g := got["glacier"]; !g.RestoreKnown || !g.Restore.Requested || g.Restore.Ongoing || !g.Restore.Expiry.Equal(wantExp) {
		t.Fatalf("listed restore state of glacier: %+v", g)
	}

	// Refusals.
	for _, tc := range []struct {
		key  string
		req  backend.RestoreRequest
		want error
	}{
		{"std", backend.RestoreRequest{Days: 1}, backend.ErrNotArchived},
		{"it-frequent", backend.RestoreRequest{}, backend.ErrNotArchived},
		{"deep", backend.RestoreRequest{Days: 1, Tier: backend.RetrievalExpedited}, backend.ErrInvalidRestore},
		{"deep", backend.RestoreRequest{Days: 0}, backend.ErrInvalidRestore},
		{"deep", backend.RestoreRequest{Days: 1, Tier: "Slow"}, backend.ErrInvalidRestore},
		{"nope", backend.RestoreRequest{Days: 1}, backend.ErrNotFound},
	} {
		_, err := restorer.Restore(ctx, "b", tc.key, tc.req)
		backend.WantErr(t, err, tc.want, "b", tc.key)
	}
	// The Intelligent-Tiering archive tier restores without Days.
	if res, err := restorer.Restore(ctx, "b", "it-archive", backend.RestoreRequest{Tier: backend.RetrievalExpedited}); err != nil || res != backend.RestoreStarted {
		t.Fatalf("IT restore: %v, %v", res, err)
	}
	clock.Add(time.Hour)
	if info, err := store.Stat(ctx, "b", "it-archive"); err != nil || info.AccessTier != "" || info.StorageClass != backend.ClassIntelligentTiering {
		t.Fatalf("IT after its restore: %+v, %v", info, err)
	}
	if _, _, err := backend.ReadAllRange(store, "b", "it-archive", 0, 10, ""); err != nil {
		t.Fatalf("IT read after its restore: %v", err)
	}
	// The expired copy is archived again.
	clock.Add(48 * time.Hour)
	if _, _, err := backend.ReadAllRange(store, "b", "glacier", 0, 10, ""); !errors.Is(err, backend.ErrArchived) {
		t.Fatalf("read after the copy expired: %v", err)
	}
	var started []string
	for _, c := range g.Calls() {
		if c.Result == backend.RestoreStarted {
			started = append(started, c.Key)
		}
	}
	if len(started) != 2 || started[0] != "glacier" || started[1] != "it-archive" {
		t.Fatalf("restores started %v", started)
	}
}

// TestInstrumentKeepsRestorer: the metrics wrapper restores through an
// S3Store (counting op="restore") and is no Restorer over a FileStore.
func TestInstrumentKeepsRestorer(t *testing.T) {
	store, g, _, mem := newGlacierS3(t)
	if _, err := mem.PutObject("b", "k", map[string]string{}, bytes.NewReader([]byte("x")), 1, nil); err != nil {
		t.Fatal(err)
	}
	g.SetClass("b", "k", backend.ClassGlacier, "")
	reg := prometheus.NewPedanticRegistry()
	s := backend.Instrument(store, backend.NewMetrics(reg))
	r, ok := backend.AsRestorer(s)
	if !ok {
		t.Fatal("Instrument(S3Store) is not a Restorer")
	}
	if res, err := r.Restore(context.Background(), "b", "k", backend.RestoreRequest{Days: 1}); err != nil || res != backend.RestoreStarted {
		t.Fatalf("%v %v", res, err)
	}
	if got := gather(t, reg)[`wharf_backend_requests_total{op="restore"}`]; got != 1 {
		t.Fatalf("restore counter %v", got)
	}
	if _, ok := backend.AsRestorer(backend.Instrument(backend.NewFileStore(t.TempDir()), backend.NewMetrics(prometheus.NewRegistry()))); ok {
		t.Fatal("Instrument(FileStore) claims to restore")
	}
}
