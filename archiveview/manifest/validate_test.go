package manifest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func i64(v int64) *int64 { return &v }

// TestValidateRejects pins, one case each, the ways a manifest can lie.
// Every case runs through Validate on the struct and through Parse on the
// writer-shaped JSON; both must fail with the sentinel and a message naming
// the key and the entry.
func TestValidateRejects(t *testing.T) {
	const key = "backups/uploads/u1/manifest.json.gz"
	tests := []struct {
		name    string
		mutate  func(m *Manifest)
		lim     Limits
		want    error
		wantMsg string
	}{
		{"overlapping compressed spans, in order", func(m *Manifest) {
			m.Chunks[0].Frames[1].CompressedOffset = 50
		}, Limits{}, ErrInvalid, "overlap"},
		{"overlapping compressed spans, reverse order", func(m *Manifest) {
			m.Chunks[0].Frames[0].CompressedOffset = 200 // [200,300)
			m.Chunks[0].Frames[1].CompressedOffset = 0   // [0,200)
			m.Chunks[0].Frames[1].CompressedSize = 250   // [0,250) covers 200..250
		}, Limits{}, ErrInvalid, "overlap"},
		{"frame pointing at another frame's bytes", func(m *Manifest) {
			m.Chunks[0].Frames[1].CompressedOffset = 0
			m.Chunks[0].Frames[1].CompressedSize = 100
		}, Limits{}, ErrInvalid, "overlap"},
		// CheckFrames is the one frame-table rule: frames ending past a
		// known compressed_size are an error here, as in the resolver and
		// the index loader (Validate once only warned).
		{"frames past compressed_size", func(m *Manifest) {
			m.Chunks[0].CompressedSize = 250
		}, Limits{}, ErrInvalid, "past compressed_size 250"},
		{"uncompressed spans with a gap", func(m *Manifest) {
			m.Chunks[0].Frames[1].UncompressedOffset++
		}, Limits{}, ErrInvalid, "contiguous"},
		{"uncompressed spans overlapping", func(m *Manifest) {
			m.Chunks[0].Frames[1].UncompressedOffset--
		}, Limits{}, ErrInvalid, "contiguous"},
		{"uncompressed spans not from 0", func(m *Manifest) {
			for i := range m.Chunks[0].Frames {
				m.Chunks[0].Frames[i].UncompressedOffset += 512
			}
		}, Limits{}, ErrInvalid, "contiguous"},
		{"uncompressed spans out of order", func(m *Manifest) {
			fr := m.Chunks[0].Frames
			fr[0], fr[1] = fr[1], fr[0]
		}, Limits{}, ErrInvalid, "contiguous"},
		{"zero compressed frame size", func(m *Manifest) {
			m.Chunks[1].Frames[0].CompressedSize = 0
		}, Limits{}, ErrInvalid, "non-positive size"},
		{"negative uncompressed frame size", func(m *Manifest) {
			m.Chunks[1].Frames[1].UncompressedSize = -1
		}, Limits{}, ErrInvalid, "non-positive size"},
		{"negative frame offset", func(m *Manifest) {
			m.Chunks[0].Frames[0].CompressedOffset = -100
		}, Limits{}, ErrInvalid, "negative offset"},
		{"frame span overflows int64", func(m *Manifest) {
			m.Chunks[0].Frames[1].CompressedOffset = 1<<63 - 10
		}, Limits{}, ErrInvalid, "overflows"},
		{"malformed frame checksum", func(m *Manifest) {
			m.Chunks[0].Frames[1].Checksum = "abc"
		}, Limits{}, ErrInvalid, "frame 1"},
		{"negative chunk size", func(m *Manifest) {
			m.Chunks[0].UncompressedSize = -5
		}, Limits{}, ErrInvalid, "negative size"},
		{"chunk without key", func(m *Manifest) {
			m.Chunks[1].S3Key = ""
		}, Limits{}, ErrInvalid, "empty s3_key"},
		{"negative file size", func(m *Manifest) {
			m.Files[2].Size = -1
		}, Limits{}, ErrInvalid, "negative size"},
		{"negative part length", func(m *Manifest) {
			m.Files[2].Length = -1
		}, Limits{}, ErrInvalid, "negative size"},
		{"split part index past total", func(m *Manifest) {
			m.Files[0].TotalParts, m.Files[0].PartIndex = 3, 3
		}, Limits{}, ErrInvalid, "out of range"},
		{"split part index negative", func(m *Manifest) {
			m.Files[0].TotalParts, m.Files[0].PartIndex = 3, -1
		}, Limits{}, ErrInvalid, "negative part_index"},
		{"split part past file end", func(m *Manifest) {
			f := &m.Files[0]
			f.TotalParts, f.PartIndex, f.Offset, f.Length = 2, 1, 600, 401
		}, Limits{}, ErrInvalid, "exceeds file size"},
		{"split part offset+length overflows", func(m *Manifest) {
			f := &m.Files[0]
			f.TotalParts, f.PartIndex, f.Offset, f.Length = 2, 1, 1<<62, 1<<62+1<<61+1<<60
		}, Limits{}, ErrInvalid, "exceeds file size"},
		{"NUL in path", func(m *Manifest) {
			m.Files[1].Path = "/data/src/a\x00b"
		}, Limits{}, ErrInvalid, "NUL"},
		{"empty path", func(m *Manifest) {
			m.Files[1].Path = ""
		}, Limits{}, ErrInvalid, "empty path"},
		{"path too long", func(m *Manifest) {
			m.Files[1].Path = "/data/src/" + strings.Repeat("a", 100)
		}, Limits{MaxPathBytes: 100}, ErrInvalid, "exceeds limit"},
		{"archive_offset zero", func(m *Manifest) {
			m.Files[0].ArchiveOffset = i64(0)
		}, Limits{}, ErrInvalid, "archive_offset 0"},
		{"archive_offset negative", func(m *Manifest) {
			m.Files[0].ArchiveOffset = i64(-512)
		}, Limits{}, ErrInvalid, "archive_offset -512"},
		{"archive_offset past the frames' end", func(m *Manifest) {
			m.Files[2].ArchiveOffset = i64(5632 - 1001)
		}, Limits{}, ErrInvalid, "runs past"},
		{"split part archive_offset past the frames' end", func(m *Manifest) {
			f := &m.Files[2]
			f.Size, f.TotalParts, f.PartIndex, f.Offset, f.Length = 5000, 2, 1, 1000, 4000
		}, Limits{}, ErrInvalid, "runs past"},
		{"NUL in deleted_paths", func(m *Manifest) {
			m.DeletedPaths = []string{"/data/src/ok", "/data/src/x\x00"}
		}, Limits{}, ErrInvalid, "deleted_paths[1]"},
		{"too many files", func(m *Manifest) {}, Limits{MaxFiles: 5}, ErrTooLarge, "files"},
		{"too many chunks", func(m *Manifest) {}, Limits{MaxChunks: 1}, ErrTooLarge, "chunks"},
		{"too many frames", func(m *Manifest) {}, Limits{MaxFrames: 3}, ErrTooLarge, "frames"},
		{"version 3", func(m *Manifest) { m.Version = "3.0" }, Limits{}, ErrVersion, "3.0"},
		{"version garbage", func(m *Manifest) { m.Version = "v2.1" }, Limits{}, ErrVersion, "v2.1"},
		{"version missing", func(m *Manifest) { m.Version = "" }, Limits{}, ErrVersion, "version"},
		{"version 0", func(m *Manifest) { m.Version = "0.9" }, Limits{}, ErrVersion, "0.9"},
		{"version trailing dot", func(m *Manifest) { m.Version = "2." }, Limits{}, ErrVersion, "2."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := synth(2, 3)
			tt.mutate(m)
			data := encode(t, m, true)
			_, err := Validate(m, key, tt.lim)
			checkErr(t, "Validate", err, tt.want, key, tt.wantMsg)
			_, err = Parse(data, key, tt.lim)
			checkErr(t, "Parse", err, tt.want, key, tt.wantMsg)
		})
	}
}

