package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// browserPage is the script a viewer page runs against wharf: list a
// prefix, read a file, HEAD an object for its ETag, make a ranged read
// conditional on it (Range and If-Match make the browser send a preflight),
// read an error, and read ?cors. Each step's outcome, or the exception
// fetch() threw, goes into <pre id="result"> as JSON, which the test reads
// from the DOM that Chromium dumps.
const browserPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>wharf CORS test</title></head>
<body><pre id="result">pending</pre>
<script>
const W = %s;
const out = {origin: location.origin, steps: {}};
async function sha256(buf) {
  const d = await crypto.subtle.digest("SHA-256", buf);
  return Array.from(new Uint8Array(d), b => b.toString(16).padStart(2, "0")).join("");
}
async function step(name, f) {
  try { out.steps[name] = await f(); } catch (e) { out.steps[name] = {error: String(e)}; }
}
(async () => {
  await step("list", async () => {
    const r = await fetch(W + "/main?list-type=2&prefix=nested/");
    const xml = new DOMParser().parseFromString(await r.text(), "application/xml");
    return {status: r.status, keys: Array.from(xml.getElementsByTagName("Key"), k => k.textContent)};
  });
  await step("read", async () => {
    const r = await fetch(W + "/main/README.txt");
    return {status: r.status, sha256: await sha256(await r.arrayBuffer()), etag: r.headers.get("ETag"),
      lastModified: r.headers.get("Last-Modified"), requestId: r.headers.get("x-amz-request-id"),
      contentLength: r.headers.get("Content-Length")};
  });
  await step("head", async () => {
    const r = await fetch(W + "/main/big/unsplit.bin", {method: "HEAD"});
    return {status: r.status, etag: r.headers.get("ETag"), contentLength: r.headers.get("Content-Length")};
  });
  await step("range", async () => {
    const etag = (out.steps.head && out.steps.head.etag) || "\"none\"";
    const r = await fetch(W + "/main/big/unsplit.bin", {headers: {"Range": "bytes=1000-1999", "If-Match": etag}});
    return {status: r.status, contentRange: r.headers.get("Content-Range"), etag: r.headers.get("ETag"),
      sha256: await sha256(await r.arrayBuffer())};
  });
  await step("missing", async () => {
    const r = await fetch(W + "/main/no/such/key");
    const t = await r.text();
    return {status: r.status, code: (t.match(/<Code>([^<]*)<\/Code>/) || [])[1] || ""};
  });
  await step("cors", async () => {
    const r = await fetch(W + "/main?cors");
    return {status: r.status, body: await r.text()};
  });
  out.done = true;
  document.getElementById("result").textContent = JSON.stringify(out);
})();
</script></body></html>
`

// browserStep is one step's outcome as the page reports it.
type browserStep struct {
	Error         string
	Status        int
	Keys          []string
	SHA256        string
	ETag          string
	LastModified  string
	RequestID     string
	ContentLength string
	ContentRange  string
	Code          string
	Body          string
}

type browserResult struct {
	Origin string
	Done   bool
	Steps  map[string]browserStep
}

// runChromium loads url in headless Chromium (the flags known to work on
// this machine, a fresh profile) and returns the page's result.
func runChromium(t *testing.T, chromium, url string) browserResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+t.TempDir(),
		"--virtual-time-budget=30000", "--dump-dom", url)
	cmd.Env = baseEnv(clientHome(t))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, tail(stderr.String(), 20))
	}
	m := regexp.MustCompile(`(?s)<pre id="result">(.*?)</pre>`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("chromium: no result element in the DOM:\n%s\nstderr:\n%s", tail(stdout.String(), 20), tail(stderr.String(), 20))
	}
	var r browserResult
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &r); err != nil || !r.Done {
		t.Fatalf("chromium: the page did not finish (%v): %s\nstderr:\n%s", err, m[1], tail(stderr.String(), 20))
	}
	return r
}

// TestBrowserCORS: a page in headless Chromium on another loopback origin
// reads wharf with fetch(): it lists a prefix, reads a file, makes a
// conditional ranged read and sees Content-Range and ETag, reads a 404's
// error code and the ?cors rules. A page from an origin not allowed gets
// nothing: every fetch() is rejected.
func TestBrowserCORS(t *testing.T) {
	chromium := need(t, "chromium", "chromium")
	page := func(wharfURL *string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/" {
				http.NotFound(w, r)
				return
			}
			js, _ := json.Marshal(*wharfURL)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, browserPage, js)
		})
	}
	var wharfURL string
	allowed := httptest.NewServer(page(&wharfURL))
	defer allowed.Close()
	refused := httptest.NewServer(page(&wharfURL))
	defer refused.Close()

	args := []string{"serve", "--listen", "127.0.0.1:0", "--store", "s3://", "--s3-endpoint", suite.s3url, "--s3-path-style",
		"--s3-region", "us-east-1", "--anonymous", "--archive", "main=" + suite.archives["main"].manifestURL,
		"--cors-allow-origin", allowed.URL, "--cors-max-age", "60s"}
	srv, err := startWharf(suite.bin, "browser", args, suite.serverEnv())
	if err != nil {
		t.Fatal(err)
	}
	defer stopOrFail(t, srv)
	wharfURL = srv.url

	// What the page must see.
	var nested []string
	for k := range suite.archives["main"].keys {
		if strings.HasPrefix(k, "nested/") {
			nested = append(nested, k)
		}
	}
	sort.Strings(nested)
	readme := sourceBytes(t, "main", "README.txt")
	unsplit := sourceBytes(t, "main", "big/unsplit.bin")
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

	t.Run("allowed origin", func(t *testing.T) {
		r := runChromium(t, chromium, allowed.URL+"/")
		if r.Origin != allowed.URL {
			t.Fatalf("page origin %q, want %q", r.Origin, allowed.URL)
		}
		for name, s := range r.Steps {
			if s.Error != "" {
				t.Errorf("step %s: fetch failed: %s", name, s.Error)
			}
		}
		if s := r.Steps["list"]; s.Status != 200 || strings.Join(s.Keys, "\n") != strings.Join(nested, "\n") {
			t.Errorf("list: %d, keys %q, want %q", s.Status, s.Keys, nested)
		}
		s := r.Steps["read"]
		if s.Status != 200 || s.SHA256 != sum(readme) || s.ContentLength != fmt.Sprint(len(readme)) {
			t.Errorf("read README.txt: %+v (want sha256 %s)", s, sum(readme))
		}
		if s.ETag == "" || s.LastModified == "" || s.RequestID == "" {
			t.Errorf("read: exposed headers not visible to the script: ETag %q Last-Modified %q x-amz-request-id %q", s.ETag, s.LastModified, s.RequestID)
		}
		head := r.Steps["head"]
		if head.Status != 200 || head.ETag == "" || head.ContentLength != fmt.Sprint(len(unsplit)) {
			t.Errorf("HEAD big/unsplit.bin: %+v", head)
		}
		rg := r.Steps["range"]
		if rg.Status != 206 || rg.ContentRange != fmt.Sprintf("bytes 1000-1999/%d", len(unsplit)) || rg.ETag != head.ETag || rg.SHA256 != sum(unsplit[1000:2000]) {
			t.Errorf("ranged read: %+v, want 206, bytes 1000-1999/%d, ETag %s, sha256 %s", rg, len(unsplit), head.ETag, sum(unsplit[1000:2000]))
		}
		if m := r.Steps["missing"]; m.Status != 404 || m.Code != "NoSuchKey" {
			t.Errorf("missing key: %+v, want a readable 404 NoSuchKey", m)
		}
		if c := r.Steps["cors"]; c.Status != 200 || !strings.Contains(c.Body, "<AllowedOrigin>"+allowed.URL+"</AllowedOrigin>") {
			t.Errorf("?cors: %+v", c)
		}
		// The conditional ranged read was preflighted, and allowed.
		if !regexp.MustCompile(`"op":"CORSPreflight"[^\n]*"status":200`).MatchString(srv.Logs()) {
			t.Errorf("no allowed preflight in the access log:\n%s", tail(srv.Logs(), 20))
		}
		t.Logf("chromium page on %s: listed %d keys, read README.txt, HEAD + If-Match ranged read (206 %s, ETag %s), a readable 404, ?cors",
			allowed.URL, len(nested), rg.ContentRange, rg.ETag)
	})

	t.Run("refused origin", func(t *testing.T) {
		before := strings.Count(srv.Logs(), `"op":"CORSPreflight"`)
		r := runChromium(t, chromium, refused.URL+"/")
		if r.Origin != refused.URL || len(r.Steps) != 6 {
			t.Fatalf("page %q ran %d steps", r.Origin, len(r.Steps))
		}
		for name, s := range r.Steps {
			if !strings.Contains(s.Error, "TypeError") {
				t.Errorf("step %s from a refused origin: %+v, want fetch() rejected with a TypeError", name, s)
			}
		}
		logs := srv.Logs()
		if strings.Count(logs, `"op":"CORSPreflight"`) == before || !regexp.MustCompile(`"op":"CORSPreflight"[^\n]*"status":403`).MatchString(logs) {
			t.Errorf("the refused page's preflight was not answered 403:\n%s", tail(logs, 20))
		}
		t.Logf("chromium page on %s (not allowed): all %d fetches rejected (%s)", refused.URL, len(r.Steps), r.Steps["read"].Error)
	})
}
