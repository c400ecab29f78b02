package integration

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// The console (wharf serve --console) in headless Chromium, driven by
// puppeteer-core (installed by the test into tmp/npm-console; it never
// downloads a browser: it drives /usr/bin/chromium). The script
// (clients/console_browser.js) clicks through every page; screenshots
// are kept in tmp/console-screenshots.

const (
	puppeteerVersion = "25.16.0"
	consoleAK        = "CONSOLEKEY"
	consoleSK        = "console-secret-key"
	millionKeys      = 1_000_000
	hostileFile      = "<img src=x onerror=alert(1)>.txt"
)

// npmConsoleDeps installs puppeteer-core (pinned) into tmp/npm-console.
func npmConsoleDeps(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../tmp/npm-console")
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(dir, "node_modules", "puppeteer-core", "package.json")
	installed := func() bool {
		b, err := os.ReadFile(pkg)
		var p struct{ Version string }
		return err == nil && json.Unmarshal(b, &p) == nil && p.Version == puppeteerVersion
	}
	if installed() {
		return dir
	}
	npm := need(t, "npm", "npm")
	os.MkdirAll(dir, 0o755)
	env := append(os.Environ(), "PUPPETEER_SKIP_DOWNLOAD=1")
	out, errOut, err := runErr(env, dir, npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", dir, "puppeteer-core@"+puppeteerVersion)
	if err != nil || !installed() {
		t.Fatalf("npm install puppeteer-core@%s into %s failed: %v\n%s%s", puppeteerVersion, dir, err, tail(out, 20), tail(errOut, 20))
	}
	return dir
}

// writeMillionManifest uploads a manifest of n small files at the root
// ("obj-0000000.txt", ...) in chunks of 1000 that are never read: the
// listing pages come from the index alone.
func writeMillionManifest(ctx context.Context, client *s3.Client, bucket, prefix, upload string, n int) (string, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	w := bufio.NewWriterSize(zw, 1<<20)
	mt := time.Date(2025, 9, 1, 8, 0, 0, 0, time.UTC).Format(time.RFC3339)
	const per = 1000
	chunks := (n + per - 1) / per
	fmt.Fprintf(w, `{"version":"2.1","upload_id":%q,"created_at":%q,"completed_at":%q,"source_path":"/data","hostname":"t","bucket":%q,"prefix":%q,"region":"us-east-1","total_files":%d,"total_bytes":%d,"total_chunks":%d,"shard_count":1,"compression_type":"zstd","compression_level":3,"compression_ratio":1,"files":[`,
		upload, mt, mt, bucket, prefix, n, int64(n)*100, chunks)
	for i := 0; i < n; i++ {
		if i > 0 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, `{"path":"/data/obj-%07d.txt","size":100,"mod_time":%q,"chunk_id":%d,"shard_id":0,"s3_key":"uploads/%s/shard-0/chunk-%d.tar","archive_offset":%d,"checksum":"%064x"}`,
			i, mt, i/per, upload, i/per, 512+(i%per)*1024, i)
	}
	w.WriteString(`],"chunks":[`)
	for c := 0; c < chunks; c++ {
		if c > 0 {
			w.WriteByte(',')
		}
		files := min(per, n-c*per)
		fmt.Fprintf(w, `{"id":%d,"shard_id":0,"s3_key":"uploads/%s/shard-0/chunk-%d.tar","file_count":%d,"file_paths":[],"uncompressed_size":%d,"compressed_size":%d,"created_at":%q,"uploaded_at":%q,"checksum":"%064x"}`,
			c, upload, c, files, files*1024+1024, files*1024+1024, mt, mt, c)
	}
	w.WriteString(`],"shards":[]}`)
	if err := w.Flush(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	key := prefix + "/uploads/" + upload + "/manifest.json.gz"
	_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(buf.Bytes())})
	return key, err
}

