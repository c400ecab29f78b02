package console_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
	"github.com/wharf-s3/wharf/s3api"
	"github.com/wharf-s3/wharf/s3api/console"
)

// hostileKey is an uploader's key with what acts on a terminal or a
// reader of the log and a manifest may hold (its keys have no ASCII
// control character): C1 controls (CSI, OSC, ST: ESC [, ESC ], ESC \ to
// a terminal that takes them), a line separator and a bidi override.
const hostileKey = "in\u009b2J\u009d0;owned\u009cvoice\u2028fake line\u202efdp.txt"

// unprintableIn is the first unprintable rune of a log's text (its
// newlines aside), or -1.
func unprintableIn(text string) rune {
	for _, r := range text {
		if r != '\n' && (r == utf8.RuneError || !unicode.IsPrint(r)) {
			return r
		}
	}
	return -1
}

// readFailingConsole serves an archive holding hostileKey whose reads
// fail with the error that fail gives (nil: they succeed), the console
// and the S3 handler logging to logs through log.
func readFailingConsole(t *testing.T, log zerolog.Logger, fail func() error) *httptest.Server {
	t.Helper()
	return failingReadsConsole(t, log, map[string][]byte{hostileKey: []byte("hello\n")}, cargopack.Options{},
		func(faults.Request) error { return fail() })
}

// failingReadsConsole serves files packed with opts whose store reads
// (after the open) fail with what fail gives the request (nil: served).
func failingReadsConsole(t *testing.T, log zerolog.Logger, files map[string][]byte, opts cargopack.Options, fail func(faults.Request) error) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	opts.Bucket, opts.Prefix, opts.UploadID = "src", "p", "u1"
	res := pack(t, dir, files, opts)
	var opened atomic.Bool
	st := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{Hook: func(r faults.Request) faults.Fault {
		if opened.Load() && (r.Op == "range" || r.Op == "get") {
			if err := fail(r); err != nil {
				return faults.Fault{Kind: faults.FaultError, Err: err}
			}
		}
		return faults.Fault{}
	}})
	a, err := archiveview.Open(ctx, st, "src", res.ManifestKey, archiveview.Options{Name: "good"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	opened.Store(true)
	cat := catalog.NewStatic(map[string]*archiveview.Archive{"good": a})
	v, _ := auth.New(auth.Config{Anonymous: true})
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: log,
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: log})
		}}))
	t.Cleanup(srv.Close)
	return srv
}

// waitAccessLine waits for the request's access line in logs.
func waitAccessLine(logs *syncBuf, marker string) {
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), marker) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConsoleLogOutsideText: a download whose read failed logged its own
// line whose message was "console: <key> in <bucket> cannot be read
// now; ...": under --log-format console a message is written as is, so
// the uploader's ESC sequences and CR reached the operator's terminal.
// Every text from outside is now backend.PrintableText (the one rule)
// wherever it is logged: no log line, in either format, holds an
// unprintable rune, and a JSON reader gets none back either.
func TestConsoleLogOutsideText(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			logs := &syncBuf{}
			log := zerolog.New(logs)
			marker := `"message":"request"`
			if format == "console" {
				// As wharf serve --log-format console, colours off (they
				// are wharf's own escapes).
				log = zerolog.New(zerolog.ConsoleWriter{Out: logs, TimeFormat: time.RFC3339, NoColor: true})
				marker = " request "
			}
			srv := readFailingConsole(t, log, func() error { return fmt.Errorf("store down: %w", backend.ErrUnavailable) })
			resp, err := http.Get(srv.URL + "/-/console/dl/good?key=" + url.QueryEscape(hostileKey))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("download while the store is down: %d, want 503", resp.StatusCode)
			}
			waitAccessLine(logs, marker)
			text := logs.String()
			if r := unprintableIn(text); r >= 0 {
				t.Errorf("the log holds the unprintable %U of an uploader's key:\n%q", r, text)
			}
			if format != "json" {
				return
			}
			for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("log line %q: %v", l, err)
				}
				for k, v := range m {
					if s, ok := v.(string); ok {
						if r := unprintableIn(s); r >= 0 {
							t.Errorf("field %s decodes to the unprintable %U: %q", k, r, s)
						}
					}
				}
			}
		})
	}
}

