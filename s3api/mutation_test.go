package s3api_test

// Tests written for mutants that survived scripts/mutation.sh (TESTING.md
// lists them): the access log's level and fields, a handler panic, served
// bytes, defaults, and orderings the other tests saw only one of.

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// accessLine is the subset of an access-log line these tests read.
type accessLine struct {
	Level     string `json:"level"`
	Message   string `json:"message"`
	Op        string `json:"op"`
	Key       string `json:"key"`
	Status    int    `json:"status"`
	AccessKey string `json:"access_key"`
	Error     string `json:"error"`
}

// accessLines returns the "request" lines of a JSON log.
func accessLines(t *testing.T, logs string) []accessLine {
	t.Helper()
	var out []accessLine
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var l accessLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l.Message == "request" {
			out = append(out, l)
		}
	}
	return out
}

// TestAccessLogLevelsAndFields: a served request is logged at info with the
// caller's access key; a 500 at warn, with the cause naming archive and key.
func TestAccessLogLevelsAndFields(t *testing.T) {
	var fail bool
	f := newFixture(t, standardFiles(), fixtureOpts{wrap: func(s backend.Store) backend.Store {
		return faults.NewFaulty(s, faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
			if fail && (r.Op == "range" || r.Op == "get") {
				return faults.Fault{Kind: faults.FaultError, Err: backend.ErrAccessDenied}
			}
			return faults.Fault{}
		}})
	}})
	c := newSDKClient(t, f.srv.URL, testAK, testSK)
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("hello.txt")})
	if err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	fail = true
	_, err = c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("dir/a.bin")})
	wantSDKErr(t, "GetObject", err, "InternalError", 500)

	lines := accessLines(t, f.logs.String())
	var ok, failed *accessLine
	for i := range lines {
		switch {
		case lines[i].Key == "hello.txt" && ok == nil:
			ok = &lines[i]
		case lines[i].Key == "dir/a.bin" && lines[i].Status == 500 && failed == nil:
			failed = &lines[i]
		}
	}
	if ok == nil || failed == nil {
		t.Fatalf("access lines for both requests, got %+v", lines)
	}
	if ok.Level != "info" || ok.Status != 200 || ok.AccessKey != testAK || ok.Error != "" {
		t.Errorf("served GET logged as %+v; want info, 200, access_key %s, no error", *ok, testAK)
	}
	if failed.Level != "warn" || failed.AccessKey != testAK || !strings.Contains(failed.Error, "archive bkt") || !strings.Contains(failed.Error, `"dir/a.bin"`) {
		t.Errorf("failed GET logged as %+v; want warn with an error naming archive bkt and key dir/a.bin", *failed)
	}
}

// panicCatalog is a Catalog whose lookups panic: a bug in the handler's
// path, which must become a 500 and a logged stack, not a dropped
// connection.
type panicCatalog struct{}

func (panicCatalog) Bucket(context.Context, string) (*archiveview.Archive, bool, error) {
	panic("catalog bug")
}
func (panicCatalog) EachBucket(func(string, time.Time)) { panic("catalog bug") }

func TestHandlerPanicIs500(t *testing.T) {
	v, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{w: &bytes.Buffer{}}
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: panicCatalog{}, Verifier: v,
		Logger: zerolog.New(logs), Registerer: prometheus.NewRegistry()}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/bkt/k")
	if err != nil {
		t.Fatalf("the connection broke instead of a 500: %v", err)
	}
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	wantError(t, resp, body.Bytes(), 500, "InternalError")
	if !strings.Contains(logs.String(), `"message":"handler panic"`) || !strings.Contains(logs.String(), `"stack":`) {
		t.Errorf("no handler-panic line with a stack:\n%s", logs.String())
	}
	lines := accessLines(t, logs.String())
	if len(lines) != 1 || lines[0].Level != "warn" || lines[0].Status != 500 || !strings.Contains(lines[0].Error, "panic: catalog bug") {
		t.Errorf("access lines %+v; want one warn line, 500, error naming the panic", lines)
	}
}

// TestServedBytesOnlyObjectBodies: wharf_served_bytes_total counts
// GetObject bodies, not listing or error bodies.
func TestServedBytesOnlyObjectBodies(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	for _, p := range []string{"/", "/bkt?list-type=2", "/bkt", "/bkt?location", "/bkt?versions", "/bkt/nope"} {
		resp, body := f.do(t, "GET", p, nil)
		if len(body) == 0 {
			t.Fatalf("GET %s (status %d): empty body, the test needs one", p, resp.StatusCode)
		}
	}
	if v := metricValue(t, f.reg, "wharf_served_bytes_total", nil); v != 0 {
		t.Fatalf("served bytes %v after listings and errors only", v)
	}
	resp, body := f.do(t, "GET", "/bkt/hello.txt", nil)
	mustStatus(t, resp, body, 200)
	if v := metricValue(t, f.reg, "wharf_served_bytes_total", nil); v != float64(len(body)) {
		t.Fatalf("served bytes %v, want %d", v, len(body))
	}
}