// consoleSnippets runs the file page's aws CLI, boto3 and rclone
// snippets, copied as the page shows them, each in an empty directory,
// and compares the file each writes with the source.
func consoleSnippets(t *testing.T, snippets []string, want []byte) {
	t.Helper()
	if len(snippets) != 3 {
		t.Errorf("file page snippets: %q, want aws CLI, boto3 and rclone", snippets)
		return
	}
	py := findPython(t, "python3-boto3", "boto3")
	need(t, "aws", "awscli")
	need(t, "rclone", "rclone")
	for i, name := range []string{"aws CLI", "boto3", "rclone"} {
		dir := t.TempDir()
		env := append(baseEnv(clientHome(t)), "AWS_DEFAULT_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
			"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
		var stdout, stderr string
		var err error
		if name == "boto3" {
			stdout, stderr, err = runErr(env, dir, py, "-c", snippets[i])
		} else {
			stdout, stderr, err = runErr(env, dir, "sh", "-c", snippets[i])
		}
		got, rerr := os.ReadFile(filepath.Join(dir, "README.txt"))
		if err != nil || rerr != nil || !bytes.Equal(got, want) {
			t.Errorf("%s snippet %q: %v %v\n%s%s", name, snippets[i], err, rerr, tail(stdout, 10), tail(stderr, 10))
		}
	}
}

func chartPNG(w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(40 + x%200), uint8(90 + y%150), 180, 255})
		}
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

type consoleRun struct {
	Steps         map[string]json.RawMessage
	Dialogs       []string
	ConsoleErrors []string
	PageErrors    []string
	// FailedResponses are the responses of status 400 or more.
	FailedResponses []string
	Screenshots     []string
	Fatal           string
}

func (r consoleRun) step(t *testing.T, name string, v any) {
	t.Helper()
	raw, ok := r.Steps[name]
	if !ok {
		t.Errorf("step %s did not run", name)
		return
	}
	var e struct{ Error string }
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		t.Errorf("step %s failed in the browser: %s", name, e.Error)
		return
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Errorf("step %s: %v: %s", name, err, raw)
	}
}

