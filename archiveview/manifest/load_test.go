package manifest

import (
	"os"
	"path/filepath"
	"testing"
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
