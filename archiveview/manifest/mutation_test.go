package manifest

// Tests written for mutants that survived scripts/mutation.sh (TESTING.md
// lists them): every count cap at exactly the cap and one past it, in the
// decoder and in Validate; the time fast path taken for the forms it exists
// for and UnmarshalJSON for the others; the lexer at its buffer's edges,
// at its nesting limit, at the integer limits and cut inside a number; key
// cleaning at the ends of each character range; the encrypted envelope's
// message.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
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
		what  string
		files bool // capped at MaxFiles: FilesLimit names the cap
		grow  func(m *Manifest)
	}{
		{"deleted_paths", true, func(m *Manifest) { m.DeletedPaths = append(m.DeletedPaths, "/data/src/gone/x") }},
		{"format_features", true, func(m *Manifest) { m.FormatFeatures = append(m.FormatFeatures, "f7") }},
		{"metadata entries", true, func(m *Manifest) { m.Files[0].Metadata["k6"] = "v" }},
		{"file_references", true, func(m *Manifest) { m.Deduplication.FileReferences["h6"] = FileReference{Hash: "h"} }},
		{"shards", false, func(m *Manifest) { m.Shards = append(m.Shards, ShardEntry{ID: 2}) }},
		{"file_paths", true, func(m *Manifest) {
			m.Chunks[0].FilePaths = append(m.Chunks[0].FilePaths, "/x/1", "/x/2", "/x/3", "/x/4")
		}},
		{"frames", false, func(m *Manifest) {
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
			// The MaxFiles cap, structured (archiveview/catalog retries
			// past its own low cap by it, issue 21).
			want := 0
			if c.files {
				want = capLimits.MaxFiles
			}
			var me *Error
			if !errors.As(err, &me) || me.FilesLimit != want {
				t.Fatalf("FilesLimit of %v: %+v, want %d", err, me, want)
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

// TestStripURLSchemes: a key in URL form loses "scheme://bucket/" when the
// scheme is a real one (a letter, then letters, digits, "+", "-", "."),
// every letter and digit at both ends of its range included; anything else
// is left alone.
func TestStripURLSchemes(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"s3://bucket/dir/key", "dir/key", true},
		{"aZ0zA9+.-://bucket/key", "key", true},
		{"S3://bucket/key", "key", true},
		{"s3:///key", "key", true}, // empty bucket name
		{"s3://bucket", "", true},
		{"://bucket/key", "://bucket/key", false}, // no scheme
		{"0s3://bucket/key", "0s3://bucket/key", false},
		{"s_3://bucket/key", "s_3://bucket/key", false},
		{"dir/a://b", "dir/a://b", false},
	} {
		if got, ok := stripURL(c.in); got != c.want || ok != c.ok {
			t.Errorf("stripURL(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestRelativeKeyVolumesAndSpaces: a leading drive name is dropped for
// every letter at both ends of both ranges and for nothing else; a space is
// an ordinary character, not a control character.
func TestRelativeKeyVolumesAndSpaces(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a:/k", "k"}, {"z:/k", "k"}, {"A:/k", "k"}, {"Z:/k", "k"}, {`C:\dir\k`, "dir/k"},
		{"1:/k", "1:/k"}, {"@:/k", "@:/k"}, {"[:/k", "[:/k"}, {"`:/k", "`:/k"}, {"{:/k", "{:/k"},
		{"dir/c:/k", "dir/c:/k"},
		{"a b/c d ", "a b/c d "},
	} {
		if got, err := RelativeKey("", c.in); err != nil || got != c.want {
			t.Errorf("RelativeKey(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestDecodeMemberOrder: a manifest whose "chunks" come before its "files"
// (JSON members in any order) decodes to the same manifest; the decoder's
// path sharing between chunks[].file_paths and files[] is only a hint.
func TestDecodeMemberOrder(t *testing.T) {
	const key = "p/uploads/u/manifest.json"
	data := encode(t, synth(2, 3), false)
	var members map[string]any
	if err := json.Unmarshal(data, &members); err != nil {
		t.Fatal(err)
	}
	reordered, err := json.Marshal(members) // map keys sorted: "chunks" before "files"
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Index(reordered, []byte(`"chunks"`)) > bytes.Index(reordered, []byte(`"files"`)) {
		t.Fatal("re-encoded manifest does not put chunks first")
	}
	want, err := Parse(data, key, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(reordered, key, DefaultLimits())
	if err != nil {
		t.Fatalf("chunks before files: %v", err)
	}
	if !reflect.DeepEqual(got.Files, want.Files) || !reflect.DeepEqual(got.Chunks, want.Chunks) {
		t.Fatal("chunks before files decodes to a different manifest")
	}
}

// TestEncryptedEnvelopeNamed: a KMS-encrypted manifest is refused with
// ErrEncrypted, and the message names the envelope's algorithm and
// binding_version as the wrapper gives them (members in either order, a
// binding_version of 0, 9 or negative), whether the wrapper is found by
// its object name or by its members.
func TestEncryptedEnvelopeNamed(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{"encrypted_data":"x","algorithm":"XYZ-1","binding_version":0}`, "(XYZ-1 envelope, binding_version 0)"},
		{`{"binding_version":9,"algorithm":"XYZ-1","encrypted_data":"x"}`, "(XYZ-1 envelope, binding_version 9)"},
		{`{"encrypted_dek":"x","algorithm":"XYZ-1","binding_version":-2}`, "(XYZ-1 envelope, binding_version -2)"},
		{`{"encrypted_data":"x","binding_version":1}`, "(AES-256-GCM envelope, binding_version 1)"},
	} {
		for _, key := range []string{"p/uploads/u/manifest.json", "p/uploads/u/" + ManifestNameEncryptedPlain} {
			_, err := Parse([]byte(c.json), key, DefaultLimits())
			if !errors.Is(err, ErrEncrypted) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s as %s: %v; want ErrEncrypted naming %s", c.json, key, err, c.want)
			}
		}
	}
}

// TestReadStringInvalidUTF8: a byte that is not part of valid UTF-8 becomes
// U+FFFD, a lone continuation byte (0x80, the first non-ASCII byte)
// included.
func TestReadStringInvalidUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"\"a\x80b\"":      "a\uFFFDb",
		"\"\xffz\"":       "\uFFFDz",
		"\"caf\xc3\xa9\"": "café",
	} {
		l := newLexer(strings.NewReader(in), 64)
		got, err := l.readString()
		if err != nil || string(got) != want {
			t.Errorf("readString(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestDecodeOneByteAtATime: a manifest read one byte per Read call, with
// the smallest lexer buffer, decodes exactly as it does in one piece:
// every token, escape (kept or skipped) and literal may end at a buffer
// boundary.
func TestDecodeOneByteAtATime(t *testing.T) {
	const key = "p/uploads/u/manifest.json"
	m := synth(2, 3)
	m.Files[0].Path = "/data/src/dir0000/sub/caf\u00e9 \"quoted\" \\ \U0001F600"
	m.Chunks[0].FilePaths[0] = m.Files[0].Path
	data := encode(t, m, false)
	want, err := decode(bytes.NewReader(data), key, DefaultLimits(), len(data)*4)
	if err != nil {
		t.Fatal(err)
	}
	// Members the decoder skips, with every kind of escape, a \u escape of
	// each case and a surrogate pair, and the literals.
	extra := `"x_skipped": ["a\"b\\c\/d\be\ff\ng\rh\ti", "\u00e9\u00E9\ud83d\ude00", true, false, null, -1.5e3, {"k": [1, "\u0041"]}], `
	data = append([]byte("{"+extra), bytes.TrimPrefix(bytes.TrimSpace(data), []byte("{"))...)
	got, err := decode(iotest.OneByteReader(bytes.NewReader(data)), key, DefaultLimits(), 64)
	if err != nil {
		t.Fatalf("one byte at a time: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("one byte at a time decodes to a different manifest")
	}
}

// TestLiteralAtBufferEnd: a literal split by the end of the lexer's buffer
// is completed by the next read, and a literal cut short by the end of the
// input is refused, not read past the buffer.
func TestLiteralAtBufferEnd(t *testing.T) {
	pad := strings.Repeat(" ", 62)
	l := newLexer(strings.NewReader(pad+"true "), 64) // "tr" in the first 64 bytes
	if err := l.skipValue(); err != nil {
		t.Fatalf("true across the buffer end: %v", err)
	}
	l = newLexer(iotest.DataErrReader(strings.NewReader(pad[:61]+"tru")), 64) // EOF with the last bytes
	if err := l.skipValue(); err == nil {
		t.Fatal("a truncated literal at the end of a full buffer accepted")
	}
}

// TestNestingDepth: nesting up to maxDepth is accepted and one more level
// refused, for objects and arrays; depth is nesting, not a count of the
// values seen, so 2*maxDepth sibling objects and arrays (empty or not) are
// fine.
func TestNestingDepth(t *testing.T) {
	nest := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	siblings := func(v string) string {
		return "[" + strings.Repeat(v+",", 2*maxDepth) + v + "]"
	}
	for _, c := range []struct {
		name, doc string
		ok        bool
	}{
		{"arrays at the limit", nest("[", "]", maxDepth), true},
		{"arrays past the limit", nest("[", "]", maxDepth+1), false},
		{"objects at the limit", nest(`{"a":`, "}", maxDepth), true},
		{"objects past the limit", nest(`{"a":`, "}", maxDepth+1), false},
		{"empty objects", siblings("{}"), true},
		{"objects", siblings(`{"a":1}`), true},
		{"empty arrays", siblings("[]"), true},
		{"arrays", siblings("[1]"), true},
	} {
		err := newLexer(strings.NewReader(c.doc), 64).skipValue()
		if c.ok && err != nil || !c.ok && (err == nil || !strings.Contains(err.Error(), "nesting depth")) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestIntegerLimitsExact: the integer readers take every value of their
// type, the extremes included, and refuse one past either end.
func TestIntegerLimitsExact(t *testing.T) {
	for _, c := range []struct {
		in  string
		ok  bool
		i32 bool
	}{
		{"9223372036854775807", true, false},
		{"-9223372036854775808", true, false},
		{"9223372036854775808", false, false},
		{"-9223372036854775809", false, false},
		{"92233720368547758070", false, false},
		{"2147483647", true, true},
		{"-2147483648", true, true},
		{"2147483648", false, true},
		{"-2147483649", false, true},
	} {
		l := newLexer(strings.NewReader(c.in), 64)
		var err error
		var got string
		if c.i32 {
			var v int32
			err = l.i32(&v)
			got = fmt.Sprint(v)
		} else {
			var v int64
			err = l.i64(&v)
			got = fmt.Sprint(v)
		}
		if c.ok && (err != nil || got != c.in) || !c.ok && err == nil {
			t.Errorf("%s (int32 %v): %s, %v", c.in, c.i32, got, err)
		}
	}
	for in, want := range map[string]float64{"9.5": 9.5, "-0.5": -0.5, "0": 0} {
		var v float64
		if err := newLexer(strings.NewReader(in), 64).f64(&v); err != nil || v != want {
			t.Errorf("f64(%s) = %v, %v", in, v, err)
		}
	}
}

// TestTimeFastPathEdges: a fraction running to the end of the string (no
// zone) is not the fast path's form.
func TestTimeFastPathEdges(t *testing.T) {
	if _, ok := parseTimeFast([]byte("2026-07-21T12:34:56.123"), map[int]*time.Location{}); ok {
		t.Fatal("a time without a zone taken by the fast path")
	}
}

// TestWithDefaultsChainDepth: a zero or negative MaxChainDepth takes the
// default and a positive one is kept, like every other cap.
func TestWithDefaultsChainDepth(t *testing.T) {
	for in, want := range map[int]int{0: DefaultMaxChainDepth, -1: DefaultMaxChainDepth, 1: 1, 7: 7} {
		if got := (Limits{MaxChainDepth: in}).WithDefaults().MaxChainDepth; got != want {
			t.Errorf("WithDefaults of MaxChainDepth %d = %d, want %d", in, got, want)
		}
	}
}

// TestTimeFallback: a time the fast path does not take (ten fraction
// digits) is parsed by time.Time.UnmarshalJSON, the authority.
func TestTimeFallback(t *testing.T) {
	in := []byte(`"2026-07-21T12:34:56.1234567891Z"`)
	if _, ok := parseTimeFast(in[1:len(in)-1], map[int]*time.Location{}); ok {
		t.Fatal("the fast path took ten fraction digits")
	}
	var want time.Time
	if err := want.UnmarshalJSON(in); err != nil {
		t.Fatal(err)
	}
	var got time.Time
	if err := newLexer(bytes.NewReader(in), 64).tm(&got, map[int]*time.Location{}); err != nil || !got.Equal(want) {
		t.Fatalf("tm(%s) = %v, %v; want %v", in, got, err, want)
	}
}

// TestValidateEdges: a version component of nine digits is read and one
// of ten refused; of chunks listed twice with the same compressed_size, the
// first entry is kept.
func TestValidateEdges(t *testing.T) {
	const key = "p/uploads/u/manifest.json"
	for v, ok := range map[string]bool{"2.123456789": true, "2.1234567890": false, "123456789.1": false} {
		m := synth(1, 2)
		m.Version = v
		_, err := Validate(m, key, DefaultLimits())
		if ok != (err == nil) || !ok && !errors.Is(err, ErrVersion) {
			t.Errorf("version %s: %v", v, err)
		}
	}
	m := synth(1, 2)
	dup := m.Chunks[0]
	dup.UploadedAt = dup.UploadedAt.Add(time.Hour)
	m.Chunks = append(m.Chunks, dup)
	first := m.Chunks[0].UploadedAt
	if _, err := Validate(m, key, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	if len(m.Chunks) != 1 || !m.Chunks[0].UploadedAt.Equal(first) {
		t.Fatalf("duplicate chunks of equal compressed_size: kept %d, uploaded_at %v; want the first (%v)", len(m.Chunks), m.Chunks[0].UploadedAt, first)
	}
}

// TestValidateLimitsExact: a path of exactly MaxPathBytes is accepted and a
// NUL is refused wherever it is, the first byte included; sizes add up to
// exactly MaxInt64 and no further; a chunk's uncompressed_size may be 0;
// a frameless chunk with an unusable checksum is reported as unverifiable.
func TestValidateLimitsExact(t *testing.T) {
	lim := Limits{MaxPathBytes: 8}.WithDefaults()
	for p, ok := range map[string]bool{"12345678": true, "123456789": false, "\x00abc": false, "ab\x00": false} {
		if err := checkPath(p, lim); ok != (err == nil) {
			t.Errorf("checkPath(%q): %v", p, err)
		}
	}
	if s, ok := addOK(math.MaxInt64-1, 1); !ok || s != math.MaxInt64 {
		t.Errorf("addOK(MaxInt64-1, 1) = %d, %v", s, ok)
	}
	if _, ok := addOK(math.MaxInt64-1, 2); ok {
		t.Error("addOK(MaxInt64-1, 2) did not report the overflow")
	}
	const key = "p/uploads/u/manifest.json"
	m := synth(1, 2)
	m.Chunks[0].Frames, m.Chunks[0].Checksum = nil, "not-a-checksum"
	for i := range m.Files {
		m.Files[i].ArchiveOffset = nil
	}
	warnings, err := Validate(m, key, DefaultLimits())
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "cannot be verified") || strings.Contains(warnings[0], "more like it") {
		t.Fatalf("frameless chunk with a bad checksum: %q, %v", warnings, err)
	}
	m = synth(1, 2)
	m.Chunks[0].UncompressedSize = 0
	if _, err := Validate(m, key, DefaultLimits()); err != nil {
		t.Fatalf("uncompressed_size 0: %v", err)
	}
}

// TestTruncatedInsideNumber: a document that ends inside a number is
// refused with an error (the input is cut short), never a panic.
func TestTruncatedInsideNumber(t *testing.T) {
	for _, doc := range []string{`{"files":[{"size":12`, `{"total_files":-3`, `{"compression_ratio":0.5`} {
		if _, err := Parse([]byte(doc), "p/uploads/u/manifest.json", DefaultLimits()); err == nil {
			t.Errorf("%s: no error", doc)
		}
	}
}
