package manifest

// Tests written for mutants that survived scripts/mutation.sh (TESTING.md
// lists them): every count cap at exactly the cap and one past it, in the
// decoder and in Validate, and the time fast path taken for the forms it
// exists for.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// capManifest is synth(2, 3) (6 files, 2 chunks of 3 file_paths, 4
// frames) with 6 deleted paths, 6 format features, 6 metadata entries on
// its first file, 2 shards and 6 dedup file references: every list at
// exactly 6 (files), 2 (chunks) or 4 (frames).
func capManifest() *Manifest {
	m := synth(2, 3)
	m.PreviousManifestID = "20260720-00000000"
	m.SyncType = "incremental"
	for i := 0; i < 6; i++ {
		m.DeletedPaths = append(m.DeletedPaths, fmt.Sprintf("/data/src/gone/%d", i))
	}
	m.FormatFeatures = []string{"frames", "f2", "f3", "f4", "f5", "f6"}
	m.Files[0].Metadata = map[string]string{}
	for i := 0; i < 6; i++ {
		m.Files[0].Metadata[fmt.Sprintf("k%d", i)] = "v"
	}
	for c := range m.Chunks {
		m.Shards = append(m.Shards, ShardEntry{ID: c, Prefix: fmt.Sprintf("shard-%d", c), ChunkCount: 1,
			FileCount: 3, ChunkKeys: []string{m.Chunks[c].S3Key}})
	}
	m.Deduplication = &ManifestDeduplication{Enabled: true, FileReferences: map[string]FileReference{}}
	for i := 0; i < 6; i++ {
		m.Deduplication.FileReferences[fmt.Sprintf("h%d", i)] = FileReference{Hash: "h", S3Key: m.Chunks[0].S3Key, Size: 1, RefCount: 1}
	}
	return m
}

var capLimits = Limits{MaxFiles: 6, MaxChunks: 2, MaxFrames: 4}

func TestDecodeCountCapsAtTheCap(t *testing.T) {
	const key = "p/uploads/u/manifest.json"
	if _, err := Parse(encode(t, capManifest(), false), key, capLimits); err != nil {
		t.Fatalf("every list exactly at its cap: %v", err)
	}
	// One past the cap, one list at a time: the decoder refuses it while
	// decoding ("more than N <list>"), before Validate could.
	for _, c := range []struct {
		what string
		grow func(m *Manifest)
	}{
		{"deleted_paths", func(m *Manifest) { m.DeletedPaths = append(m.DeletedPaths, "/data/src/gone/x") }},
		{"format_features", func(m *Manifest) { m.FormatFeatures = append(m.FormatFeatures, "f7") }},
		{"metadata entries", func(m *Manifest) { m.Files[0].Metadata["k6"] = "v" }},
		{"file_references", func(m *Manifest) { m.Deduplication.FileReferences["h6"] = FileReference{Hash: "h"} }},
		{"shards", func(m *Manifest) { m.Shards = append(m.Shards, ShardEntry{ID: 2}) }},
		{"file_paths", func(m *Manifest) {
			m.Chunks[0].FilePaths = append(m.Chunks[0].FilePaths, "/x/1", "/x/2", "/x/3", "/x/4")
		}},
		{"frames", func(m *Manifest) {
			m.Chunks[1].Frames = append(m.Chunks[1].Frames, m.Chunks[1].Frames[1])
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			m := capManifest()
			c.grow(m)
			_, err := Parse(encode(t, m, false), key, capLimits)
			checkErr(t, "Parse", err, ErrTooLarge, key, "more than ")
			if !strings.Contains(err.Error(), c.what) {
				t.Fatalf("error %q does not name %s", err, c.what)
			}
		})
	}
}

