package console_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api"
	"github.com/wharf-s3/wharf/s3api/console"
)

// TestBidiControlsShown: a name with a right-to-left override
// ("invoice\u202Efdp.exe" reads "invoiceexe.pdf") is shown with the
// control made visible, on the folder page, the file page and in the
// breadcrumbs, and the downloaded file's name carries no bidi control;
// links, form values and the copy-paste snippets still carry the real key.
func TestBidiControlsShown(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := "docs\u2067x/invoice\u202Efdp.exe"
	res := pack(t, dir, map[string][]byte{key: []byte("MZ not a pdf")}, cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1"})
	a, err := archiveview.Open(ctx, backend.NewFileStore(dir), "src", res.ManifestKey, archiveview.Options{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	v, _ := auth.New(auth.Config{Anonymous: true})
	cat := catalog.NewStatic(map[string]*archiveview.Archive{"b": a})
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: zerolog.Nop(),
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: zerolog.Nop()})
		}}))
	defer srv.Close()
	get := func(p string) (*http.Response, string) {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, p := range []string{"/-/console/b/b", "/-/console/b/b?prefix=" + url.QueryEscape("docs\u2067x/"),
		"/-/console/f/b?key=" + url.QueryEscape(key)} {
		resp, page := get(p)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
		// Form values and the copy-paste snippets must hold the real key.
		shown := regexp.MustCompile(`(?s)value="[^"]*"|<pre class="snippet">.*?</pre>`).ReplaceAllString(page, "")
		for _, r := range []string{"\u202E", "\u2067"} {
			if strings.Contains(shown, r) {
				t.Errorf("%s: the page holds a raw %U, which reorders the name shown", p, []rune(r)[0])
			}
		}
		if text := html.UnescapeString(shown); !strings.Contains(text, "[U+202E]") && !strings.Contains(text, "[U+2067]") {
			t.Errorf("%s: the control is not shown:\n%s", p, shown)
		}
	}
	// The file page's links name the real key.
	_, page := get("/-/console/b/b?prefix=" + url.QueryEscape("docs\u2067x/"))
	if !strings.Contains(page, url.QueryEscape(key)) {
		t.Errorf("the folder page does not link the real key %q:\n%s", url.QueryEscape(key), page)
	}
	resp, body := get("/-/console/dl/b?key=" + url.QueryEscape(key))
	cd := resp.Header.Get("Content-Disposition")
	if resp.StatusCode != 200 || body != "MZ not a pdf" {
		t.Fatalf("download: %d %q", resp.StatusCode, body)
	}
	if strings.Contains(strings.ToUpper(cd), "%E2%80%AE") || strings.ContainsRune(cd, '\u202E') {
		t.Errorf("Content-Disposition %q: the saved name holds the right-to-left override", cd)
	}
}