func checkErr(t *testing.T, what string, err, want error, key, msg string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
	var me *Error
	if !errors.As(err, &me) || me.Key != key {
		t.Fatalf("%s: %v is not an *Error naming %q", what, err, key)
	}
	if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("%s: message %q lacks %q or %q", what, err, key, msg)
	}
}

// TestValidateAccepts pins what the writer legitimately varies: none of
// these may fail, and the clean ones may not even warn.
func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(m *Manifest)
		wantWarn string // "" = no warnings at all
	}{
		{"writer shape", func(m *Manifest) {}, ""},
		{"frames absent", func(m *Manifest) { m.Chunks[0].Frames = nil }, ""},
		{"one frame", func(m *Manifest) {
			c := &m.Chunks[0]
			c.Frames = []FrameEntry{{CompressedOffset: 0, CompressedSize: 300, UncompressedOffset: 0, UncompressedSize: 5632}}
		}, ""},
		{"compressed gap (skippable frame)", func(m *Manifest) {
			m.Chunks[0].Frames[1].CompressedOffset = 120
			m.Chunks[0].CompressedSize = 320
		}, ""},
		{"compressed order differs from uncompressed order", func(m *Manifest) {
			m.Chunks[0].Frames[0].CompressedOffset = 200
			m.Chunks[0].Frames[1].CompressedOffset = 0
		}, ""},
		{"sha256: prefixed frame checksum", func(m *Manifest) {
			m.Chunks[0].Frames[0].Checksum = "sha256:" + strings.ToUpper(m.Chunks[0].Frames[0].Checksum)
		}, ""},
		{"empty frame checksums", func(m *Manifest) { m.Chunks[0].Frames[0].Checksum = "" }, ""},
		{"checksum_algorithm absent", func(m *Manifest) { m.ChecksumAlgorithm = "" }, ""},
		{"archive_offset absent", func(m *Manifest) { m.Files[0].ArchiveOffset = nil }, ""},
		{"archive_offset at the exact end", func(m *Manifest) { m.Files[2].ArchiveOffset = i64(5632 - 1002) }, ""},
		{"split parts in range", func(m *Manifest) {
			f := &m.Files[0]
			f.Size, f.TotalParts, f.PartIndex, f.Offset, f.Length = 3000, 3, 2, 2000, 1000
		}, ""},
		{"total_parts 1 means not split", func(m *Manifest) { m.Files[0].TotalParts = 1 }, ""},
		{"version 1.0", func(m *Manifest) { m.Version = "1.0" }, ""},
		{"version 2.0", func(m *Manifest) { m.Version = "2.0" }, ""},
		{"direct upload (no chunks)", func(m *Manifest) {
			m.Chunks, m.TotalChunks = nil, 0
			for i := range m.Files {
				m.Files[i].ArchiveOffset = nil
				m.Files[i].S3Key = "backups/uploads/u1/direct/file"
			}
		}, ""},
		{"unknown minor version", func(m *Manifest) { m.Version = "2.7" }, "unknown minor"},
		{"1.x minor", func(m *Manifest) { m.Version = "1.5" }, "unknown minor"},
		{"unknown format feature", func(m *Manifest) { m.FormatFeatures = []string{"frames", "hyperdrive"} }, "hyperdrive"},
		{"total_files disagrees", func(m *Manifest) { m.TotalFiles = 99 }, "total_files 99"},
		{"total_chunks disagrees", func(m *Manifest) { m.TotalChunks = 7 }, "total_chunks 7"},
		{"compressed_size zero (estimate)", func(m *Manifest) { m.Chunks[0].CompressedSize = 0 }, "compressed_size 0"},
		{"placeholder chunk checksum on a framed chunk", func(m *Manifest) { m.Chunks[0].Checksum = "abc" }, "ignored"},
		{"placeholder file checksum", func(m *Manifest) { m.Files[0].Checksum = "sha256:..." }, "cannot be verified"},
		{"unknown checksum algorithm", func(m *Manifest) { m.ChecksumAlgorithm = "blake3" }, "blake3"},
		{"path mangled by the writer's JSON encoder", func(m *Manifest) { m.Files[0].Path = "/data/src/caf\ufffd.txt" }, "U+FFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := synth(2, 3)
			tt.mutate(m)
			for _, via := range []string{"Validate", "Parse"} {
				var warns []string
				var err error
				if via == "Validate" {
					warns, err = Validate(m, "k", Limits{})
				} else {
					var pm *Manifest
					pm, err = Parse(encode(t, m, false), "k", Limits{})
					if err == nil {
						warns = pm.Warnings
					}
				}
				if err != nil {
					t.Fatalf("%s: %v", via, err)
				}
				joined := strings.Join(warns, "\n")
				if tt.wantWarn == "" && len(warns) > 0 || !strings.Contains(joined, tt.wantWarn) {
					t.Fatalf("%s: warnings %q, want one containing %q", via, warns, tt.wantWarn)
				}
			}
		})
	}
}