// TestConsoleReadFailureOneLine: a console read that failed for any
// other reason than busy (the store unavailable: 503; a broken chunk:
// 500; a file page whose preview could not be read: 200) wrote an error
// line of its own beside the access line, so a visitor polling such a
// page added an error line per request. The access line, a warning
// carrying the error with the bucket and key, is now the only line.
func TestConsoleReadFailureOneLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		route  string
		err    error
		status int
	}{
		{"download, store down", "dl", fmt.Errorf("store down: %w", backend.ErrUnavailable), http.StatusServiceUnavailable},
		{"download, broken", "dl", errors.New("broken chunk"), http.StatusInternalServerError},
		{"file page, preview", "f", errors.New("broken chunk"), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncBuf{}
			srv := readFailingConsole(t, zerolog.New(logs), func() error { return tc.err })
			resp, err := http.Get(srv.URL + "/-/console/" + tc.route + "/good?key=" + url.QueryEscape(hostileKey))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			waitAccessLine(logs, `"message":"request"`)
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 1 {
				t.Errorf("%d lines for one request, want its access line only:\n%s", len(lines), strings.Join(lines, "\n"))
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
				t.Fatal(err)
			}
			e, _ := m["error"].(string)
			if m["message"] != "request" || m["level"] != "warn" || !strings.Contains(e, tc.err.Error()) || !strings.Contains(e, "good") || !strings.Contains(e, "fdp.txt") {
				t.Errorf("access line %v: want a warning carrying the error, the bucket and the key", m)
			}
		})
	}
}

