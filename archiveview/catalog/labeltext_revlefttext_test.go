package catalog_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/backend"
)

// TestCollectorUploadIDPrintable: the upload_id label of wharf_archive_*
// is an uploader's text (the manifest's, or a file store's folder name:
// any byte but '/'). It was made valid UTF-8 and cut, but not escaped:
// the text exposition escapes only backslash, quote and newline, so an
// id's ESC sequences, CR, C1 controls and bidi overrides reached
// whoever read /metrics in a terminal (curl) or a browser. The label is
// the one rule for outside text (backend.PrintableText), cut to 128
// bytes.
func TestCollectorUploadIDPrintable(t *testing.T) {
	const id = "u\x1b[2J\rforged\u009b31m\u202edi"
	dir := t.TempDir()
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"a.txt": []byte("hello\n")}, time.Unix(1700000000, 0)),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: id})
	if err != nil {
		t.Fatal(err)
	}
	a, err := archiveview.Open(context.Background(), backend.NewFileStore(dir), "src", res.ManifestKey, archiveview.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Info().UploadID != id {
		t.Fatalf("upload id %q, want %q", a.Info().UploadID, id)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(catalog.NewCollector(catalog.NewDynamic(map[string]*archiveview.Archive{"data": a})))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&text, mf); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(text.String(), "forged") {
		t.Fatalf("no series with the upload id:\n%s", text.String())
	}
	for _, r := range text.String() {
		if r != '\n' && (r == utf8.RuneError || !unicode.IsPrint(r)) {
			t.Errorf("/metrics holds the upload id's unprintable %U:\n%q", r, text.String())
			break
		}
	}
}
