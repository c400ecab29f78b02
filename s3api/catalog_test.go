package s3api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/s3api"
)

// TestDynamicCatalogSwap serves bucket "cur" from archive A, swaps it to B
// while clients keep reading, and checks that every response is exactly one
// version's bytes with that version's ETag, that B's ETag shows up without
// a restart, and that ListBuckets follows the swap.
func TestDynamicCatalogSwap(t *testing.T) {
	vA := randBytes(1, 300<<10)
	vB := append(randBytes(2, 200<<10), []byte("version B")...)
	a, _ := openArchive(t, map[string][]byte{"v.bin": vA, "only-a.txt": []byte("a")}, fixtureOpts{frameSize: 16 << 10})
	b, _ := openArchive(t, map[string][]byte{"v.bin": vB}, fixtureOpts{frameSize: 16 << 10})
	fa, _ := a.Stat("v.bin")
	fb, _ := b.Stat("v.bin")
	if fa.ETag == fb.ETag {
		t.Fatal("versions share an ETag")
	}
	cat := catalog.NewDynamic(map[string]*archiveview.Archive{"cur": a, "pinned-a": a})
	v, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: zerolog.Nop(), Registerer: reg}))
	t.Cleanup(srv.Close)

	get := func(path string) (int, string, []byte, error) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			return 0, "", nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.Trim(resp.Header.Get("ETag"), `"`), body, err
	}
	_, _, list, _ := get("/")
	if !strings.Contains(string(list), "<Name>cur</Name>") || !strings.Contains(string(list), "<Name>pinned-a</Name>") {
		t.Fatalf("ListBuckets before swap: %s", list)
	}

	var (
		stop       atomic.Bool
		sawA, sawB atomic.Int64
		nfail      atomic.Int64
		wg         sync.WaitGroup
		mu         sync.Mutex
		failures   []string
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				code, etag, body, err := get("/cur/v.bin")
				switch {
				case err == nil && code == 200 && etag == fa.ETag && bytes.Equal(body, vA):
					sawA.Add(1)
				case err == nil && code == 200 && etag == fb.ETag && bytes.Equal(body, vB):
					sawB.Add(1)
				default:
					nfail.Add(1)
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d etag %s err %v len %d", code, etag, err, len(body)))
					mu.Unlock()
				}
			}
		}()
	}
	waitFor := func(n *atomic.Int64) {
		deadline := time.Now().Add(20 * time.Second)
		for n.Load() < 4 && nfail.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(&sawA)
	old := cat.Swap(map[string]*archiveview.Archive{"cur": b, "pinned-a": a})
	if old["cur"] != a {
		t.Error("Swap did not return the previous mapping")
	}
	waitFor(&sawB)
	stop.Store(true)
	wg.Wait()
	if sawA.Load() == 0 || sawB.Load() == 0 {
		t.Errorf("saw %d A and %d B responses; want both", sawA.Load(), sawB.Load())
	}
	if len(failures) > 0 {
		t.Fatalf("%d responses were neither version exactly: %v", len(failures), failures[:min(5, len(failures))])
	}
	// After the swap, every new request sees B; A is still served under
	// its pinned name, and a key only A had is gone from "cur".
	if code, etag, body, _ := get("/cur/v.bin"); code != 200 || etag != fb.ETag || !bytes.Equal(body, vB) {
		t.Errorf("after swap: %d %s", code, etag)
	}
	if code, _, _, _ := get("/cur/only-a.txt"); code != 404 {
		t.Errorf("only-a.txt after swap: %d", code)
	}
	if code, etag, _, _ := get("/pinned-a/v.bin"); code != 200 || etag != fa.ETag {
		t.Errorf("pinned-a after swap: %d %s", code, etag)
	}
	cat.Swap(map[string]*archiveview.Archive{"cur": b})
	_, _, list, _ = get("/")
	if strings.Contains(string(list), "pinned-a") {
		t.Errorf("ListBuckets still lists a removed bucket: %s", list)
	}
	if code, _, _, _ := get("/pinned-a/v.bin"); code != 404 {
		t.Errorf("removed bucket: %d", code)
	}
}

