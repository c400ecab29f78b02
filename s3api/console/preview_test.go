package console

import (
	"bytes"
	"context"
	"encoding/binary"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wharf-s3/wharf/archiveview"
)

// emptyCatalog serves no bucket.
type emptyCatalog struct{}

func (emptyCatalog) Bucket(context.Context, string) (*archiveview.Archive, bool, error) {
	return nil, false, nil
}
func (emptyCatalog) EachBucket(func(string, time.Time)) {}

func encoded(t testing.TB, typ string, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var b bytes.Buffer
	var err error
	switch typ {
	case "png":
		err = png.Encode(&b, img)
	case "jpeg":
		err = jpeg.Encode(&b, img, nil)
	case "gif":
		err = gif.Encode(&b, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webpVP8L is the start of a lossless WebP of w x h pixels (the header
// fields the size comes from; the bitstream after them is not needed).
func webpVP8L(w, h int) []byte {
	b := []byte("RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f")
	v := uint32(w-1) | uint32(h-1)<<14
	b = binary.LittleEndian.AppendUint32(b, v)
	return append(b, make([]byte, 16)...)
}

func webpVP8X(w, h int) []byte {
	b := []byte("RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00")
	b = append(b, byte(w-1), byte((w-1)>>8), byte((w-1)>>16), byte(h-1), byte((h-1)>>8), byte((h-1)>>16))
	return append(b, make([]byte, 8)...)
}

func webpVP8(w, h int) []byte {
	b := []byte("RIFF\x00\x00\x00\x00WEBPVP8 \x00\x00\x00\x00\x00\x00\x00\x9d\x01\x2a")
	b = binary.LittleEndian.AppendUint16(b, uint16(w))
	b = binary.LittleEndian.AppendUint16(b, uint16(h))
	return append(b, make([]byte, 8)...)
}

func TestRender(t *testing.T) {
	long := strings.Repeat("a,b\n", previewBytes/4)
	cases := []struct {
		name, key string
		body      []byte
		truncated bool
		kind      string
		check     func(*preview) bool
	}{
		{"text", "notes.txt", []byte("line one\nline two\n"), false, "text", func(p *preview) bool { return strings.HasPrefix(p.Text, "line one\n") }},
		{"markdown as text", "README.md", []byte("# Title\n*x*"), false, "text", func(p *preview) bool { return p.Text == "# Title\n*x*" }},
		{"html as text", "x.html", []byte("<script>alert(1)</script>"), false, "text", func(p *preview) bool { return strings.Contains(p.Text, "<script>") }},
		{"svg as text, not an image", "x.svg", []byte(`<svg onload="alert(1)"/>`), false, "text", nil},
		{"csv", "t.csv", []byte("a,b\n1,\"x,y\"\n"), false, "csv", func(p *preview) bool { return len(p.Rows) == 2 && p.Rows[1][1] == "x,y" }},
		{"tsv", "t.tsv", []byte("a\tb\n1\t2\n"), false, "csv", func(p *preview) bool { return p.Rows[1][1] == "2" }},
		{"csv cut off: the partial line dropped", "t.csv", []byte("a,b\n1,2\n3,"), true, "csv", func(p *preview) bool { return len(p.Rows) == 2 }},
		{"csv capped", "t.csv", []byte(long), true, "csv", func(p *preview) bool { return len(p.Rows) == maxCSVRows }},
		{"ragged csv still a table", "t.csv", []byte("a\n1,2,3\n"), false, "csv", func(p *preview) bool { return len(p.Rows[1]) == 3 }},
		{"json pretty", "m.json", []byte(`{"a":1}`), false, "json", func(p *preview) bool { return p.Text == "{\n  \"a\": 1\n}" }},
		{"json invalid kept", "m.json", []byte(`{"a":`), false, "json", func(p *preview) bool { return p.Text == `{"a":` }},
		{"png", "p.png", encoded(t, "png", 37, 23), false, "image", func(p *preview) bool { return p.Width == 37 && p.Height == 23 && p.ImageType == "image/png" }},
		{"png named .txt is still an image", "p.txt", encoded(t, "png", 5, 6), false, "image", nil},
		{"jpeg", "p.jpg", encoded(t, "jpeg", 40, 30), false, "image", func(p *preview) bool { return p.Width == 40 && p.Height == 30 }},
		{"gif", "p.gif", encoded(t, "gif", 9, 7), false, "image", func(p *preview) bool { return p.Width == 9 && p.Height == 7 }},
		{"webp lossless", "p.webp", webpVP8L(300, 200), false, "image", func(p *preview) bool { return p.Width == 300 && p.Height == 200 }},
		{"webp extended", "p.webp", webpVP8X(1000, 70000), false, "image", func(p *preview) bool { return p.Width == 1000 && p.Height == 70000 }},
		{"webp lossy", "p.webp", webpVP8(640, 480), false, "image", func(p *preview) bool { return p.Width == 640 && p.Height == 480 }},
		{"zarr v2", "a/.zarray", []byte(`{"zarr_format":2,"shape":[10],"chunks":[5],"dtype":"<i4","extra":true}`), false, "zarr",
			func(p *preview) bool {
				return p.Zarr[0] == [2]string{"zarr_format", "2"} && p.Zarr[len(p.Zarr)-1][0] == "extra"
			}},
		{"zarr v3", "a/zarr.json", []byte(`{"zarr_format":3,"node_type":"array","shape":[4,4],"data_type":"float32","attributes":{"units":"m"}}`), false, "zarr",
			func(p *preview) bool {
				return len(p.Zarr) == 5 && p.Zarr[4] == [2]string{"attributes", `{"units":"m"}`}
			}},
		{"zarr not json falls back to text", "a/.zattrs", []byte("not json"), false, "text", nil},
		{"binary as hex", "x.bin", []byte{0, 1, 2, 'A', 0xff}, false, "hex", func(p *preview) bool {
			return strings.HasPrefix(p.Text, "00000000  00 01 02 41 ff") && strings.HasSuffix(p.Text, "|...A.|\n")
		}},
		{"utf-8 cut mid-rune", "x.txt", []byte("ab\xc3"), true, "text", func(p *preview) bool { return p.Text == "ab" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := render(c.key, c.body, c.truncated, "/raw")
			if p.Kind != c.kind || c.check != nil && !c.check(p) {
				t.Fatalf("render(%q) = %+v, want kind %s", c.key, p, c.kind)
			}
		})
	}
}

func TestDisposition(t *testing.T) {
	for key, want := range map[string]string{
		"a/b.txt":       `attachment; filename="b.txt"; filename*=UTF-8''b.txt`,
		`x/"q";\%.txt`:  `attachment; filename="_q____.txt"; filename*=UTF-8''%22q%22%3B%5C%25.txt`,
		"ü<>.csv":       `attachment; filename="___.csv"; filename*=UTF-8''%C3%BC%3C%3E.csv`,
		"line\r\nbreak": `attachment; filename="line__break"; filename*=UTF-8''line%0D%0Abreak`,
	} {
		if got := disposition("attachment", key); got != want {
			t.Errorf("disposition(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestLoginLimiter(t *testing.T) {
	l := newLoginLimiter(2, time.Second, 2)
	now := time.Unix(1000, 0)
	first, second, third := l.allow("a", now), l.allow("a", now), l.allow("a", now)
	if !first || !second || third {
		t.Fatal("burst of 2 not enforced")
	}
	if !l.allow("a", now.Add(time.Second)) || l.allow("a", now.Add(time.Second)) {
		t.Fatal("one token per second not refilled")
	}
	if !l.allow("b", now) || l.allow("c", now) {
		t.Fatal("the tracked addresses are not capped (a and b fill it)")
	}
	if !l.allow("c", now.Add(10*time.Second)) {
		t.Fatal("refilled addresses are not forgotten to make room")
	}
}

func TestSessionStoreBounded(t *testing.T) {
	s := newSessionStore(3)
	now := time.Unix(1000, 0)
	for i := 0; i < 5; i++ {
		s.put(&session{id: string(rune('a' + i)), expires: now.Add(time.Duration(i+1) * time.Hour)}, now)
	}
	if len(s.m) != 3 || s.get("a", now) != nil || s.get("e", now) == nil {
		t.Fatalf("store %d sessions; the soonest to expire should have gone", len(s.m))
	}
	if s.get("e", now.Add(6*time.Hour)) != nil {
		t.Fatal("an expired session is still served")
	}
}

func TestSessionExpiresAndSecureOverTLS(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c := New(Config{Catalog: emptyCatalog{}, SessionTTL: time.Hour, Now: func() time.Time { return now }})
	se := &session{id: "id1", expires: now.Add(time.Hour)}
	c.sessions.put(se, now)
	r := httptest.NewRequest("GET", "https://example/-/console/", nil)
	ck := c.cookie(r, sessionCookie, c.sessionValue(se), 3600)
	if !ck.Secure || !ck.HttpOnly {
		t.Fatalf("cookie over TLS: %+v", ck)
	}
	r.AddCookie(ck)
	if c.session(r) == nil {
		t.Fatal("a fresh session is refused")
	}
	now = now.Add(time.Hour)
	if c.session(r) != nil {
		t.Fatal("a session past its expiry is accepted")
	}
	// A cookie whose expiry was edited does not verify.
	now = now.Add(-time.Hour)
	parts := strings.Split(ck.Value, ".")
	r2 := httptest.NewRequest("GET", "https://example/-/console/", nil)
	r2.AddCookie(&http.Cookie{Name: sessionCookie, Value: parts[0] + ".9999999999." + parts[2]})
	if c.session(r2) != nil {
		t.Fatal("a cookie with an edited expiry is accepted")
	}
	// Another console (another process's random secret) refuses it.
	other := New(Config{Catalog: emptyCatalog{}, Now: func() time.Time { return now }})
	other.sessions.put(se, now)
	if other.session(r) != nil {
		t.Fatal("a cookie signed by another console's secret is accepted")
	}
}

// FuzzRender: any bytes under any name render without panicking, and a
// text preview holds valid UTF-8.
func FuzzRender(f *testing.F) {
	f.Add("a.csv", []byte("a,b\n\"x"), true)
	f.Add("p.webp", webpVP8L(3, 4), false)
	f.Add("p.webp", []byte("RIFF\x00\x00\x00\x00WEBPVP8X"), false)
	f.Add(".zarray", []byte(`{"shape":[1]}`), false)
	f.Add("x.png", []byte("\x89PNG\r\n\x1a\n\x00"), false)
	f.Fuzz(func(t *testing.T, key string, b []byte, truncated bool) {
		p := render(key, b, truncated, "/raw")
		if (p.Kind == "text" || p.Kind == "csv") && !utf8.ValidString(p.Text) {
			t.Fatalf("text preview with invalid UTF-8: %q", p.Text)
		}
		if p.Width < 0 || p.Height < 0 {
			t.Fatalf("negative image size %dx%d", p.Width, p.Height)
		}
	})
}

func TestStreamLimit(t *testing.T) {
	var l streamLimit
	a1, a2, a3, b1 := l.acquire("a", 2), l.acquire("a", 2), l.acquire("a", 2), l.acquire("b", 2)
	if !a1 || !a2 || a3 || !b1 {
		t.Fatal("two streams per visitor not enforced")
	}
	l.release("a")
	if !l.acquire("a", 2) {
		t.Fatal("a released slot is not reusable")
	}
	l.release("a")
	l.release("a")
	l.release("b")
	if len(l.n) != 0 {
		t.Fatalf("counts left behind: %v", l.n)
	}
}

// TestZarrSummaryCutsWholeRunes: a long Zarr field is cut to 300 bytes
// and "…"; the cut never splits a rune, so the page holds valid UTF-8.
func TestZarrSummaryCutsWholeRunes(t *testing.T) {
	for pad := 0; pad < 3; pad++ {
		doc := `{"zarr_format":2,"attributes":{"title":"` + strings.Repeat("x", pad) + strings.Repeat("é", 400) + `"}}`
		z := zarrSummary([]byte(doc))
		for _, row := range z {
			if !utf8.ValidString(row[1]) {
				t.Errorf("pad %d: field %s is not valid UTF-8: %q", pad, row[0], row[1][len(row[1])-8:])
			}
		}
	}
}