func TestValidateCountCapsAtTheCap(t *testing.T) {
	const key = "p/uploads/u/manifest.json"
	if _, err := Validate(capManifest(), key, capLimits); err != nil {
		t.Fatalf("every list exactly at its cap: %v", err)
	}
	for _, c := range []struct {
		msg  string
		grow func(m *Manifest)
	}{
		{"7 files, limit 6", func(m *Manifest) { m.Files = append(m.Files, m.Files[0]) }},
		{"3 chunks, limit 2", func(m *Manifest) { m.Chunks = append(m.Chunks, m.Chunks[0]) }},
		{"3 shards, limit 2", func(m *Manifest) { m.Shards = append(m.Shards, ShardEntry{ID: 2}) }},
		{"7 deleted_paths, limit 6", func(m *Manifest) { m.DeletedPaths = append(m.DeletedPaths, "/data/src/gone/x") }},
		{"more than 4 frames", func(m *Manifest) { m.Chunks[1].Frames = append(m.Chunks[1].Frames, m.Chunks[1].Frames[1]) }},
	} {
		t.Run(c.msg, func(t *testing.T) {
			m := capManifest()
			c.grow(m)
			_, err := Validate(m, key, capLimits)
			checkErr(t, "Validate", err, ErrTooLarge, key, c.msg)
		})
	}
}

// TestParseTimeFastTakesCanonicalForms: the fast path exists for the form
// Go's time.Time JSON encoding writes; it must take every such value,
// including each field at its limits, leap days and the zone forms, and
// agree with UnmarshalJSON (TestParseTimeFast checks only the values it
// takes).
func TestParseTimeFastTakesCanonicalForms(t *testing.T) {
	for _, s := range []string{
		"2026-01-01T00:00:00Z", "2026-12-31T23:59:59Z", "2026-11-30T12:00:00Z", "2026-02-28T00:00:00Z",
		"2024-02-29T00:00:00Z", "2000-02-29T00:00:00Z", "1996-02-29T00:00:00Z",
		"2026-07-21T12:34:56.1Z", "2026-07-21T12:34:56.123456789Z", "2026-07-21T12:34:56.000000001Z",
		"2026-07-21T12:34:56+23:59", "2026-07-21T12:34:56-23:59", "2026-07-21T12:34:56+00:00", "2026-07-21T12:34:56-07:00",
		"0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
	} {
		var want time.Time
		if err := want.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
			t.Fatalf("%s: test setup: %v", s, err)
		}
		got, ok := parseTimeFast([]byte(s), map[int]*time.Location{})
		if !ok {
			t.Errorf("%s: the fast path refused a canonical time", s)
			continue
		}
		if !got.Equal(want) || got.Format(time.RFC3339Nano) != want.Format(time.RFC3339Nano) {
			t.Errorf("%s: fast %v, UnmarshalJSON %v", s, got, want)
		}
	}
	for _, s := range []string{"1900-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2026-04-31T00:00:00Z"} {
		if got, ok := parseTimeFast([]byte(s), map[int]*time.Location{}); ok {
			t.Errorf("%s: the fast path took a day that does not exist (%v)", s, got)
		}
	}
}

// TestParseTimeFastZoneCache: at most 64 distinct offsets are cached per
// manifest; past that the fast path declines (the caller falls back), and
// offsets already cached are still served from the cache.
func TestParseTimeFastZoneCache(t *testing.T) {
	zones := map[int]*time.Location{}
	n := 0
	for h := 0; h < 24 && n < 64; h++ {
		for _, m := range []int{1, 17, 31, 47} {
			if n == 64 {
				break
			}
			s := fmt.Sprintf("2026-07-21T12:00:00+%02d:%02d", h, m)
			if _, ok := parseTimeFast([]byte(s), zones); !ok {
				t.Fatalf("%s (offset %d of 64): refused", s, n+1)
			}
			n++
		}
	}
	if len(zones) != 64 {
		t.Fatalf("%d zones cached after 64 offsets", len(zones))
	}
	if _, ok := parseTimeFast([]byte("2026-07-21T12:00:00-11:11"), zones); ok || len(zones) != 64 {
		t.Errorf("a 65th offset: ok=%v, %d zones cached", ok, len(zones))
	}
	if _, ok := parseTimeFast([]byte("2026-07-21T12:00:00+00:01"), zones); !ok {
		t.Error("a cached offset is refused once the cache is full")
	}
}