// TestConsoleBrowser walks the console in Chromium: buckets, a folder, a
// CSV table, a PNG at its real size, a download, a text preview, hostile
// names and files (no script runs), a file's versions, a 1,000,000-key
// bucket's first and next page; with keys, a failed and a good login,
// only the granted buckets, a restore through the button against the
// Glacier model, logout.
func TestConsoleBrowser(t *testing.T) {
	chromium := need(t, "chromium", "chromium")
	node := need(t, "node", "nodejs")
	modDir := npmConsoleDeps(t)
	ctx := context.Background()
	start := time.Now()

	// The backend: gofakes3 behind the Glacier model.
	g := faults.NewGlacier(faults.GlacierConfig{Delay: 3 * time.Second})
	backendSrv := httptest.NewServer(g.HTTP(gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog())).Server()))
	defer backendSrv.Close()
	client := s3.New(s3.Options{BaseEndpoint: aws.String(backendSrv.URL), Region: "us-east-1", UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(backendKey, backendSecret, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired})
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(srcBucket)}); err != nil {
		t.Fatal(err)
	}
	sink := cargopack.S3Sink(client)
	mtime := time.Date(2025, 4, 5, 6, 7, 8, 0, time.UTC)
	chart := chartPNG(321, 123)
	files := map[string][]byte{
		"README.txt":       []byte("Harbour survey 2025: read me first\nSecond line.\n"),
		"data/vessels.csv": []byte("name,length_m,flag\nAurora,120,NO\nBoreas,88,IS\n"),
		"data/chart.png":   chart,
		"data/depth.bin":   randomBytes(401, 700<<10),
		hostileFile:        []byte("a file with a hostile name\n"),
		"evil.html":        []byte("<!doctype html><script>alert('html')</script><p>an html file</p>\n"),
		"evil.svg":         []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert('svg')"><script>alert('svg2')</script></svg>` + "\n"),
	}
	pack := func(m map[string][]byte, o cargopack.Options) string {
		t.Helper()
		o.Bucket, o.SourcePath = srcBucket, "/srv/console"
		res, err := cargopack.Write(ctx, sink, cargopack.FromMap(m, mtime), o)
		if err != nil {
			t.Fatal(err)
		}
		return "s3://" + srcBucket + "/" + res.ManifestKey
	}
	mainURL := pack(files, cargopack.Options{Prefix: "archives/console", UploadID: "up-console", FrameSize: 64 << 10, ContentHash: true})
	pack(map[string][]byte{"notes.txt": []byte("the first version\n"), "kept.txt": []byte("kept\n")},
		cargopack.Options{Prefix: "archives/chain", UploadID: "ch-1", SyncType: "full", ContentHash: true})
	chainURL := pack(map[string][]byte{"notes.txt": []byte("the second version\n")},
		cargopack.Options{Prefix: "archives/chain", UploadID: "ch-2", PreviousManifestID: "ch-1", SyncType: "incremental", ContentHash: true})
	coldBytes := randomBytes(402, 200<<10)
	coldURL := pack(map[string][]byte{"cold.bin": coldBytes, "warm.txt": []byte("warm\n")},
		cargopack.Options{Prefix: "archives/cold", UploadID: "up-cold", Direct: true, ContentHash: true})
	g.SetClass(srcBucket, "archives/cold/uploads/up-cold/files/cold.bin", backend.ClassGlacier, "")
	t0 := time.Now()
	millionKey, err := writeMillionManifest(ctx, client, srcBucket, "archives/million", "up-million", millionKeys)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1,000,000-file manifest written in %s", time.Since(t0).Round(time.Millisecond))

	keysFile := filepath.Join(t.TempDir(), "keys.yaml")
	doc := fmt.Sprintf("keys:\n  - {access_key: %s, secret_key: %s, buckets: [console, cold], restore: [cold]}\n  - {access_key: OTHERKEY, secret_key: other-secret}\n", consoleAK, consoleSK)
	if err := os.WriteFile(keysFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"serve", "--listen", "127.0.0.1:0", "--store", "s3://", "--s3-endpoint", backendSrv.URL, "--s3-path-style",
		"--s3-region", "us-east-1", "--console", "--archive", "console=" + mainURL, "--archive", "chain=" + chainURL}
	t0 = time.Now()
	anon, err := startWharf(suite.bin, "console-anon", append(slices.Clone(common), "--anonymous",
		"--archive", "million=s3://"+srcBucket+"/"+millionKey), suite.serverEnv())
	if err != nil {
		t.Fatal(err)
	}
	defer stopOrFail(t, anon)
	t.Logf("anonymous console server (with the 1,000,000-file bucket) up in %s", time.Since(t0).Round(time.Millisecond))
	keyed, err := startWharf(suite.bin, "console-keyed", append(slices.Clone(common), "--keys-file", keysFile, "--allow-restore",
		"--restore-status-ttl", "100ms", "--archive", "cold="+coldURL), suite.serverEnv())
	if err != nil {
		t.Fatal(err)
	}
	defer stopOrFail(t, keyed)

	shots, err := filepath.Abs("../tmp/console-screenshots")
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(shots)
	os.MkdirAll(shots, 0o755)
	downloads := t.TempDir()
	in, _ := json.Marshal(map[string]string{"chromium": chromium, "profile": t.TempDir(), "downloads": downloads, "shots": shots,
		"anon": anon.url, "keyed": keyed.url, "ak": consoleAK, "sk": consoleSK, "hostile": hostileFile, "oldVersion": "ch-1"})
	script, _ := filepath.Abs("clients/console_browser.js")
	env := append(baseEnv(clientHome(t)), "NODE_PATH="+filepath.Join(modDir, "node_modules"))
	t0 = time.Now()
	stdout, stderr, err := runErr(env, t.TempDir(), node, script, string(in))
	browserTime := time.Since(t0)
	var r consoleRun
	if jerr := json.Unmarshal([]byte(stdout), &r); jerr != nil || err != nil || r.Fatal != "" {
		t.Fatalf("the browser script: %v %v %s\nstdout %s\nstderr %s", err, jerr, r.Fatal, tail(stdout, 20), tail(stderr, 20))
	}
	t.Logf("browser walk: %s, %d screenshots in %s", browserTime.Round(time.Millisecond), len(r.Screenshots), shots)

	// No script ran anywhere: no dialog, no page error, and no console
	// error but the one the failed login's 403 page logs ("Failed to load
	// resource"): no CSP violation, no refused image or stylesheet.
	wantFailed := []string{"403 " + keyed.url + "/-/console/login"}
	if len(r.Dialogs) > 0 || len(r.PageErrors) > 0 || !slices.Equal(r.FailedResponses, wantFailed) ||
		len(r.ConsoleErrors) != 1 || !strings.HasPrefix(r.ConsoleErrors[0], "Failed to load resource: the server responded with a status of 403") {
		t.Errorf("dialogs %q, page errors %q, console errors %q, failed responses %q (want only %q)", r.Dialogs, r.PageErrors, r.ConsoleErrors, r.FailedResponses, wantFailed)
	}

	var buckets struct{ Buckets []string }
	r.step(t, "buckets", &buckets)
	if !slices.Equal(buckets.Buckets, []string{"chain", "console", "million"}) {
		t.Errorf("buckets page: %q", buckets.Buckets)
	}
	var folder struct {
		URL    string
		Files  []string
		Crumbs []string
	}
	r.step(t, "folder", &folder)
	if !slices.Equal(folder.Files, []string{"chart.png", "depth.bin", "vessels.csv"}) || !slices.Equal(folder.Crumbs, []string{"console", "data/"}) ||
		!strings.HasSuffix(folder.URL, "/-/console/b/console?prefix=data%2F") {
		t.Errorf("folder: %+v", folder)
	}
	var csvStep struct{ Rows [][]string }
	r.step(t, "csv", &csvStep)
	if len(csvStep.Rows) != 3 || !slices.Equal(csvStep.Rows[0], []string{"name", "length_m", "flag"}) || !slices.Equal(csvStep.Rows[2], []string{"Boreas", "88", "IS"}) {
		t.Errorf("CSV table: %q", csvStep.Rows)
	}
	var img struct{ NaturalWidth, NaturalHeight, Width, Height int }
	r.step(t, "image", &img)
	if img.NaturalWidth != 321 || img.NaturalHeight != 123 || img.Width != 321 || img.Height != 123 {
		t.Errorf("PNG shown as %+v, want 321x123", img)
	}
	var dl struct{ File, Name string }
	r.step(t, "download", &dl)
	if got, err := os.ReadFile(dl.File); err != nil || !bytes.Equal(got, chart) || dl.Name != "chart.png" {
		t.Errorf("download %q (%s): %d bytes, equal to the source: %v (%v)", dl.Name, dl.File, len(got), bytes.Equal(got, chart), err)
	}
	var txt struct {
		FirstLine, Facts string
		Snippets         []string
	}
	r.step(t, "text", &txt)
	if txt.FirstLine != "Harbour survey 2025: read me first" || !strings.Contains(txt.Facts, "whole-file sha256") {
		t.Errorf("text preview: %+v", txt)
	}
	consoleSnippets(t, txt.Snippets, files["README.txt"])
	for name, wantText := range map[string]string{"hostileName": "a file with a hostile name", "html": "<script>alert('html')</script>", "svg": "<script>alert('svg2')</script>"} {
		var h struct {
			Listed          bool
			Preview, Title  string
			Images, Scripts int
		}
		r.step(t, name, &h)
		if !h.Listed || !strings.Contains(h.Preview, wantText) || h.Scripts != 0 || h.Images != 0 {
			t.Errorf("%s: %+v (want listed, its bytes shown as text, no script or img element)", name, h)
		}
	}
	var vers struct {
		Latest, Old string
		Versions    []string
	}
	r.step(t, "versions", &vers)
	if vers.Latest != "the second version\n" || vers.Old != "the first version\n" || !slices.Equal(vers.Versions, []string{"ch-2", "ch-1"}) {
		t.Errorf("versions: %+v", vers)
	}
	var mil struct {
		FirstMs, NextMs int
		ResponseMs      float64
		First           []any
		Next            string
	}
	r.step(t, "million", &mil)
	if len(mil.First) != 3 || mil.First[0] != "obj-0000000.txt" || mil.First[1] != "obj-0000199.txt" || mil.Next != "obj-0000200.txt" {
		t.Errorf("1,000,000-key bucket pages: %+v", mil)
	}
	if mil.FirstMs > 1000 || mil.NextMs > 1000 {
		t.Errorf("1,000,000-key bucket: first page in %d ms, next in %d ms (want well under a second)", mil.FirstMs, mil.NextMs)
	}
	t.Logf("1,000,000-key bucket: first page %d ms, next page %d ms (click to load, in Chromium); next page's response %.1f ms", mil.FirstMs, mil.NextMs, mil.ResponseMs)

	// The same files as S3 objects on the console's origin: sandboxed (an
	// opaque origin), no dialog; Chromium says it blocked their script.
	var objs struct {
		Origins map[string]struct {
			Status            int
			Type, CSP, Origin string
		}
		Dialogs, ConsoleErrors []string
	}
	r.step(t, "objects", &objs)
	for _, k := range []string{"evil.html", "evil.svg"} {
		o := objs.Origins[k]
		if o.Status != 200 || o.CSP != "sandbox" || o.Origin != "null" {
			t.Errorf("GET /console/%s in Chromium: %+v, want 200 with CSP sandbox and an opaque origin", k, o)
		}
	}
	if len(objs.Dialogs) > 0 || !slices.ContainsFunc(objs.ConsoleErrors, func(m string) bool { return strings.Contains(m, "Blocked script execution") }) {
		t.Errorf("objects: dialogs %q, console errors %q (want no dialog, the script blocked)", objs.Dialogs, objs.ConsoleErrors)
	}

	var bad struct {
		Redirected, Message string
		Cookies             []string
	}
	r.step(t, "badLogin", &bad)
	if !strings.HasSuffix(bad.Redirected, "/-/console/login") || !strings.Contains(bad.Message, "Wrong secret key") || slices.Contains(bad.Cookies, "wharf_console") {
		t.Errorf("failed login: %+v", bad)
	}
	var good struct {
		URL, Who string
		Buckets  []string
		Cookie   *struct {
			HTTPOnly bool `json:"httpOnly"`
			SameSite string
			Path     string
		}
	}
	r.step(t, "goodLogin", &good)
	if !slices.Equal(good.Buckets, []string{"cold", "console"}) || good.Who != consoleAK || good.Cookie == nil || !good.Cookie.HTTPOnly || good.Cookie.SameSite != "Strict" {
		t.Errorf("good login: %+v (cookie %+v); want only the granted buckets cold and console", good, good.Cookie)
	}
	var rs struct {
		Before struct{ Note, Cost, State string }
		Flash  string
		State  string
		Button bool
	}
	r.step(t, "restore", &rs)
	if !strings.Contains(rs.Before.Note, "must be restored") || !strings.Contains(rs.Before.Cost, "1 archived object") ||
		!strings.Contains(rs.Before.Cost, "(204,800 bytes)") || len(coldBytes) != 204800 || rs.Before.State != "not restored" {
		t.Errorf("archived file before the restore: %+v", rs.Before)
	}
	if rs.Flash != "Restore started." || rs.State != "restore in progress" || rs.Button {
		t.Errorf("after the restore button: %+v", rs)
	}
	if st := g.Started(); len(st) != 1 || !strings.HasSuffix(st[0], "/cold.bin") {
		t.Errorf("the Glacier model started restores of %q, want cold.bin only", st)
	}
	if !strings.Contains(keyed.Logs(), `"op":"RestoreObject"`) || !strings.Contains(keyed.Logs(), `"access_key":"`+consoleAK+`"`) {
		t.Errorf("the restore is not in the server's access log as RestoreObject by %s", consoleAK)
	}
	var out struct {
		After, Then string
		Cookies     []string
	}
	r.step(t, "logout", &out)
	if !strings.HasSuffix(out.Then, "/-/console/login") || slices.Contains(out.Cookies, "wharf_console") {
		t.Errorf("after logout: %+v", out)
	}
	if !strings.Contains(anon.Logs(), `"op":"Console"`) {
		t.Errorf("console requests are not in the access log")
	}
	t.Logf("whole test %s", time.Since(start).Round(time.Millisecond))
}
