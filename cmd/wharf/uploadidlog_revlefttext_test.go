package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// TestServeLongUploadIDLogged: a manifest's upload_id is checked only for
// being one key segment, so it may be any length (the manifest's JSON
// limit) and hold C1 controls. It was made a valid, cut label on
// wharf_archive_*, but the start's lines ("archive opened", "serving
// archive" with upload_id and its chain) logged it whole, as is: a 64 KiB
// id made two lines over 64 KiB each (pipelines split such lines, and
// what follows the split is the uploader's text). It is now logged by
// the one rule for outside text (backend.PrintableText), cut to 128
// bytes like the label and escaped.
func TestServeLongUploadIDLogged(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	longID := "u\u009b2J" + strings.Repeat("x", 64<<10)
	rewriteManifest(t, filepath.Join(strings.TrimPrefix(store, "file://"), "src", filepath.FromSlash(strings.TrimPrefix(man, "s3://src/"))), func(m map[string]any) {
		m["upload_id"] = longID
	})
	_, admin, logs, stop := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 16 << 20, LogFormat: "json",
	})
	defer stop()
	waitReady(t, admin)
	seen := 0
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.Contains(l, "xxxxxxxx") {
			continue
		}
		seen++
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %.200q: %v", l, err)
		}
		if len(l) > 4<<10 {
			t.Errorf("line %q of %d bytes names the 64 KiB upload id, want at most 4 KiB", m["message"], len(l))
		}
		for _, r := range l {
			if !unicode.IsPrint(r) {
				t.Errorf("line %q holds the upload id's unprintable %U", m["message"], r)
				break
			}
		}
		if id, ok := m["upload_id"].(string); ok && (len(id) > 200 || !strings.HasPrefix(id, `u\u009b2Jxxx`)) {
			t.Errorf("line %q: upload_id of %d bytes (%.40q), want it escaped and cut to 128", m["message"], len(id), id)
		}
	}
	if seen == 0 {
		t.Fatalf("no line names the upload id:\n%.2000s", logs.String())
	}
}

// TestAdminArchivesPrintable: /-/archives (JSON, read with curl in a
// terminal) carried an uploader's upload id with its C1 controls and
// bidi override as is (encoding/json escapes only the ASCII controls,
// <, >, & and U+2028/9). The admin pages write JSON as the log does
// (printableJSON): every unprintable rune as a \u escape, the same values
// decoded.
func TestAdminArchivesPrintable(t *testing.T) {
	store, man := packServeTree(t, map[string][]byte{"a.txt": []byte("hello\n")})
	const id = "u\u009b2J\u202edi"
	rewriteManifest(t, filepath.Join(strings.TrimPrefix(store, "file://"), "src", filepath.FromSlash(strings.TrimPrefix(man, "s3://src/"))), func(m map[string]any) {
		m["upload_id"] = id
	})
	_, admin, _, stop := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: store,
		Archives: []serveArchive{{Name: "data", ManifestURL: man}}, Anonymous: true, CacheBytes: 16 << 20, LogFormat: "json",
	})
	defer stop()
	waitReady(t, admin)
	code, body := get(t, "http://"+admin+"/-/archives")
	if code != 200 {
		t.Fatalf("/-/archives: %d %s", code, body)
	}
	for _, r := range string(body) {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Errorf("/-/archives holds the upload id's unprintable %U:\n%q", r, body)
			break
		}
	}
	if !json.Valid(body) || !strings.Contains(string(body), `u\u009b2J\u202edi`) {
		t.Errorf("/-/archives does not carry the id as JSON escapes:\n%s", body)
	}
}
