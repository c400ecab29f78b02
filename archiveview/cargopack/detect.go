package cargopack

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// This file reproduces CargoShip's per-file compression decision
// (pkg/pipeline/compression_detector.go, ShouldCompress): an extension skip
// list first; then, only for files with no extension, .dat/.bin/.tmp or an
// extension it does not know, a magic-byte sniff of the first 512 bytes;
// then, for such files of at least 8 MiB, a probe (#511): zstd-fastest on the
// first 1 MiB must save at least 5%. A chunk is zstd-compressed only when its
// compressible files strictly outnumber its already-compressed ones.
//
// Not reproduced: CargoShip caches decisions per extension for the life of
// the detector, so the first ".dat" file it sees decides every later ".dat"
// file. We decide per file.

// precompressedExt lists extensions CargoShip treats as already compressed.
var precompressedExt = setOf(
	".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".webp", ".heic", ".heif", ".avif", ".jp2", ".j2k",
	".mp4", ".m4v", ".m4a", ".mov", ".avi", ".mkv", ".webm", ".flv", ".wmv", ".mpg", ".mpeg", ".3gp", ".ts", ".mts",
	".mp3", ".aac", ".ogg", ".oga", ".opus", ".wma", ".flac",
	".zip", ".gz", ".gzip", ".bz2", ".bzip2", ".xz", ".7z", ".rar", ".tgz", ".tbz2", ".txz", ".zst", ".zstd", ".lz4", ".lzma",
	".pdf", ".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp", ".epub",
	".apk", ".jar", ".war", ".ipa",
	".cram", ".bam", ".bcf",
	".dmg", ".iso", ".vmdk", ".vhd", ".vhdx", ".qcow2",
)

// knownExt lists extensions whose status CargoShip knows without sniffing.
var knownExt = setOf(
	".txt", ".log", ".md", ".csv", ".tsv", ".json", ".xml", ".yaml", ".yml", ".toml", ".ini", ".conf", ".cfg", ".properties",
	".c", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".go", ".rs", ".java", ".kt", ".scala", ".js", ".ts", ".jsx", ".tsx", ".vue",
	".py", ".rb", ".php", ".pl", ".r", ".sh", ".bash", ".zsh", ".fish", ".sql", ".html", ".htm", ".css", ".scss",
	".sass", ".less", ".swift", ".m", ".mm",
	".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".ico", ".svg", ".tiff", ".tif", ".heic", ".heif", ".avif", ".jp2", ".j2k",
	".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".flv", ".wmv", ".mpg", ".mpeg", ".3gp", ".mts", ".m2ts",
	".mp3", ".aac", ".m4a", ".ogg", ".oga", ".opus", ".wma", ".flac", ".wav",
	".zip", ".gz", ".gzip", ".bz2", ".bzip2", ".xz", ".7z", ".rar", ".tar", ".tgz", ".tbz2", ".txz", ".zst", ".zstd", ".lz4", ".lzma",
	".pdf", ".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp", ".epub", ".doc", ".xls", ".ppt", ".rtf",
	".apk", ".jar", ".war", ".ipa", ".deb", ".rpm", ".dmg", ".pkg", ".exe", ".dll", ".so", ".dylib",
)

type magic struct {
	off int
	sig []byte
}

// precompressedMagic lists the signatures CargoShip's sniff recognises.
var precompressedMagic = []magic{
	{0, []byte("PK\x03\x04")}, {0, []byte("PK\x05\x06")}, {0, []byte("PK\x07\x08")},
	{0, []byte{0x1f, 0x8b}}, {0, []byte("BZh")}, {0, []byte{0xfd, '7', 'z', 'X', 'Z', 0}},
	{0, []byte{'7', 'z', 0xbc, 0xaf, 0x27, 0x1c}}, {0, []byte("Rar!\x1a\x07")},
	{0, []byte{0x28, 0xb5, 0x2f, 0xfd}}, {0, []byte{0x04, 0x22, 0x4d, 0x18}}, {0, []byte("CRAM")},
	{0, []byte{0xff, 0xd8, 0xff}}, {0, []byte{0x89, 'P', 'N', 'G'}}, {0, []byte("GIF8")}, {0, []byte("RIFF")},
	{4, []byte("ftypheic")}, {4, []byte("ftyp")}, {0, []byte{0, 0, 0, 0x18, 'f', 't', 'y', 'p'}},
	{0, []byte{0x1a, 0x45, 0xdf, 0xa3}}, {0, []byte("FLV")},
	{0, []byte{0xff, 0xfb}}, {0, []byte{0xff, 0xf3}}, {0, []byte{0xff, 0xf2}}, {0, []byte("ID3")},
	{0, []byte("OggS")}, {0, []byte("fLaC")}, {0, []byte("%PDF")}, {0, []byte("MZ")}, {0, []byte{0x7f, 'E', 'L', 'F'}},
}

const probeMinSize = 8 << 20

func setOf(xs ...string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// sniffPrecompressed reports whether head starts with a known
// already-compressed signature.
func sniffPrecompressed(head []byte) bool {
	for _, m := range precompressedMagic {
		if m.off+len(m.sig) <= len(head) && bytes.Equal(head[m.off:m.off+len(m.sig)], m.sig) {
			return true
		}
	}
	return false
}

// isPrecompressed applies CargoShip's rule to one file: true means the file
// counts as already compressed (a vote for a plain .tar chunk).
func isPrecompressed(f *File) (bool, error) {
	ext := strings.ToLower(path.Ext(f.Rel))
	if ext != "" && precompressedExt[ext] {
		return true, nil
	}
	if !(ext == "" || ext == ".dat" || ext == ".bin" || ext == ".tmp" || !knownExt[ext]) {
		return false, nil
	}
	if f.Size == 0 {
		return false, nil
	}
	rc, err := f.Open()
	if err != nil {
		return false, fmt.Errorf("cargopack: sniff %s: %w", f.Rel, err)
	}
	defer rc.Close()
	want := int64(512)
	if f.Size >= probeMinSize {
		want = 1 << 20
	}
	head := make([]byte, min(want, f.Size))
	n, err := io.ReadFull(rc, head)
	if err != nil && err != io.ErrUnexpectedEOF {
		return false, fmt.Errorf("cargopack: sniff %s: %w", f.Rel, err)
	}
	head = head[:n]
	if sniffPrecompressed(head[:min(len(head), 512)]) {
		return true, nil
	}
	if f.Size >= probeMinSize && len(head) >= 4096 {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return false, fmt.Errorf("cargopack: probe %s: %w", f.Rel, err)
		}
		out := enc.EncodeAll(head, nil)
		_ = enc.Close()
		return len(out) >= len(head)*95/100, nil
	}
	return false, nil
}