// TestListBucketsSortedByName: ListBuckets is in name order.
func TestListBucketsSortedByName(t *testing.T) {
	a, _ := openArchive(t, map[string][]byte{"k": []byte("v")}, fixtureOpts{})
	v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: testAK, SecretKey: testSK}}})
	if err != nil {
		t.Fatal(err)
	}
	h := s3api.New(s3api.Config{
		Catalog:  catalog.NewStatic(map[string]*archiveview.Archive{"mid": a, "zed": a, "abc": a, "b-2": a}),
		Verifier: v, Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(),
	})
	names := sdkListBuckets(t, newSDKClient(t, startServer(t, h), testAK, testSK))
	if got := strings.Join(names, ","); got != "abc,b-2,mid,zed" {
		t.Fatalf("ListBuckets order %s, want abc,b-2,mid,zed", got)
	}
}

// TestDefaultOwnerAndHostID: without configuration the owner is "wharf"
// (ID and display name), and x-amz-id-2 is 24 random bytes in hex, never the
// request id.
func TestDefaultOwnerAndHostID(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	resp, body := f.do(t, "GET", "/", nil)
	mustStatus(t, resp, body, 200)
	var res struct {
		Owner struct{ ID, DisplayName string }
	}
	if err := xml.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Owner.ID != "wharf" || res.Owner.DisplayName != "wharf" {
		t.Errorf("owner %+v, want wharf/wharf", res.Owner)
	}
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		resp, body := f.do(t, "HEAD", "/bkt/hello.txt", nil)
		mustStatus(t, resp, body, 200)
		id2, rid := resp.Header.Get("x-amz-id-2"), resp.Header.Get("x-amz-request-id")
		if !regexp.MustCompile(`^[0-9a-f]{48}$`).MatchString(id2) || id2 == rid || seen[id2] {
			t.Errorf("x-amz-id-2 %q (request id %q): want 48 fresh hex digits", id2, rid)
		}
		seen[id2] = true
	}
}

// TestPartNumberOfEmptyObject: partNumber=1 of an empty object is a 200
// with no Content-Range (there is no byte 0 to name).
func TestPartNumberOfEmptyObject(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	for _, m := range []string{"GET", "HEAD"} {
		resp, body := f.do(t, m, "/bkt/empty?partNumber=1", nil)
		mustStatus(t, resp, body, 200)
		if cr := resp.Header.Get("Content-Range"); cr != "" || len(body) != 0 || resp.Header.Get("x-amz-mp-parts-count") != "1" {
			t.Errorf("%s: Content-Range %q, %d body bytes, parts count %q", m, cr, len(body), resp.Header.Get("x-amz-mp-parts-count"))
		}
	}
}

// TestSubResourceChoiceIgnoresQueryOrder: with two sub-resources the one
// answered is the alphabetically first, whatever their order in the query.
func TestSubResourceChoiceIgnoresQueryOrder(t *testing.T) {
	f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true})
	for _, q := range []string{"acl&versions", "versions&acl"} {
		resp, body := f.do(t, "GET", "/bkt?"+q, nil)
		mustStatus(t, resp, body, 200)
		if !bytes.Contains(body, []byte("<AccessControlPolicy")) {
			t.Errorf("GET /bkt?%s answered %.80s, want the ACL", q, body)
		}
	}
}

// TestListingZeroModTime: a file whose modification time is the zero time
// is listed with that time, not an empty LastModified.
func TestListingZeroModTime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	res, err := cargopack.Write(ctx, cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"a": []byte("1"), "b": []byte("2")}, time.Time{}),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1", Created: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := archiveview.Open(ctx, backend.NewFileStore(dir), "src", res.ManifestKey, archiveview.Options{Name: testBucket})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureFromArchive(t, a, fixtureOpts{anonymous: true})
	resp, body := f.do(t, "GET", "/bkt?list-type=2", nil)
	mustStatus(t, resp, body, 200)
	var l struct {
		Contents []struct{ Key, LastModified string }
	}
	if err := xml.Unmarshal(body, &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Contents) != 2 {
		t.Fatalf("listed %+v", l.Contents)
	}
	for _, c := range l.Contents {
		if c.LastModified != "0001-01-01T00:00:00.000Z" {
			t.Errorf("%s: LastModified %q, want 0001-01-01T00:00:00.000Z", c.Key, c.LastModified)
		}
	}
}
