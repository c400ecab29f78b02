package catalog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// discFake is gofakes3 in-process with a client (for writing) and a
// backend.S3Store over it (for reading), both real.
type discFake struct {
	client *s3.Client
	store  backend.Store
}

func newDiscFake(t *testing.T, bucket string) *discFake {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(mem, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	client := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", ""),
	})
	store, err := backend.NewS3Store(context.Background(), backend.S3Config{
		Endpoint: srv.URL, Region: "us-east-1", PathStyle: true, AccessKeyID: "AK", SecretAccessKey: "SK",
		MaxBackoff: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &discFake{client: client, store: store}
}

// renameSink stores the object named from under the name to instead (a
// partial checkpoint is a manifest stored as manifest.partial.json.gz).
type renameSink struct {
	cargopack.Sink
	from, to string
}

func (r renameSink) Put(ctx context.Context, bucket, key string, body io.Reader, size int64) error {
	if strings.HasSuffix(key, "/"+r.from) {
		key = strings.TrimSuffix(key, r.from) + r.to
	}
	return r.Sink.Put(ctx, bucket, key, body, size)
}

func (f *discFake) pack(t *testing.T, sink cargopack.Sink, files map[string][]byte, o cargopack.Options) *cargopack.Result {
	t.Helper()
	if sink == nil {
		sink = cargopack.S3Sink(f.client)
	}
	if o.Created.IsZero() {
		o.Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if o.FrameSize == 0 {
		o.FrameSize = 4 << 10
	}
	res, err := cargopack.Write(context.Background(), sink, cargopack.FromMap(files, o.Created), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *discFake) put(t *testing.T, bucket, key string, data []byte) {
	t.Helper()
	if err := cargopack.S3Sink(f.client).Put(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

func TestDiscover(t *testing.T) {
	f := newDiscFake(t, "lake")
	files := map[string][]byte{"a.txt": []byte("alpha\n"), "d/b.bin": bytes.Repeat([]byte("b"), 10000)}
	base := cargopack.Options{Bucket: "lake", Prefix: "base"}
	with := func(mod func(*cargopack.Options)) cargopack.Options {
		o := base
		mod(&o)
		return o
	}
	f.pack(t, nil, files, with(func(o *cargopack.Options) { o.UploadID = "20260101-aaaa" }))
	f.pack(t, nil, files, with(func(o *cargopack.Options) { o.UploadID = "Plain_Upload"; o.PlainManifest = true }))
	f.pack(t, renameSink{cargopack.S3Sink(f.client), "manifest.json.gz", "manifest.partial.json.gz"}, files,
		with(func(o *cargopack.Options) { o.UploadID = "half" }))
	f.pack(t, nil, files, with(func(o *cargopack.Options) { o.UploadID = "secret"; o.EncryptedManifest = true }))
	f.pack(t, nil, files, with(func(o *cargopack.Options) { o.UploadID = "chain1" }))
	f.pack(t, nil, map[string][]byte{"new.txt": []byte("new\n")}, with(func(o *cargopack.Options) {
		o.UploadID = "chain2"
		o.PreviousManifestID = "chain1"
		o.SyncType = "incremental"
	}))
	// Fleet writers, one reusing an upload id from the root: a collision.
	f.pack(t, nil, files, with(func(o *cargopack.Options) { o.Prefix = "base/writers/w1"; o.UploadID = "f1" }))
	f.pack(t, nil, files, with(func(o *cargopack.Options) { o.Prefix = "base/writers/w2"; o.UploadID = "20260101-aaaa" }))
	f.put(t, "lake", "base/writers/w1/status.json", []byte(`{"state":"idle"}`))
	// A nested prefix is not under base/uploads/.
	f.pack(t, nil, files, with(func(o *cargopack.Options) { o.Prefix = "base/elsewhere"; o.UploadID = "nested" }))
	// Both manifest names in one folder: the .gz one wins.
	res := f.pack(t, nil, files, with(func(o *cargopack.Options) { o.UploadID = "both" }))
	f.put(t, "lake", strings.TrimSuffix(res.ManifestKey, ".gz"), []byte("{}"))

	faulty := faults.NewFaulty(f.store, faults.FaultConfig{})
	d, err := Discover(context.Background(), faulty, "lake", "/base/")
	if err != nil {
		t.Fatal(err)
	}
	if n := faulty.Requests("list"); n != 1 || faulty.Requests("get")+faulty.Requests("range")+faulty.Requests("stat") != 0 {
		t.Errorf("Discover made %d lists and %d other requests; want exactly one list", n, len(faulty.Log())-int(n))
	}
	got := map[string]string{}
	for _, u := range d.Uploads {
		got[u.ManifestKey] = u.Writer + "|" + u.UploadID
		if u.ETag == "" || u.Size == 0 || u.LastModified.IsZero() || u.Root != "base" || u.Bucket != "lake" {
			t.Errorf("upload %+v lacks listing metadata", u)
		}
	}
	want := map[string]string{
		"base/uploads/20260101-aaaa/manifest.json.gz":            "|20260101-aaaa",
		"base/uploads/Plain_Upload/manifest.json":                "|Plain_Upload",
		"base/uploads/chain1/manifest.json.gz":                   "|chain1",
		"base/uploads/chain2/manifest.json.gz":                   "|chain2",
		"base/uploads/both/manifest.json.gz":                     "|both",
		"base/writers/w1/uploads/f1/manifest.json.gz":            "w1|f1",
		"base/writers/w2/uploads/20260101-aaaa/manifest.json.gz": "w2|20260101-aaaa",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("uploads:\n got %v\nwant %v", got, want)
	}
	skipped := map[string]string{}
	for _, s := range d.Skipped {
		skipped[s.Key] = s.Reason
	}
	for key, reason := range map[string]string{
		"base/uploads/half/manifest.partial.json.gz":     "resume checkpoint",
		"base/uploads/secret/manifest.encrypted.json.gz": "encrypted",
		"base/writers/w1/status.json":                    "heartbeat",
		"base/elsewhere/uploads/nested/manifest.json.gz": "discover its own prefix",
		"base/uploads/both/manifest.json":                "shadowed by base/uploads/both/manifest.json.gz",
	} {
		if !strings.Contains(skipped[key], reason) {
			t.Errorf("skipped[%s] = %q, want a reason containing %q", key, skipped[key], reason)
		}
	}
	if len(skipped) != 5 {
		t.Errorf("skipped %d objects, want 5: %v", len(skipped), skipped)
	}

	// Naming: the root upload whose id is already valid keeps its name;
	// the fleet writer's namesake gets a stable hash suffix; "chain1" is
	// reserved by configuration, so the discovered c1 is renamed.
	named, cols := NameUploads(d.Uploads, func(n string) bool { return n == "chain1" })
	names := map[string]string{}
	for _, u := range named {
		names[u.ManifestKey] = u.Name
		if !ValidBucketName(u.Name) {
			t.Errorf("%s named %q, not a valid bucket name", u.ManifestKey, u.Name)
		}
	}
	w2 := "base/writers/w2/uploads/20260101-aaaa/manifest.json.gz"
	wantW2 := "20260101-aaaa-" + shortHash("lake/"+w2)
	for key, want := range map[string]string{
		"base/uploads/20260101-aaaa/manifest.json.gz": "20260101-aaaa",
		"base/uploads/Plain_Upload/manifest.json":     "plain-upload",
		w2:                                     wantW2,
		"base/uploads/chain1/manifest.json.gz": "chain1-" + shortHash("lake/base/uploads/chain1/manifest.json.gz"),
		"base/uploads/chain2/manifest.json.gz": "chain2",
	} {
		if names[key] != want {
			t.Errorf("name of %s = %q, want %q", key, names[key], want)
		}
	}
	if len(cols) != 2 {
		t.Fatalf("collisions %+v, want 2", cols)
	}
	slices.SortFunc(cols, func(a, b Collision) int { return strings.Compare(a.Name, b.Name) })
	if cols[0].Name != "20260101-aaaa" || cols[0].Winner != "s3://lake/base/uploads/20260101-aaaa/manifest.json.gz" ||
		len(cols[0].Renamed) != 1 || !strings.HasSuffix(cols[0].Renamed[0], "-> "+wantW2) {
		t.Errorf("collision %+v", cols[0])
	}
	if cols[1].Name != "chain1" || cols[1].Winner != "chain1 (configured)" {
		t.Errorf("collision %+v", cols[1])
	}
	// Stable: the same input names the same way.
	again, _ := NameUploads(d.Uploads, func(n string) bool { return n == "chain1" })
	if fmt.Sprint(again) != fmt.Sprint(named) {
		t.Error("NameUploads is not deterministic")
	}

	// Every discovered upload opens, and serves the source bytes.
	for _, u := range named {
		a, err := archiveview.Open(context.Background(), f.store, u.Bucket, u.ManifestKey, archiveview.Options{Name: u.Name})
		if err != nil {
			t.Fatalf("open %s: %v", u.URL(), err)
		}
		fi, ok := a.Stat("a.txt")
		if !ok {
			t.Fatalf("%s: no a.txt", u.URL())
		}
		rc, err := a.Open(context.Background(), fi, 0, fi.Size)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(b, files["a.txt"]) {
			t.Errorf("%s a.txt = %q, %v", u.URL(), b, err)
		}
		a.Close()
	}

	// A listing failure names the root.
	bad := faults.NewFaulty(f.store, faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		return faults.Fault{Kind: faults.FaultError}
	}})
	if _, err := Discover(context.Background(), bad, "lake", "base"); err == nil || !strings.Contains(err.Error(), "s3://lake/base") {
		t.Errorf("list failure: %v", err)
	}
}

func TestBucketName(t *testing.T) {
	long := strings.Repeat("x", 70)
	for _, tc := range []struct{ in, want string }{
		{"20260101-a1b2c3d4", "20260101-a1b2c3d4"},
		{"My_Upload", "my-upload"},
		{"a..b", "a.b"},
		{"-.abc.-", "abc"},
		{"192.168.0.1", "u-192.168.0.1"},
		{"ab", "ab-" + shortHash("ab")},
		{"", shortHash("")},
		{"___", shortHash("___")},
		{long, strings.Repeat("x", 54) + "-" + shortHash(long)},
		{"Ünïcode id", "n--code-id"},
	} {
		got := BucketName(tc.in)
		if got != tc.want {
			t.Errorf("BucketName(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !ValidBucketName(got) {
			t.Errorf("BucketName(%q) = %q is not valid", tc.in, got)
		}
	}
	for name, want := range map[string]bool{"abc": true, "a.b-c": true, "ab": false, "Abc": false, "a..b": false,
		"-ab": false, "ab.": false, "10.0.0.1": false, strings.Repeat("a", 64): false, "a_b": false} {
		if ValidBucketName(name) != want {
			t.Errorf("ValidBucketName(%q) = %v", name, !want)
		}
	}
}

func FuzzBucketName(f *testing.F) {
	for _, s := range []string{"", "a", "20260101-a1b2c3d4", "X..Y", "1.2.3.4", strings.Repeat("-.", 40), "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		n := BucketName(id)
		if !ValidBucketName(n) {
			t.Fatalf("BucketName(%q) = %q, invalid", id, n)
		}
		if ValidBucketName(id) && n != id {
			t.Fatalf("valid %q mapped to %q", id, n)
		}
	})
}

func TestParseDiscoverURL(t *testing.T) {
	for in, want := range map[string]string{
		"s3://b/p":        "b|p",
		"s3://b/p/q/":     "b|p/q",
		"s3://b":          "b|",
		"s3://b/":         "b|",
		"s3://b//uploads": "b|uploads",
	} {
		b, p, err := ParseDiscoverURL(in)
		if err != nil || b+"|"+p != want {
			t.Errorf("ParseDiscoverURL(%q) = %q, %q, %v; want %s", in, b, p, err, want)
		}
	}
	for _, bad := range []string{"b/p", "file:///x", "s3:///p", "s3://a b/p"} {
		if _, _, err := ParseDiscoverURL(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseDiscoverURL(%q): %v", bad, err)
		}
	}
}

func TestLatest(t *testing.T) {
	f := newDiscFake(t, "lake")
	now := time.Now().UTC().Truncate(time.Second)
	files := map[string][]byte{"v.txt": []byte("old\n")}
	f.pack(t, nil, files, cargopack.Options{Bucket: "lake", Prefix: "src", UploadID: "old", Created: now.Add(-2 * time.Hour)})
	f.pack(t, nil, map[string][]byte{"v.txt": []byte("new\n")}, cargopack.Options{Bucket: "lake", Prefix: "src", UploadID: "new", Created: now})
	f.pack(t, nil, files, cargopack.Options{Bucket: "lake", Prefix: "src", UploadID: "zz-broken", Created: now})
	d, err := Discover(context.Background(), f.store, "lake", "src")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Uploads) != 3 {
		t.Fatalf("uploads %+v", d.Uploads)
	}
	var opened []string
	open := func(ctx context.Context, u Upload) (*archiveview.Archive, error) {
		opened = append(opened, u.UploadID)
		if u.UploadID == "zz-broken" {
			return nil, fmt.Errorf("archive %s: corrupt", u.UploadID)
		}
		return archiveview.Open(ctx, f.store, u.Bucket, u.ManifestKey, archiveview.Options{Name: u.UploadID})
	}
	// Listing times as the store would have them: each manifest was
	// written a minute after its upload started.
	ups := slices.Clone(d.Uploads)
	for i := range ups {
		switch ups[i].UploadID {
		case "old":
			ups[i].LastModified = now.Add(-2*time.Hour + time.Minute)
		default:
			ups[i].LastModified = now.Add(time.Minute)
		}
	}
	a, u, skipped, err := Latest(context.Background(), ups, 0, open)
	if err != nil {
		t.Fatal(err)
	}
	if u.UploadID != "new" || a.UploadID() != "new" {
		t.Errorf("latest = %s", u.UploadID)
	}
	fi, _ := a.Stat("v.txt")
	rc, err := a.Open(context.Background(), fi, 0, fi.Size)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "new\n" {
		t.Errorf("latest content %q", b)
	}
	if fmt.Sprint(opened) != "[zz-broken new]" {
		t.Errorf("opened %v; want the broken newest candidate, then new, and never old", opened)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "corrupt") {
		t.Errorf("skipped %+v", skipped)
	}
	// Old candidates are still considered when their manifest is recent
	// enough to hide a newer created_at.
	opened = nil
	for i := range ups {
		ups[i].LastModified = now.Add(time.Minute)
	}
	if _, u, _, err := Latest(context.Background(), ups, 0, open); err != nil || u.UploadID != "new" || len(opened) != 3 {
		t.Errorf("latest %s %v after opening %v", u.UploadID, err, opened)
	}
	if _, _, _, err := Latest(context.Background(), nil, 0, open); err == nil {
		t.Error("Latest of nothing succeeded")
	}
	if _, _, _, err := Latest(context.Background(), ups[2:3], 0, func(context.Context, Upload) (*archiveview.Archive, error) {
		return nil, fmt.Errorf("nope")
	}); err == nil || !strings.Contains(err.Error(), "could be opened") {
		t.Errorf("Latest with nothing openable: %v", err)
	}
}

func FuzzParseDiscoverURL(f *testing.F) {
	for _, s := range []string{"s3://b/p", "s3://b", "s3:///", "s3://b//uploads/", "http://x/y", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		b, p, err := ParseDiscoverURL(u)
		if err != nil {
			return
		}
		if b == "" || strings.ContainsRune(b, '/') || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
			t.Fatalf("ParseDiscoverURL(%q) = %q, %q", u, b, p)
		}
	})
}

