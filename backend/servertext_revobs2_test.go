package backend_test

import (
	"context"
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

	"github.com/wharf-s3/wharf/backend"
)

// TestS3HostileErrorText: an S3-compatible server's error code and
// message went into the error's text whole, and that text is logged
// outside the access line (the scan's "archive could not be opened", a
// dataset's pointer, an alias) and served on /-/archives: a hostile or
// broken server put kilobytes, newlines and terminal escapes into
// wharf's logs per request. The server's text is now cut and escaped
// where it enters (backend.PrintableText), whatever logs it.
func TestS3HostileErrorText(t *testing.T) {
	long := strings.Repeat("A", 20000)
	for _, tc := range []struct {
		name       string
		status     int
		code, msg  string
		wantInText string // a part of the server's text still shown (escaped)
	}{
		{"long message, known code", 403, "AccessDenied", "denied " + long, "denied AAAA"},
		{"escapes in the message", 403, "AccessDenied", "x\n2026-12-02T00:00:00Z ERR forged\u009b2J\u202e", `x\n2026-12-02T00:00:00Z ERR forged\u009b2J\u202e`},
		{"unknown code, long and escaped", 400, "Weird\u009b31m" + long, "m\r\n" + long, `Weird\u009b31m`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message><RequestId>r</RequestId></Error>",
					xmlText(tc.code), xmlText(tc.msg))
			}))
			defer srv.Close()
			t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
			st, err := backend.NewS3Store(context.Background(), backend.S3Config{Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
				AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxRetries: 1, MaxBackoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, _, gerr := st.Get(context.Background(), "bkt", "some/key")
			if gerr == nil {
				t.Fatal("get: no error")
			}
			s := gerr.Error()
			if len(s) > 2048 {
				t.Errorf("error text of %d bytes (server message of %d), want at most 2048: %.200q...", len(s), len(tc.msg), s)
			}
			for _, r := range s {
				if r == utf8.RuneError || !unicode.IsPrint(r) {
					t.Errorf("error text holds %q unescaped: %.300q", r, s)
					break
				}
			}
			if !strings.Contains(s, tc.wantInText) || !strings.Contains(s, "bkt") || !strings.Contains(s, "some/key") {
				t.Errorf("error text %.300q lacks the server's text %q, or the bucket and key", s, tc.wantInText)
			}
		})
	}
}

// xmlText escapes s for an XML text node, writing control characters as
// character references (as a server may; XML has no ESC, but C1 controls
// such as U+009B, a terminal's CSI, and newlines pass).
func xmlText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '<':
			b.WriteString("&lt;")
		case r == '&':
			b.WriteString("&amp;")
		case r < 0x20:
			fmt.Fprintf(&b, "&#%d;", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestPrintableText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 0, "plain"},
		{"plain", 5, "plain"},
		{"a\nb\x1bc\u202ed\xff", 0, `a\nb\x1bc\u202ed\xff`},
		{strings.Repeat("x", 20), 10, "xxxxxxx... (20 bytes)"},
		{"ééééé", 8, "éé... (10 bytes)"},       // cut at a rune boundary
		{"\n\n\n\n\n", 8, `\n\n... (5 bytes)`}, // and at an escape's
	} {
		if got := backend.PrintableText(tc.in, tc.max); got != tc.want {
			t.Errorf("PrintableText(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

// TestS3ErrorBodyBounded: the SDK copies an error response's whole body
// into memory before parsing it, so a broken or hostile S3-compatible
// server answering an error with an endless body made wharf buffer all of
// it (memory outside any budget, per request). An error body is now read
// up to a bound; past it the request fails as a bad response.
func TestS3ErrorBodyBounded(t *testing.T) {
	const endless = 64 << 20
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>")
		chunk := []byte(strings.Repeat("A", 64<<10))
		for sent.Load() < endless {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		io.WriteString(w, "</Message></Error>")
	}))
	defer srv.Close()
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	st, err := backend.NewS3Store(context.Background(), backend.S3Config{Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, _, gerr := st.Get(context.Background(), "bkt", "k")
	if gerr == nil {
		t.Fatal("get: no error")
	}
	t.Logf("error: %v; the server sent %d bytes", gerr, sent.Load())
	srv.CloseClientConnections()
	// The server's writes stop once the client stops reading; what it
	// got out is the client's reads plus the socket buffers.
	if n := sent.Load(); n >= endless {
		t.Errorf("an error response with an endless body: the client read all %d bytes of it (%.200s)", n, gerr)
	}
	if len(gerr.Error()) > 2048 || !strings.Contains(gerr.Error(), "bkt") {
		t.Errorf("error %.300q: want a short error naming the bucket", gerr)
	}
}