// TestCatalogCollector checks the per-archive gauges against Info and that
// a bucket swapped out stops being exported.
func TestCatalogCollector(t *testing.T) {
	a, _ := openArchive(t, standardFiles(), fixtureOpts{frameSize: 16 << 10})
	b, _ := openArchive(t, map[string][]byte{"x": []byte("x")}, fixtureOpts{})
	cat := catalog.NewDynamic(map[string]*archiveview.Archive{"one": a, "alias": a, "two": b})
	reg := prometheus.NewRegistry()
	reg.MustRegister(catalog.NewCollector(cat))
	ia := a.Info()
	if ia.Frames < 2 || ia.Files < 3 {
		t.Fatalf("fixture too small: %+v", ia)
	}
	var idx bytes.Buffer
	if err := a.WriteIndex(&idx); err != nil {
		t.Fatal(err)
	}
	want := func(name string, info archiveview.Info, index int) string {
		l := `{bucket="` + name + `",upload_id="` + info.UploadID + `"}`
		return "wharf_archive_files" + l + " " + strconv.Itoa(info.Files) + "\n" +
			"wharf_archive_chunks" + l + " " + strconv.Itoa(info.Chunks) + "\n" +
			"wharf_archive_frames" + l + " " + strconv.Itoa(info.Frames) + "\n" +
			"wharf_archive_index_bytes" + l + " " + strconv.Itoa(index) + "\n"
	}
	count := func() (int, error) {
		mfs, err := reg.Gather()
		n := 0
		for _, mf := range mfs {
			n += len(mf.GetMetric())
		}
		return n, err
	}
	got, err := count()
	if err != nil || got != 12 {
		t.Fatalf("gathered %d series, %v; want 12", got, err)
	}
	mfs, _ := reg.Gather()
	var text strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			lbl := m.GetLabel()
			text.WriteString(mf.GetName() + `{bucket="` + lbl[0].GetValue() + `",upload_id="` + lbl[1].GetValue() + `"} ` +
				strconv.Itoa(int(m.GetGauge().GetValue())) + "\n")
		}
	}
	for _, w := range []string{want("one", ia, idx.Len()), want("alias", ia, idx.Len())} {
		for _, line := range strings.Split(strings.TrimSpace(w), "\n") {
			if !strings.Contains(text.String(), line+"\n") {
				t.Errorf("missing %s in\n%s", line, text.String())
			}
		}
	}
	cat.Swap(map[string]*archiveview.Archive{"two": b})
	if got, _ := count(); got != 4 {
		t.Errorf("after swap %d series, want 4", got)
	}
}

// unopenedCatalog serves two buckets whose archives are not open: one
// still opening, one that failed.
type unopenedCatalog struct{ created time.Time }

var errBrokenOpen = fmt.Errorf(`archive "broken": manifest s3://lake/base/uploads/broken/manifest.json.gz: not a manifest`)

func (c unopenedCatalog) Bucket(_ context.Context, name string) (*archiveview.Archive, bool, error) {
	switch name {
	case "opening":
		return nil, true, fmt.Errorf("archive opening: %w", archiveview.ErrOpening)
	case "broken":
		return nil, true, errBrokenOpen
	case "flaky":
		return nil, true, transientOpen{}
	}
	return nil, false, nil
}

// transientOpen is an open failure that says it is transient (as
// catalog.OpenFailure does for a store that was unavailable).
type transientOpen struct{}

func (transientOpen) Error() string   { return "open: the store was unavailable" }
func (transientOpen) Transient() bool { return true }
func (transientOpen) PublicMessage() string {
	return "The archive served as bucket flaky could not be opened: the store was unavailable."
}

func (c unopenedCatalog) EachBucket(fn func(string, time.Time)) {
	fn("broken", c.created)
	fn("opening", c.created)
}

// TestCatalogUnopenedBuckets: buckets whose archive is still opening are
// listed and answer 503 SlowDown with Retry-After (every SDK retries it);
// one whose archive failed to open answers 500 with a generic message and
// never the open error's text (which names the manifest: issue 20, finding
// 9); HEAD answers the same statuses without a body.
func TestCatalogUnopenedBuckets(t *testing.T) {
	created := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	v, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: unopenedCatalog{created}, Verifier: v, Logger: zerolog.Nop()}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		method, path string
		status       int
		want         []string
		retryAfter   bool
	}{
		{"GET", "/", 200, []string{"<Name>broken</Name>", "<Name>opening</Name>", "<CreationDate>2026-03-04T05:06:07.000Z</CreationDate>"}, false},
		{"GET", "/opening/a.txt", 503, []string{"<Code>SlowDown</Code>", "still being opened"}, true},
		{"GET", "/opening?list-type=2", 503, []string{"<Code>SlowDown</Code>"}, true},
		{"HEAD", "/opening", 503, nil, true},
		{"GET", "/broken/a.txt", 500, []string{"<Code>InternalError</Code>", "could not be opened. The server&#39;s log has the details."}, false},
		{"HEAD", "/broken/a.txt", 500, nil, false},
		{"GET", "/flaky/a.txt", 503, []string{"<Code>SlowDown</Code>", "bucket flaky could not be opened: the store was unavailable"}, false},
		{"HEAD", "/flaky/a.txt", 503, nil, false},
		{"GET", "/other/a.txt", 404, []string{"<Code>NoSuchBucket</Code>"}, false},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, resp.StatusCode, body, tc.status)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("%s %s: body lacks %q: %s", tc.method, tc.path, w, body)
			}
		}
		if strings.Contains(string(body), "s3://lake") || strings.Contains(string(body), "not a manifest") {
			t.Errorf("%s %s: the open error's text reaches the client: %s", tc.method, tc.path, body)
		}
		if got := resp.Header.Get("Retry-After") != ""; got != tc.retryAfter {
			t.Errorf("%s %s: Retry-After %q", tc.method, tc.path, resp.Header.Get("Retry-After"))
		}
	}
}
