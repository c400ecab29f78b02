package manifest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func TestFixturesParse(t *testing.T) {
	tests := []struct {
		file, version string
		files, chunks int
		frames        int
	}{
		{"v1.0.json", "1.0", 1, 1, 0},
		{"v2.0.json", "2.0", 1, 1, 0},
		{"v2.1.json", "2.1", 2, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, gz := range []bool{false, true} {
				in := data
				if gz {
					in = gzipBytes(t, data)
				}
				m, err := Parse(in, "backups/uploads/x/manifest.json.gz", Limits{})
				if err != nil {
					t.Fatalf("gz=%v: %v", gz, err)
				}
				if m.Version != tt.version || len(m.Files) != tt.files || len(m.Chunks) != tt.chunks || len(m.Chunks[0].Frames) != tt.frames {
					t.Fatalf("gz=%v: got version %q, %d files, %d chunks, %d frames", gz, m.Version, len(m.Files), len(m.Chunks), len(m.Chunks[0].Frames))
				}
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	valid := encode(t, synth(2, 3), false)
	wrapper := []byte(`{"algorithm":"AES-256-GCM","kms_key_id":"arn:aws:kms:us-east-1:1:key/x","encrypted_dek":"ZGVr","iv":"aXY=","encrypted_data":"H4sI","binding_version":1}`)
	var spaces bytes.Buffer
	spaces.WriteString(`{"version":"2.1",`)
	spaces.Write(bytes.Repeat([]byte(" "), 8<<20))
	spaces.WriteString(`"files":[]}`)
	corrupt := gzipBytes(t, valid)
	corrupt[len(corrupt)-6] ^= 0xff // CRC32 in the gzip trailer
	truncated := gzipBytes(t, valid)
	truncated = truncated[:len(truncated)/2]

	tests := []struct {
		name    string
		key     string
		data    []byte
		lim     Limits
		want    error
		wantMsg string
	}{
		{"stored object too large", "p/uploads/u/manifest.json", valid, Limits{MaxStoredBytes: int64(len(valid) - 1)}, ErrTooLarge, "stored manifest object exceeds"},
		{"stored object exactly at the cap", "p/uploads/u/manifest.json", valid, Limits{MaxStoredBytes: int64(len(valid))}, nil, ""},
		{"gzip bomb beyond the JSON cap", "p/uploads/u/manifest.json.gz", gzipBytes(t, spaces.Bytes()), Limits{MaxJSONBytes: 1 << 20}, ErrTooLarge, "manifest JSON exceeds"},
		{"plain JSON beyond the JSON cap", "p/uploads/u/manifest.json", valid, Limits{MaxJSONBytes: 1000}, ErrTooLarge, "manifest JSON exceeds"},
		{"encrypted by name", "p/uploads/u/manifest.encrypted.json.gz", gzipBytes(t, wrapper), Limits{}, ErrEncrypted, "KMS-encrypted manifest (AES-256-GCM envelope, binding_version 1) not supported"},
		{"encrypted by name, plain", "p/uploads/u/manifest.encrypted.json", wrapper, Limits{}, ErrEncrypted, "binding_version 1"},
		{"encrypted by name, unreadable wrapper", "p/uploads/u/manifest.encrypted.json", []byte("\x00\x01"), Limits{}, ErrEncrypted, "binding_version unknown"},
		{"encrypted by name, broken gzip", "p/uploads/u/manifest.encrypted.json.gz", []byte("\x1f\x8b\x00"), Limits{}, ErrEncrypted, "binding_version unknown"},
		{"encrypted by content", "p/uploads/u/manifest.json.gz", gzipBytes(t, wrapper), Limits{}, ErrEncrypted, "KMS-encrypted manifest (AES-256-GCM envelope, binding_version 1) not supported"},
		{"encrypted by content, dek only", "p/uploads/u/manifest.json", []byte(`{"encrypted_dek":"x","binding_version":2}`), Limits{}, ErrEncrypted, "binding_version 2"},
		{"gzip CRC mismatch", "p/uploads/u/manifest.json.gz", corrupt, Limits{}, ErrInvalid, "corrupt"},
		{"gzip truncated", "p/uploads/u/manifest.json.gz", truncated, Limits{}, ErrInvalid, "truncated"},
		{"plain truncated", "p/uploads/u/manifest.json", valid[:len(valid)/2], Limits{}, ErrInvalid, "truncated"},
		{"empty object", "p/uploads/u/manifest.json", nil, Limits{}, ErrInvalid, "truncated"},
		{"not JSON", "p/uploads/u/manifest.json", []byte("<Error><Code>AccessDenied</Code></Error>"), Limits{}, ErrInvalid, "JSON"},
		{"trailing data", "p/uploads/u/manifest.json", append(append([]byte{}, valid...), "{}"...), Limits{}, ErrInvalid, "after top-level value"},
		{"too many files", "p/uploads/u/manifest.json", valid, Limits{MaxFiles: 5}, ErrTooLarge, "more than 5 files"},
		{"too many chunks", "p/uploads/u/manifest.json", valid, Limits{MaxChunks: 1}, ErrTooLarge, "more than 1 chunks"},
		{"too many frames", "p/uploads/u/manifest.json", valid, Limits{MaxFrames: 3}, ErrTooLarge, "more than 3 frames"},
		{"unknown major version", "p/uploads/u/manifest.json", bytes.Replace(valid, []byte(`"version": "2.1"`), []byte(`"version": "3.0"`), 1), Limits{}, ErrVersion, "3.0"},
		{"wrong type names the entry", "p/uploads/u/manifest.json", bytes.Replace(valid, []byte(`"size": 1001`), []byte(`"size": "1001"`), 1), Limits{}, ErrInvalid, "files[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse(tt.data, tt.key, tt.lim)
			if tt.want == nil {
				if err != nil || m == nil {
					t.Fatalf("got %v", err)
				}
				return
			}
			checkErr(t, "Parse", err, tt.want, tt.key, tt.wantMsg)
		})
	}
}

// TestLoadReadError: a failing reader (network, context) surfaces as that
// error, named by key, and is not mistaken for bad content.
func TestLoadReadError(t *testing.T) {
	boom := errors.New("connection reset")
	valid := encode(t, synth(1, 3), true)
	r := io.MultiReader(bytes.NewReader(valid[:len(valid)/2]), iotest.ErrReader(boom))
	_, err := Load(r, "p/uploads/u/manifest.json.gz", Limits{})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "p/uploads/u/manifest.json.gz") {
		t.Fatalf("got %v", err)
	}
	for _, s := range []error{ErrInvalid, ErrTooLarge, ErrEncrypted, ErrVersion} {
		if errors.Is(err, s) {
			t.Fatalf("read failure classified as %v", s)
		}
	}
	_, err = Load(iotest.ErrReader(context.Canceled), "k", Limits{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// endless yields head, then elem forever: a hostile manifest of unbounded
// size. It counts what was read.
type endless struct {
	head, elem []byte
	pos        int
	n          int64
}

func (e *endless) Read(p []byte) (int, error) {
	w := 0
	for w < len(p) {
		var src []byte
		if e.pos < len(e.head) {
			src = e.head[e.pos:]
		} else {
			k := (e.pos - len(e.head)) % len(e.elem)
			src = e.elem[k:]
		}
		c := copy(p[w:], src)
		w += c
		e.pos += c
		if e.pos > 1<<40 {
			e.pos = len(e.head)
		}
	}
	e.n += int64(w)
	return w, nil
}

// TestLoadFailsFast: hostile input stops at the cap or at the first bad
// entry, having read (and allocated for) only a bounded prefix.
func TestLoadFailsFast(t *testing.T) {
	tests := []struct {
		name       string
		head, elem string
		lim        Limits
		want       error
		maxRead    int64
	}{
		{"10^8 tiny empty entries stop at the first", `{"version":"2.1","files":[`, `{},`, Limits{}, ErrInvalid, 1 << 20},
		{"endless valid entries stop at the file cap", `{"version":"2.1","files":[`, `{"path":"a","size":1},`, Limits{MaxFiles: 1000}, ErrTooLarge, 1 << 20},
		{"endless frames stop at the frame cap", `{"version":"2.1","chunks":[{"s3_key":"k","frames":[`, `{"compressed_size":1},`, Limits{MaxFrames: 1000}, ErrTooLarge, 1 << 20},
		{"endless deleted_paths stop at the cap", `{"version":"2.1","deleted_paths":[`, `"x",`, Limits{MaxFiles: 1000}, ErrTooLarge, 1 << 20},
		{"endless whitespace stops at the JSON cap", `{"version":"2.1",`, ` `, Limits{MaxJSONBytes: 4 << 20}, ErrTooLarge, 5 << 20},
		{"endless string stops at the token cap", `{"version":"`, `a`, Limits{}, ErrTooLarge, maxTokenBytes + lexBufSize},
		{"deep nesting stops at the depth cap", `{"x":`, `[`, Limits{}, ErrInvalid, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &endless{head: []byte(tt.head), elem: []byte(tt.elem)}
			_, err := Load(r, "hostile/manifest.json", tt.lim)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if r.n > tt.maxRead {
				t.Fatalf("read %d bytes before failing, want <= %d", r.n, tt.maxRead)
			}
		})
	}
}

// TestEncryptedLargeWrapper: the wrapper's base64 payload is streamed past,
// not buffered, on the way to binding_version.
func TestEncryptedLargeWrapper(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"encrypted_data":"`)
	b.Write(bytes.Repeat([]byte("QUJD"), 4<<20)) // 16 MiB of base64
	b.WriteString(`","algorithm":"AES-256-GCM","binding_version":3,"encrypted_dek":"x"}`)
	for _, key := range []string{"p/uploads/u/manifest.encrypted.json", "p/uploads/u/manifest.json"} {
		_, err := Parse(b.Bytes(), key, Limits{})
		if !errors.Is(err, ErrEncrypted) || !strings.Contains(err.Error(), "(AES-256-GCM envelope, binding_version 3) not supported") {
			t.Errorf("%s: got %v", key, err)
		}
	}
}
