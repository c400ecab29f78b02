package manifest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// synth builds a valid, writer-shaped manifest in memory: nChunks framed
// .tar.zst chunks, filesPerChunk files each, two frames per chunk, absolute
// walked paths under /data/src, prefix-relative s3_keys, real-looking hex
// checksums. Tests mutate it to pin one lie at a time.
func synth(nChunks, filesPerChunk int) *Manifest {
	t0 := time.Date(2026, 7, 21, 12, 34, 56, 123456789, time.FixedZone("", -7*3600))
	m := &Manifest{
		Version:           "2.1",
		UploadID:          "20260721-0a1b2c3d",
		CreatedAt:         t0,
		CompletedAt:       t0.Add(time.Minute),
		SourcePath:        "/data/src",
		Hostname:          "host",
		Bucket:            "bkt",
		Prefix:            "backups",
		Region:            "us-east-1",
		CompressionType:   "zstd",
		CompressionLevel:  3,
		CompressionRatio:  0.5,
		ChecksumAlgorithm: "sha256",
		FormatFeatures:    []string{"frames"},
	}
	sum := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for c := 0; c < nChunks; c++ {
		skey := fmt.Sprintf("uploads/%s/shard-%d/chunk-%d.tar.zst", m.UploadID, c%4, c)
		var off int64 = 512
		var paths []string
		for i := 0; i < filesPerChunk; i++ {
			p := fmt.Sprintf("/data/src/dir%04d/sub/file-%07d.bin", c, i)
			size := int64(1000 + i%3000)
			ao := off
			m.Files = append(m.Files, FileEntry{
				Path: p, Size: size, ModTime: t0, ChunkID: c, ShardID: c % 4, S3Key: skey,
				ArchiveOffset: &ao, Checksum: sum,
			})
			paths = append(paths, p)
			off += (size+511)/512*512 + 512
		}
		utotal := off - 512 + 1024 // last header not written; plus trailer
		half := utotal / 2
		m.Chunks = append(m.Chunks, ChunkEntry{
			ID: c, ShardID: c % 4, S3Key: skey, FileCount: filesPerChunk, FilePaths: paths,
			UncompressedSize: utotal, CompressedSize: 300,
			CreatedAt: t0, UploadedAt: t0,
			Frames: []FrameEntry{
				{CompressedOffset: 0, CompressedSize: 100, UncompressedOffset: 0, UncompressedSize: half, Checksum: sum},
				{CompressedOffset: 100, CompressedSize: 200, UncompressedOffset: half, UncompressedSize: utotal - half, Checksum: sum},
			},
		})
	}
	m.TotalFiles = int64(len(m.Files))
	m.TotalChunks = len(m.Chunks)
	m.ShardCount = 4
	return m
}

// encode writes m as the CargoShip writer does: 2-space indented JSON,
// gzipped when gz.
func encode(tb testing.TB, m *Manifest, gz bool) []byte {
	tb.Helper()
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	if !gz {
		return js
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(js); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func gzipBytes(tb testing.TB, data []byte) []byte {
	tb.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}
