package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decodeBoth decodes data with our streaming decoder and with
// encoding/json (the reference semantics).
func decodeBoth(t testing.TB, data []byte) (ours, ref *Manifest, oursErr, refErr error) {
	t.Helper()
	ours, oursErr = decode(bytes.NewReader(data), "k", DefaultLimits(), 64)
	ref = &Manifest{}
	refErr = json.Unmarshal(data, ref)
	return
}

// fill sets every field reachable from v to a non-zero value derived from
// seed, so a field added to types.go that the decoder does not handle makes
// TestDecodeEveryField fail.
func fill(v reflect.Value, seed *int) {
	*seed++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d-é\u2028\"\\", *seed))
	case reflect.Int, reflect.Int32, reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(int64(*seed))
			return
		}
		v.SetInt(int64(*seed))
	case reflect.Float64:
		v.SetFloat(float64(*seed) + 0.25)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(s.Index(i), seed)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := 0; i < 2; i++ {
			k := reflect.New(v.Type().Key()).Elem()
			fill(k, seed)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, seed)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			loc := time.FixedZone("", (*seed%24-12)*3600)
			v.Set(reflect.ValueOf(time.Date(2000+*seed%100, time.Month(1+*seed%12), 1+*seed%28, *seed%24, *seed%60, *seed%60, *seed*1000+7, loc)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() && v.Type().Field(i).Tag.Get("json") != "-" {
				fill(v.Field(i), seed)
			}
		}
	default:
		panic("fill: unhandled kind " + v.Kind().String())
	}
}

// sameManifest compares two decoded manifests, times by instant and offset
// (each decode makes its own *time.Location for a fixed offset).
func sameManifest(a, b *Manifest) bool {
	opts := func(m *Manifest) []byte {
		js, err := json.Marshal(m)
		if err != nil {
			panic(err)
		}
		return js
	}
	return bytes.Equal(opts(a), opts(b)) && reflect.DeepEqual(normalize(a), normalize(b))
}

// normalize clears what json.Marshal already compared exactly (times) so
// DeepEqual checks nil-vs-empty slices and maps and pointer presence.
func normalize(m *Manifest) *Manifest {
	c := *m
	c.CreatedAt, c.CompletedAt = time.Time{}, time.Time{}
	c.Files = append([]FileEntry(nil), m.Files...)
	for i := range c.Files {
		c.Files[i].ModTime = time.Time{}
	}
	if m.Files != nil && c.Files == nil {
		c.Files = []FileEntry{}
	}
	c.Chunks = append([]ChunkEntry(nil), m.Chunks...)
	for i := range c.Chunks {
		c.Chunks[i].CreatedAt, c.Chunks[i].UploadedAt = time.Time{}, time.Time{}
	}
	if m.Chunks != nil && c.Chunks == nil {
		c.Chunks = []ChunkEntry{}
	}
	return &c
}

