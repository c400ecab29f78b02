package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// streamCollect streams data (with deleted paths to a callback when
// deletedCB) and returns the manifest with Files (and DeletedPaths)
// rebuilt from deep copies of what the callbacks saw.
func streamCollect(data []byte, key string, lim Limits, deletedCB bool) (*Manifest, error) {
	var files []FileEntry
	var deleted []string
	funcs := StreamFuncs{Files: func(i int, f *FileEntry) error {
		if i != len(files) {
			return fmt.Errorf("entry %d after %d entries", i, len(files))
		}
		files = append(files, copyEntry(f))
		return nil
	}}
	if deletedCB {
		funcs.Deleted = func(i int, p string) error {
			deleted = append(deleted, strings.Clone(p))
			return nil
		}
	}
	m, err := Stream(bytes.NewReader(data), key, lim, funcs)
	if err != nil {
		return nil, err
	}
	m.Files = files
	if deletedCB {
		m.DeletedPaths = deleted
	}
	return m, nil
}

// copyEntry deep-copies a streamed entry (whose memory the decoder reuses).
func copyEntry(f *FileEntry) FileEntry {
	c := *f
	for _, s := range []*string{&c.Path, &c.S3Key, &c.Checksum, &c.ContentHash, &c.DuplicateOfHash, &c.OriginalS3Key} {
		*s = strings.Clone(*s)
	}
	if f.ArchiveOffset != nil {
		v := *f.ArchiveOffset
		c.ArchiveOffset = &v
	}
	if f.Metadata != nil {
		c.Metadata = map[string]string{}
		for k, v := range f.Metadata {
			c.Metadata[strings.Clone(k)] = strings.Clone(v)
		}
	}
	return c
}

// checkStreamAgrees compares Stream with Load on data: the same verdict
// (one sentinel), and for an accepted manifest the same content, except
// what Stream documents it does not keep (file_paths, file_references).
func checkStreamAgrees(t *testing.T, data []byte, key string, lim Limits, deletedCB bool) {
	t.Helper()
	want, lerr := Parse(data, key, lim)
	got, serr := streamCollect(data, key, lim, deletedCB)
	if (lerr == nil) != (serr == nil) {
		t.Fatalf("Load: %v; Stream: %v", lerr, serr)
	}
	if lerr != nil {
		for _, s := range []error{ErrInvalid, ErrTooLarge, ErrEncrypted, ErrVersion} {
			if errors.Is(lerr, s) != errors.Is(serr, s) {
				t.Fatalf("Load: %v; Stream: %v (different kinds)", lerr, serr)
			}
		}
		var me *Error
		if !errors.As(serr, &me) || me.Key != key {
			t.Fatalf("Stream error %v is not an *Error naming the key", serr)
		}
		return
	}
	for i := range want.Chunks {
		want.Chunks[i].FilePaths = nil
	}
	if want.Deduplication != nil {
		want.Deduplication.FileReferences = nil
	}
	// A callback cannot tell an empty array from null or absence.
	if len(want.Files) == 0 && len(got.Files) == 0 {
		got.Files = want.Files
	}
	if deletedCB && len(want.DeletedPaths) == 0 && len(got.DeletedPaths) == 0 {
		got.DeletedPaths = want.DeletedPaths
	}
	if !sameManifest(want, got) || !slices2Equal(want.Warnings, got.Warnings) || len(want.Files) != len(got.Files) {
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		t.Fatalf("Stream differs from Load\n load   %s %q\n stream %s %q", w, want.Warnings, g, got.Warnings)
	}
	for i := range want.Files {
		if !reflect.DeepEqual(want.Files[i].Metadata, got.Files[i].Metadata) && (len(want.Files[i].Metadata) > 0 || len(got.Files[i].Metadata) > 0) {
			t.Fatalf("file %d metadata: %v vs %v", i, want.Files[i].Metadata, got.Files[i].Metadata)
		}
	}
}

