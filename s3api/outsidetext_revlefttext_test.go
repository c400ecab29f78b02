package s3api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
)

// firstUnprintable is the first unprintable rune of text (newlines
// aside), or -1.
func firstUnprintable(text string) rune {
	for _, r := range text {
		if r != '\n' && (r == utf8.RuneError || !unicode.IsPrint(r)) {
			return r
		}
	}
	return -1
}

// TestAccessLogOutsideText: the access line's key, bucket, method and
// Range are a client's bytes. They were cut (clipLogged) but not
// escaped, where the archive's own log lines used backend.PrintableText:
// two rules. zerolog's console format quotes a field (strconv.Quote), so
// a key's ESC and CR were written "\x1b" and "\r" there already (the old
// output: key="a\x1b[2J\x1b]0;owned\ab\rforged line\u009b31m\u202ec"),
// but the JSON format (the default) writes every rune past ASCII as is:
// a C1 CSI (U+009B), a line separator or a bidi override reached
// whoever reads the log in a terminal or a browser, and a JSON reader
// (jq -r) got ESC and CR back. Every outside text in a log is now
// backend.PrintableText: no line, in either format, holds an unprintable
// rune, and no JSON field decodes to one.
func TestAccessLogOutsideText(t *testing.T) {
	a, _ := openArchive(t, standardFiles(), fixtureOpts{})
	v, err := auth.New(auth.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	// The key as the client sends it: ESC sequences (clear screen, set
	// the window title), BEL, CR, a C1 CSI, a bidi override.
	const escKey = "a%1B%5B2J%1B%5D0%3Bowned%07b%0Dforged%20line%C2%9B31m%E2%80%AEc"
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			logs := &resetBuffer{}
			log := zerolog.New(logs)
			if format == "console" {
				// As wharf serve --log-format console, colours off
				// (they are wharf's own escapes).
				log = zerolog.New(zerolog.ConsoleWriter{Out: logs, TimeFormat: time.RFC3339, NoColor: true})
			}
			srv := httptest.NewServer(s3api.New(s3api.Config{
				Catalog: catalog.NewStatic(map[string]*archiveview.Archive{testBucket: a}), Verifier: v,
				Logger: log, Registerer: prometheus.NewRegistry(),
			}))
			defer srv.Close()
			req, _ := http.NewRequest("GET", srv.URL+"/"+testBucket+"/"+escKey, nil)
			req.Header.Set("Range", "bytes=0-1\u202e\u009b2J")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "request") && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			text := logs.String()
			if !strings.Contains(text, "owned") {
				t.Fatalf("no access line with the key: %q", text)
			}
			if r := firstUnprintable(text); r >= 0 {
				t.Errorf("the access line holds the unprintable %U of the client's key or Range:\n%q", r, text)
			}
			if format != "json" {
				return
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &m); err != nil {
				t.Fatalf("access line %q: %v", text, err)
			}
			for k, v := range m {
				if s, ok := v.(string); ok {
					if r := firstUnprintable(s); r >= 0 {
						t.Errorf("field %s decodes to the unprintable %U: %q", k, r, s)
					}
				}
			}
		})
	}
}

// TestReadFailureOneLinePerRequest: a GET whose read failed before the
// headers for another reason than busy (the store unavailable: 503; a
// broken chunk: 500) wrote a 'read failed' line at error beside its
// access line, which already is a warning carrying the error: an error
// line per request from any client polling a broken object. As for a
// busy read and the console, the access line is the only one.
func TestReadFailureOneLinePerRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
	}{
		{"store down", fmt.Errorf("store down: %w", backend.ErrUnavailable), http.StatusServiceUnavailable},
		{"broken", errors.New("broken chunk"), http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var failing atomic.Bool
			f := newFixture(t, standardFiles(), fixtureOpts{anonymous: true, wrap: func(s backend.Store) backend.Store {
				return faults.NewFaulty(s, faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
					if failing.Load() && (r.Op == "range" || r.Op == "get") {
						return faults.Fault{Kind: faults.FaultError, Err: tc.err}
					}
					return faults.Fault{}
				}})
			}})
			failing.Store(true)
			resp, body := f.do(t, "GET", "/bkt/dir/a.bin", nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("GET: %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			for deadline := time.Now().Add(5 * time.Second); !strings.Contains(f.logs.String(), `"message":"request"`) && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			lines := strings.Split(strings.TrimSpace(f.logs.String()), "\n")
			var mine []string
			for _, l := range lines {
				if strings.Contains(l, "dir/a.bin") {
					mine = append(mine, l)
				}
			}
			if len(mine) != 1 || !strings.Contains(mine[0], `"message":"request"`) || !strings.Contains(mine[0], `"level":"warn"`) || !strings.Contains(mine[0], tc.err.Error()) {
				t.Errorf("a failed read logged %d lines, want its access line only, a warning with the error:\n%s", len(mine), strings.Join(mine, "\n"))
			}
		})
	}
}