func TestDecodeEveryField(t *testing.T) {
	var want Manifest
	seed := 0
	fill(reflect.ValueOf(&want).Elem(), &seed)
	for i := range want.Files { // decode checks each file as it arrives
		f := &want.Files[i]
		f.TotalParts = f.PartIndex + 1
		f.Size = f.Offset + f.Length
	}
	for _, indent := range []bool{false, true} {
		var data []byte
		var err error
		if indent {
			data, err = json.MarshalIndent(&want, "", "  ")
		} else {
			data, err = json.Marshal(&want)
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := decode(bytes.NewReader(data), "k", DefaultLimits(), 64)
		if err != nil {
			t.Fatal(err)
		}
		ref := &Manifest{}
		if err := json.Unmarshal(data, ref); err != nil {
			t.Fatal(err)
		}
		if !sameManifest(got, ref) {
			g, _ := json.Marshal(got)
			r, _ := json.Marshal(ref)
			t.Fatalf("decode differs from encoding/json\n ours %s\n ref  %s", g, r)
		}
		if !sameManifest(got, &want) {
			t.Fatalf("decode does not round-trip the filled manifest")
		}
	}
}

// TestDecodeMatchesEncodingJSON pins the corners where a hand decoder could
// drift from encoding/json: nulls, case-insensitive names, escapes, invalid
// UTF-8, unknown members, number forms.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	tests := []struct {
		name, doc string
		wantErr   bool // both must fail
	}{
		{"empty object", `{}`, false},
		{"null arrays", `{"files":null,"chunks":null,"shards":null,"deleted_paths":null,"format_features":null}`, false},
		{"empty arrays", `{"files":[],"chunks":[],"shards":[]}`, false},
		{"null scalars", `{"version":null,"total_files":null,"created_at":null,"compression_ratio":null,"encryption":null,"deduplication":null}`, false},
		{"case-insensitive names", `{"VERSION":"2.1","Files":[{"PATH":"a","Size":3,"S3_Key":"k","Archive_Offset":512}],"chunks":[{"S3_KEY":"k","Frames":[{"Compressed_Size":1}]}]}`, false},
		{"unicode fold", "{\"\u017Fource_path\":\"x\"}", false},
		{"unknown members skipped", `{"x":{"a":[1,2,{"b":null}],"c":"\u00e9"},"files":[{"path":"a","zz":[true,false]}],"version_info":{"v":1}}`, false},
		{"escapes", `{"source_path":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"}`, false},
		{"lone surrogate", `{"source_path":"a\ud800b\udc00c\ud800\u0041"}`, false},
		{"invalid utf8", "{\"source_path\":\"a\xffb\xc3\"}", false},
		{"metadata map", `{"files":[{"path":"a","metadata":{"k":"v","n":null,"k":"w"}}]}`, false},
		{"archive_offset null", `{"files":[{"path":"a","archive_offset":null}]}`, false},
		{"negative zero and exponent float", `{"total_files":-0,"compression_ratio":1.5e-3}`, false},
		{"times", `{"created_at":"2026-07-21T12:34:56.123456789-07:00","completed_at":"0001-01-01T00:00:00Z","files":[{"path":"a","mod_time":"2023-11-14T22:13:20+05:30"}]}`, false},
		{"float into int", `{"total_files":1.5}`, true},
		{"exponent into int", `{"total_files":1e3}`, true},
		{"int overflow", `{"total_files":9223372036854775808}`, true},
		{"int32 overflow", `{"files":[{"path":"a","deduplication_refs":2147483648}]}`, true},
		{"string into int", `{"total_files":"1"}`, true},
		{"number into string", `{"version":2.1}`, true},
		{"bad time", `{"created_at":"yesterday"}`, true},
		{"bad escape", `{"version":"\x"}`, true},
		{"control char", "{\"version\":\"a\x01\"}", true},
		{"trailing comma", `{"version":"2.1",}`, true},
		{"trailing data", `{} {}`, true},
		{"trailing NUL", "{}\x00", true},
		{"NUL in place of a value", "{\"version\":\x00}", true},
		{"leading zero", `{"total_files":01}`, true},
		{"truncated", `{"files":[{"path":"a"`, true},
		{"not an object", `[]`, true},
		{"files not array", `{"files":{}}`, true},
		{"bad literal", `{"files":[{"path":"a","is_duplicate":tru}]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours, ref, oursErr, refErr := decodeBoth(t, []byte(tt.doc))
			if tt.wantErr {
				if oursErr == nil {
					t.Errorf("ours accepted it (encoding/json: %v)", refErr)
				}
				return
			}
			if refErr != nil {
				t.Fatalf("reference rejects the test document: %v", refErr)
			}
			if oursErr != nil {
				t.Fatalf("ours rejects: %v", oursErr)
			}
			if !sameManifest(ours, ref) {
				g, _ := json.Marshal(ours)
				r, _ := json.Marshal(ref)
				t.Fatalf("differs\n ours %s\n ref  %s", g, r)
			}
		})
	}
}

func TestDecodeRejectsRepeatedMember(t *testing.T) {
	for _, doc := range []string{
		`{"files":[],"files":[]}`,
		`{"files":[],"FILES":[]}`,
		`{"files":[{"path":"a","path":"b"}]}`,
		`{"chunks":[{"s3_key":"a","frames":[],"frames":[]}]}`,
	} {
		_, err := decode(strings.NewReader(doc), "k", DefaultLimits(), 64)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "repeated") {
			t.Errorf("%s: got %v, want a repeated-member ErrInvalid", doc, err)
		}
	}
}

// TestDecodeSmallBuffers decodes through a reader that returns one byte at
// a time, so every token crosses a buffer refill.
func TestDecodeSmallBuffers(t *testing.T) {
	data := encode(t, synth(3, 4), false)
	want, err := decode(bytes.NewReader(data), "k", DefaultLimits(), 64)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode(oneByteReader{bytes.NewReader(data)}, "k", DefaultLimits(), 64)
	if err != nil {
		t.Fatal(err)
	}
	if !sameManifest(got, want) {
		t.Fatal("one-byte reads decode differently")
	}
	ref := &Manifest{}
	if err := json.Unmarshal(data, ref); err != nil {
		t.Fatal(err)
	}
	if !sameManifest(got, ref) {
		t.Fatal("differs from encoding/json")
	}
}

type oneByteReader struct{ r *bytes.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

// TestParseTimeFast checks the allocation-free time parser against
// time.Time.UnmarshalJSON on every shape it accepts and on near misses.
func TestParseTimeFast(t *testing.T) {
	for _, s := range []string{
		"2026-07-21T12:34:56Z", "2026-07-21T12:34:56.1Z", "2026-07-21T12:34:56.123456789-07:00",
		"2024-02-29T00:00:00+00:00", "2023-02-29T00:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999+23:59",
		"2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-04-31T00:00:00Z", "2026-07-21T24:00:00Z",
		"2026-07-21T12:60:00Z", "2026-07-21T12:00:60Z", "2026-07-21T12:34:56.Z", "2026-07-21T12:34:56.1234567891Z",
		"2026-07-21T12:34:56+24:00", "2026-07-21T12:34:56+05:60", "2026-07-21t12:34:56Z", "2026-07-21T12:34:56z",
		"2026-07-21T12:34:56", "2026-07-21T12:34:56+0530", "2026-07-21T12:34:56,5Z", "+2026-07-21T12:34:56Z",
		"2026-07-21T12:34:56-00:00", "2026-7-21T12:34:56Z",
	} {
		zones := map[int]*time.Location{}
		got, ok := parseTimeFast([]byte(s), zones)
		var want time.Time
		werr := want.UnmarshalJSON([]byte(`"` + s + `"`))
		if !ok {
			continue // the caller falls back to UnmarshalJSON
		}
		if werr != nil {
			t.Errorf("%s: fast path accepted what UnmarshalJSON rejects (%v)", s, werr)
			continue
		}
		_, go1 := got.Zone()
		_, wo := want.Zone()
		if !got.Equal(want) || go1 != wo || (got.Location() == time.Local) != (want.Location() == time.Local) ||
			(got.Location() == time.UTC) != (want.Location() == time.UTC) || got.Format(time.RFC3339Nano) != want.Format(time.RFC3339Nano) {
			t.Errorf("%s: fast %v (%v), UnmarshalJSON %v (%v)", s, got, got.Location(), want, want.Location())
		}
	}
}