func slices2Equal(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// TestStreamMatchesLoad: writer-shaped manifests (plain and gzip), the
// fixtures and a set of lies give the same answer streamed as loaded.
func TestStreamMatchesLoad(t *testing.T) {
	lim := Limits{}
	docs := map[string][]byte{
		"synth":      encode(t, synth(5, 40), false),
		"synth-gzip": encode(t, synth(3, 10), true),
	}
	chain := synth(2, 3)
	chain.PreviousManifestID, chain.DeletedPaths = "20260720-00000000", []string{"/data/src/gone", "/data/src/gone2"}
	chain.Files[1].Metadata = map[string]string{"magika_mime": "text/plain", "content_hash": "d41d8cd98f00b204e9800998ecf8427e"}
	chain.Files[2].Checksum = "not-hex"
	chain.Deduplication = &ManifestDeduplication{Enabled: true, FileReferences: map[string]FileReference{"h": {Hash: "h", S3Key: "k"}}}
	docs["chain-meta-dedup"] = encode(t, chain, false)

	past := synth(1, 3) // the last file's data runs past its framed chunk
	*past.Files[2].ArchiveOffset = past.Chunks[0].UncompressedSize
	docs["offset-past-chunk"] = encode(t, past, false)
	badVer := synth(1, 3)
	badVer.Version = "9.0"
	docs["version"] = encode(t, badVer, false)
	badDel := synth(1, 2)
	badDel.DeletedPaths = []string{"ok", "a\x00b"}
	docs["deleted-nul"] = encode(t, badDel, false)
	overlap := synth(2, 2)
	overlap.Chunks[1].Frames[1].CompressedOffset = 0
	docs["frames"] = encode(t, overlap, false)
	dup := synth(2, 2)
	dup.Chunks = append(dup.Chunks, dup.Chunks[0])
	dup.Chunks[2].CompressedSize++
	docs["dup-chunk"] = encode(t, dup, false)
	for name, doc := range docs {
		for _, cb := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/deleted-callback=%v", name, cb), func(t *testing.T) {
				checkStreamAgrees(t, doc, "p/uploads/u/manifest.json", lim, cb)
			})
		}
	}
	// The offset rule still refuses, naming the entry, and with a Path
	// callback exactly as Load does.
	_, err := streamCollect(docs["offset-past-chunk"], "k", lim, false)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "files[2]") {
		t.Errorf("offset past the chunk: %v", err)
	}
	_, lerr := Parse(docs["offset-past-chunk"], "k", lim)
	_, err = Stream(bytes.NewReader(docs["offset-past-chunk"]), "k", lim, StreamFuncs{
		Files: func(int, *FileEntry) error { return nil },
		Path:  func(i int) string { return past.Files[i].Path },
	})
	if err == nil || lerr == nil || err.Error() != lerr.Error() {
		t.Errorf("with Path: %v; Load: %v", err, lerr)
	}
}

// TestStreamCallbackError: a callback's error comes back as it is, and the
// stream stops at it.
func TestStreamCallbackError(t *testing.T) {
	stop := errors.New("stop here")
	n := 0
	_, err := Stream(bytes.NewReader(encode(t, synth(2, 5), true)), "k", Limits{}, StreamFuncs{Files: func(i int, f *FileEntry) error {
		n++
		if i == 3 {
			return stop
		}
		return nil
	}})
	if err != stop || n != 4 {
		t.Fatalf("err %v after %d entries; want the callback's error after 4", err, n)
	}
	var me *Error
	if errors.As(err, &me) {
		t.Fatal("a callback error became a manifest error")
	}
	if _, err := Stream(bytes.NewReader([]byte(`{}`)), "k", Limits{}, StreamFuncs{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no callback: %v", err)
	}
}

// TestStreamMemory: streaming allocates a bounded amount per file (the
// archive_offset record, 24 bytes), not the entries: 50,000 writer-shaped
// entries (path, s3_key, checksum, metadata, file_paths) stream in well
// under what Load holds.
func TestStreamMemory(t *testing.T) {
	m := synth(50, 1000)
	for i := range m.Files {
		m.Files[i].Metadata = map[string]string{"magika_mime": "application/octet-stream"}
		m.Files[i].ContentHash = "d41d8cd98f00b204e9800998ecf8427e"
	}
	data := encode(t, m, true)
	measure := func(fn func()) uint64 {
		runtime.GC()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		fn()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	files := 0
	streamed := measure(func() {
		_, err := Stream(bytes.NewReader(data), "k", Limits{}, StreamFuncs{Files: func(int, *FileEntry) error { files++; return nil }})
		if err != nil {
			t.Fatal(err)
		}
	})
	loaded := measure(func() {
		if _, err := Parse(data, "k", Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	perFile := float64(streamed) / float64(files)
	t.Logf("%d files: Stream allocated %d bytes (%.1f per file), Load %d (%.1f per file)", files, streamed, perFile, loaded, float64(loaded)/float64(files))
	// 24 bytes of archive_offset record per file, plus the decoder's
	// buffers and the chunk table.
	if perFile > 48 {
		t.Errorf("Stream allocated %.1f bytes per file; want <= 48", perFile)
	}
	if streamed*5 > loaded {
		t.Errorf("Stream allocated %d bytes, Load %d: streaming should need a fraction", streamed, loaded)
	}
}
