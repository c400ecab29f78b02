package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestConsoleDatasetHistory: the console shows a published dataset's
// versions as the S3 API does (its published versions, not the upload
// chain of the version served), and an older version's page and download
// read that version's bytes. Before the console read catalog's history, a
// dataset file's page listed only the served upload and ?version=<a
// published id> answered "No version".
func TestConsoleDatasetHistory(t *testing.T) {
	d := newHistoryLake(t)
	addr, _, _, _ := startServe(t, serveConfig{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", StoreURL: "s3://", S3: d.s3Config(),
		Aliases:   []serveAlias{{Name: "sea", Target: "s3://lake/datasets/sea@current"}},
		Anonymous: true, Console: true, CacheBytes: 16 << 20, RetireGrace: 10 * time.Millisecond, WaitOpen: true,
	})
	base := "http://" + addr + "/-/console/"

	// The file page of a key changed in every version lists all three
	// published versions (the first visit may find the history building).
	var page string
	for end := time.Now().Add(20 * time.Second); ; {
		code, body := get(t, base+"f/sea?key=changed.txt")
		page = string(body)
		if code != 200 {
			t.Fatalf("file page: %d %s", code, body)
		}
		if !strings.Contains(page, "being built") || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range hsIDs {
		if !strings.Contains(page, "version="+id) {
			t.Errorf("the file page does not link version %s:\n%s", id, page)
		}
	}

	// Each published version's download is that version's bytes.
	for vi, id := range hsIDs {
		want, ok := hsFiles[vi]["changed.txt"]
		if !ok {
			continue
		}
		code, body := get(t, base+"dl/sea?key=changed.txt&version="+id)
		if code != 200 || !bytes.Equal(body, want) {
			t.Errorf("download of changed.txt as of %s: %d %q, want %q", id, code, body, want)
		}
		if code, body := get(t, base+"f/sea?key=changed.txt&version="+id); code != 200 {
			t.Errorf("file page of changed.txt as of %s: %d %s", id, code, body)
		}
	}
	// A version id that is not published is a clean 404.
	if code, _ := get(t, base+"dl/sea?key=changed.txt&version=20000101T000000Z-000000"); code != 404 {
		t.Errorf("download of an unknown version: %d, want 404", code)
	}
}