// TestSplitUploadPath: discovery's rule (directly under the root or one
// writer's folder) over manifest.UploadDir's layout.
func TestSplitUploadPath(t *testing.T) {
	for _, tc := range []struct {
		rel, writer, id string
		ok              bool
	}{
		{"uploads/a/manifest.json", "", "a", true},
		{"uploads/a/manifest.json.gz", "", "a", true},
		{"writers/w/uploads/a/manifest.json.gz", "w", "a", true},
		{"uploads//manifest.json", "", "", false},
		{"writers//uploads/a/manifest.json", "", "", false},
		{"writers/uploads/a/manifest.json", "", "", false},
		{"writers/w/x/uploads/a/manifest.json", "", "", false},
		{"x/uploads/a/manifest.json", "", "", false},
		{"uploads/a/b/manifest.json", "", "", false},
		{"uploads/a/manifest.partial.json.gz", "", "", false},
		{"uploads/a/manifest.encrypted.json.gz", "", "", false},
		{"manifest.json", "", "", false},
		{"/uploads/0/manifest.json", "", "", false}, // found by FuzzSplitUploadPath over UploadDir
	} {
		w, id, ok := splitUploadPath(tc.rel)
		if w != tc.writer || id != tc.id || ok != tc.ok {
			t.Errorf("splitUploadPath(%q) = %q, %q, %v; want %q, %q, %v", tc.rel, w, id, ok, tc.writer, tc.id, tc.ok)
		}
	}
}

func FuzzSplitUploadPath(f *testing.F) {
	for _, s := range []string{"uploads/a/manifest.json", "writers/w/uploads/a/manifest.json.gz", "uploads//x", "writers//uploads/a/m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		w, id, ok := splitUploadPath(rel)
		if !ok {
			return
		}
		want := "uploads/" + id + "/"
		if w != "" {
			want = "writers/" + w + "/" + want
		}
		if id == "" || strings.Contains(id, "/") || strings.Contains(w, "/") || !strings.HasPrefix(rel, want) {
			t.Fatalf("splitUploadPath(%q) = %q, %q", rel, w, id)
		}
	})
}
