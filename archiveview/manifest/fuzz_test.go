package manifest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: Load must never panic; every failure is an *Error naming the
// key and wrapping a sentinel; whatever it accepts (a) Validate accepts
// again, (b) survives a JSON round trip unchanged, and (c) encoding/json
// decodes identically (the hand decoder never accepts what the reference
// rejects, nor reads it differently); and (d) Stream agrees with Load: the
// same verdict and kind, the same entries and warnings.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(gzipBytes(f, data))
	}
	f.Add(encode(f, synth(2, 3), false))
	f.Add(encode(f, synth(1, 2), true))
	for _, s := range []string{
		`{}`, `{"version":"2.1","files":null,"chunks":null}`,
		`{"version":"2.1","files":[{"path":"a","size":1,"s3_key":"k","archive_offset":512}],"chunks":[{"s3_key":"k","frames":[{"compressed_size":1,"uncompressed_size":1024}]}]}`,
		`{"encrypted_data":"x","binding_version":1}`,
		`{"VERSION":"2.1","Files":[{"PATH":"\u00e9\ud800","mod_time":"2026-07-21T12:34:56.5-07:00"}]}`,
		`{"version":"2.1","files":[{"path":"a","total_parts":2,"part_index":1,"offset":1,"length":1,"size":2}]}`,
		`{"version":"2.1","chunks":[{"s3_key":"k","frames":[{"compressed_offset":5,"compressed_size":5,"uncompressed_size":1},{"compressed_offset":0,"compressed_size":6,"uncompressed_offset":1,"uncompressed_size":1}]}]}`,
	} {
		f.Add([]byte(s))
	}
	const key = "fuzz/uploads/u/manifest.json.gz"
	lim := Limits{MaxStoredBytes: 1 << 20, MaxJSONBytes: 4 << 20, MaxFiles: 1000, MaxChunks: 100, MaxFrames: 1000}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStreamAgrees(t, data, key, lim, len(data)%2 == 0)
		m, err := Parse(data, key, lim)
		if err != nil {
			var me *Error
			if !errors.As(err, &me) || me.Key != key {
				t.Fatalf("error %v is not an *Error naming the key", err)
			}
			n := 0
			for _, s := range []error{ErrInvalid, ErrTooLarge, ErrEncrypted, ErrVersion} {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("error %v wraps %d sentinels", err, n)
			}
		} else {
			if _, err := Validate(m, key, lim); err != nil {
				t.Fatalf("Load accepted what Validate rejects: %v", err)
			}
			js, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("accepted manifest does not marshal: %v", err)
			}
			m2, err := Parse(js, key, lim)
			if err != nil {
				t.Fatalf("round trip rejected: %v", err)
			}
			// omitempty folds empty into absent, so compare encodings.
			if js2, _ := json.Marshal(m2); !bytes.Equal(js, js2) {
				t.Fatalf("round trip changed the manifest\n %s\n %s", js, js2)
			}
		}

		// Differential check of the JSON decoder against encoding/json.
		js := data
		if len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				return
			}
			js, err = io.ReadAll(io.LimitReader(zr, 4<<20))
			if err != nil {
				return
			}
		}
		ours, oursErr := decode(bytes.NewReader(js), key, lim, 64)
		if oursErr != nil {
			return
		}
		ref := &Manifest{}
		if err := json.Unmarshal(js, ref); err != nil {
			t.Fatalf("decoder accepted what encoding/json rejects: %v", err)
		}
		if !sameManifest(ours, ref) {
			g, _ := json.Marshal(ours)
			r, _ := json.Marshal(ref)
			t.Fatalf("decoder differs from encoding/json\n ours %s\n ref  %s", g, r)
		}
	})
}