// TestConsoleDownloadReadFailsMidBody: a download whose read fails after
// its headers went out is aborted, its access line a warning with
// abort_cause "read" (wharf's side), where a download its user left is
// "client" (TestConsoleOneLinePerRequest). Guard test for the console's
// use of the S3 handler's record of failed writes (one implementation,
// where the console had a copy, clientWriter).
func TestConsoleDownloadReadFailsMidBody(t *testing.T) {
	big := make([]byte, 4<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	srv := failingReadsConsole(t, zerolog.New(logs), map[string][]byte{"big.bin": big}, cargopack.Options{FrameSize: 64 << 10},
		func(r faults.Request) error {
			if r.Off >= 1<<20 {
				return errors.New("broken chunk")
			}
			return nil
		})
	resp, err := http.Get(srv.URL + "/-/console/dl/good?key=big.bin")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err == nil || n >= int64(len(big)) {
		t.Fatalf("download whose read fails mid-body: %d, %d of %d bytes, %v: want 200 cut short", resp.StatusCode, n, len(big), err)
	}
	waitAccessLine(logs, `"message":"request"`)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || m["level"] != "warn" || m["abort_cause"] != "read" || !strings.Contains(fmt.Sprint(m["error"]), "broken chunk") {
		t.Errorf("%d lines, the access line %v: want one, a warning with abort_cause read and the error", len(lines), m)
	}
}

// TestBucketsPageUploadID: the buckets page said "upload <id>" with the
// manifest's upload id whole and as is: any length (the manifest's JSON
// limit) and any rune but the ASCII controls, a C1 control or a bidi
// override among them. It is now backend.PrintableText cut to 128 bytes,
// as in the log and the metric label.
func TestBucketsPageUploadID(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	id := "u\u009b2J\u202e" + strings.Repeat("x", 200)
	res := pack(t, dir, map[string][]byte{"a.txt": []byte("a\n")}, cargopack.Options{Bucket: "src", Prefix: "p", UploadID: id})
	a, err := archiveview.Open(ctx, backend.NewFileStore(dir), "src", res.ManifestKey, archiveview.Options{Name: "good"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	cat := catalog.NewStatic(map[string]*archiveview.Archive{"good": a})
	v, _ := auth.New(auth.Config{Anonymous: true})
	srv := httptest.NewServer(s3api.New(s3api.Config{Catalog: cat, Verifier: v, Logger: zerolog.Nop(),
		Console: func(api http.Handler) http.Handler {
			return console.New(console.Config{Catalog: cat, Verifier: v, API: api, Logger: zerolog.Nop()})
		}}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/-/console/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if !strings.Contains(page, `upload u\u009b2J\u202exxxx`) {
		t.Errorf("the buckets page does not name the upload escaped:\n%s", page)
	}
	if strings.Contains(page, strings.Repeat("x", 128)) || strings.Contains(page, "\u009b") || strings.Contains(page, "\u202e") {
		t.Errorf("the buckets page shows the upload id whole or as is:\n%q", page)
	}
}

// TestRestoreRefusalMessage: a restore the S3 handler refused was shown
// as "RestoreObject answered <status>: <Code> <Message>" with the
// Message's XML text taken as it was, still escaped, then escaped again
// for the page: "the object&#39;s current storage class" showed its
// character reference. The error document is now decoded first.
func TestRestoreRefusalMessage(t *testing.T) {
	s := newServer(t, opts{keys: keys(), allowRestore: true})
	c := s.client(t)
	s.login(t, c, goodAK, goodSK)
	_, body := s.get(t, c, fileURL("main", "data/vessels.csv"))
	m := regexp.MustCompile(`name="csrf" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the file page:\n%s", body)
	}
	resp, body := s.post(t, c, "/-/console/restore/main", url.Values{"csrf": {m[1]}, "key": {"data/vessels.csv"}, "days": {"2"}, "tier": {"Standard"}})
	if resp.StatusCode < 400 {
		t.Fatalf("restore of a file in STANDARD: %d, want a refusal", resp.StatusCode)
	}
	if !strings.Contains(body, "RestoreObject answered") || strings.Contains(body, "&amp;#") || !strings.Contains(body, "object&#39;s current storage class") {
		t.Errorf("the refusal's message is not shown as S3 wrote it:\n%s", body)
	}
}

// TestLoginRefusedLogsNoSecret: a refused login logged the form's access
// key whole, whatever it was: a user who typed the secret key into the
// access key field (or pasted both into it) put the secret in the log,
// which SECURITY.md says no line carries. An access key that is not
// configured (InvalidAccessKeyId) is logged by its length only; a known
// one (a wrong secret) is logged as before, cut and escaped.
func TestLoginRefusedLogsNoSecret(t *testing.T) {
	s := newServer(t, opts{keys: keys()})
	const typedSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	for _, tc := range []struct {
		name, ak, sk string
		logged       bool
	}{
		{"secret in the access key field", typedSecret, typedSecret, false},
		{"unknown access key", "wJalrXUtnFEMIK7MDENGbPxRfiCY", typedSecret, false},
		{"wrong secret of a known key", goodAK, "not-" + goodSK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(s.logs.String())
			c := s.client(t)
			resp, body := s.login(t, c, tc.ak, tc.sk)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("login: %d %s, want 403", resp.StatusCode, body)
			}
			logs := s.logs.String()[before:]
			if !strings.Contains(logs, "console login refused") {
				t.Fatalf("no login-refused line:\n%s", logs)
			}
			if got := strings.Contains(logs, `"access_key":"`+tc.ak+`"`); got != tc.logged {
				t.Errorf("access key %q logged: %v, want %v:\n%s", tc.ak, got, tc.logged, logs)
			}
			if strings.Contains(logs, typedSecret) || strings.Contains(logs, "wJalrXUtnFEMIK7MDENGbPxRfiCY") {
				t.Errorf("the log holds what was typed as the access key:\n%s", logs)
			}
		})
	}
}
