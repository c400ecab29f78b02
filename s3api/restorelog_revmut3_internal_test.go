package s3api

import (
	"bytes"
	"strings"
	"testing"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
)

// TestRestoreLogObjectKeys: the restore line's objects are named by their
// store keys, an uploader's text too (the manifest's prefix and chunk
// names): escaped as the file's key is.
func TestRestoreLogObjectKeys(t *testing.T) {
	var logs bytes.Buffer
	s := New(Config{Catalog: catalog.NewStatic(map[string]*archiveview.Archive{}), Logger: zerolog.New(&logs), Registerer: prometheus.NewRegistry()}).(*server)
	const key = "p\u009b2J\u202e/chunk-0000.tar.zst"
	rep := archiveview.RestoreReport{Result: backend.RestoreStarted, Objects: []archiveview.ObjectRestore{{
		StorageObject: archiveview.StorageObject{ObjectClass: chunkio.ObjectClass{Key: key, Class: backend.ClassGlacier}, Size: 1 << 20},
		Sent:          true, Result: backend.RestoreStarted}}}
	s.logRestore(&request{id: "r1", bucket: "data"}, archiveview.File{Key: "a.bin"}, "", backend.RestoreRequest{Days: 1}, rep, 0, nil)
	l := logs.String()
	if !strings.Contains(l, "chunk-0000") {
		t.Fatalf("no object in the restore line: %s", l)
	}
	for _, r := range l {
		if !unicode.IsPrint(r) && r != '\n' {
			t.Fatalf("the restore line holds the unprintable %U of an object's key: %q", r, l)
		}
	}
}
