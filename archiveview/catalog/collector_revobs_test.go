package catalog_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/backend"
)

// TestCollectorHostileUploadID: an archive's upload id is a label of the
// wharf_archive_* gauges. A manifest without upload_id takes it from its
// folder (uploads/<id>/manifest.json), and a file store's folder name is
// whatever bytes an uploader chose: not valid UTF-8, or kilobytes long. A
// label value that is not UTF-8 made prometheus.MustNewConstMetric panic
// inside the registry's collect goroutine: every /metrics scrape killed
// the process. The gauges are exported with the value made valid and
// bounded, and the scrape succeeds.
func TestCollectorHostileUploadID(t *testing.T) {
	dir := t.TempDir()
	res, err := cargopack.Write(context.Background(), cargopack.DirSink(dir), cargopack.FromMap(map[string][]byte{"a.txt": []byte("hello\n")}, time.Unix(1700000000, 0)),
		cargopack.Options{Bucket: "src", Prefix: "p", UploadID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := os.ReadFile(filepath.Join(dir, "src", res.ManifestKey))
	if err != nil {
		t.Fatal(err)
	}
	src := stored
	if strings.HasSuffix(res.ManifestKey, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(stored))
		if err != nil {
			t.Fatal(err)
		}
		if src, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	// No upload_id member: the id is the folder's name.
	noID := bytes.Replace(src, []byte(`"upload_id"`), []byte(`"x_upload_id"`), 1)
	if bytes.Equal(noID, src) {
		t.Fatalf("manifest has no upload_id member: %s", src[:min(len(src), 200)])
	}
	long := strings.Repeat("L", 200)
	for _, tc := range []struct{ name, folder string }{
		{"not UTF-8", "bad\xff\xfeid"},
		{"long", long},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "p/uploads/" + tc.folder + "/manifest.json"
			if err := os.MkdirAll(filepath.Join(dir, "src", "p", "uploads", tc.folder), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "src", key), noID, 0o644); err != nil {
				t.Fatal(err)
			}
			a, err := archiveview.Open(context.Background(), backend.NewFileStore(dir), "src", key, archiveview.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if a.Info().UploadID != tc.folder {
				t.Fatalf("upload id %q, want the folder's name %q", a.Info().UploadID, tc.folder)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(catalog.NewCollector(catalog.NewDynamic(map[string]*archiveview.Archive{"data": a})))
			var mfs []string
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("scrape panicked: %v", r)
					}
				}()
				got, err := reg.Gather()
				if err != nil {
					t.Fatalf("scrape: %v", err)
				}
				for _, mf := range got {
					for _, m := range mf.Metric {
						for _, l := range m.Label {
							mfs = append(mfs, l.GetValue())
						}
					}
				}
			}()
			if len(mfs) == 0 {
				t.Fatal("no series")
			}
			for _, v := range mfs {
				if len(v) > 128 {
					t.Errorf("label value of %d bytes, want at most 128", len(v))
				}
			}
		})
	}
}
