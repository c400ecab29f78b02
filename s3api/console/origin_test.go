package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestObjectsSandboxedOnConsoleOrigin: the console shares its origin with
// the S3 API's path-style objects, so an .html or .svg file of an archive,
// opened as GetObject (anonymously, or through a share link the console
// made), must not run in that origin: it would read the console's pages
// with the visitor's cookie (CSRF tokens, share links signed with the
// visitor's secret). Every S3 response on a listener that serves the
// console carries a sandboxing CSP.
func TestObjectsSandboxedOnConsoleOrigin(t *testing.T) {
	check := func(t *testing.T, what string, resp *http.Response) {
		t.Helper()
		csp := resp.Header.Get("Content-Security-Policy")
		if !regexp.MustCompile(`(^|;)\s*sandbox\s*(;|$)`).MatchString(csp) {
			t.Errorf("%s: %d %s with Content-Security-Policy %q: the file's script runs in the console's origin",
				what, resp.StatusCode, resp.Header.Get("Content-Type"), csp)
		}
	}
	t.Run("anonymous", func(t *testing.T) {
		s := newServer(t, opts{anonymous: true})
		for _, k := range []string{"evil.html", "evil.svg", "nope.html"} {
			for _, m := range []string{http.MethodGet, http.MethodHead} {
				req, _ := http.NewRequest(m, s.URL+"/main/"+k, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				check(t, m+" /main/"+k, resp)
			}
		}
		resp, err := http.Get(s.URL + "/main?list-type=2")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		check(t, "ListObjectsV2", resp)
	})
	t.Run("share link", func(t *testing.T) {
		s := newServer(t, opts{keys: keys()})
		c := s.client(t)
		s.login(t, c, goodAK, goodSK)
		resp, body := s.get(t, c, fileURL("main", "evil.html")+"&share=3600")
		want(t, resp, body, 200, `id="share-url"`)
		link := strings.ReplaceAll(regexp.MustCompile(`<pre id="share-url">([^<]*)</pre>`).FindStringSubmatch(body)[1], "&amp;", "&")
		r, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			t.Fatalf("share link: %d", r.StatusCode)
		}
		check(t, "share link of evil.html", r)
	})
}