func TestValidateDuplicateChunkKeys(t *testing.T) {
	m := synth(2, 3)
	staging := m.Chunks[0]
	staging.CompressedSize = 100
	staging.Frames = []FrameEntry{{CompressedSize: 100, UncompressedSize: 1}} // a snapshot taken mid-write
	final := m.Chunks[0]
	m.Chunks = []ChunkEntry{staging, m.Chunks[1], final}
	m.TotalChunks = 2
	warns, err := Validate(m, "k", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Chunks) != 2 || m.Chunks[0].CompressedSize != 300 || len(m.Chunks[0].Frames) != 2 || m.Chunks[1].S3Key == m.Chunks[0].S3Key {
		t.Fatalf("dedupe kept %+v", m.Chunks)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "more than once") {
		t.Fatalf("warnings %q", warns)
	}
	if !slicesEqual(m.Warnings, warns) {
		t.Fatal("m.Warnings not set")
	}
}

func slicesEqual(a, b []string) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestWarningsAggregate: a million bad entries make one line, not a million.
func TestWarningsAggregate(t *testing.T) {
	m := synth(1, 50)
	for i := range m.Files {
		m.Files[i].Checksum = "placeholder"
	}
	warns, err := Validate(m, "k", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "and 49 more") {
		t.Fatalf("warnings %q", warns)
	}
}
