package archiveview

// Hostile-archive cases (see hostile_test.go for the harness and what every
// case must satisfy).

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

func hoCountRows() []hoRow {
	long := strings.Repeat("d/", 100) + "f.txt"
	return []hoRow{
		{name: "more files than MaxFiles", opts: Options{Limits: manifest.Limits{MaxFiles: 4}},
			openErr: []error{manifest.ErrTooLarge}},
		{name: "exactly MaxFiles", opts: Options{Limits: manifest.Limits{MaxFiles: 5}},
			serveKeys: []string{"a.txt"}},
		{name: "more chunks than MaxChunks", pack: cargopack.Options{ChunkSize: 4000},
			opts: Options{Limits: manifest.Limits{MaxChunks: 2}}, openErr: []error{manifest.ErrTooLarge}},
		{name: "more frames than MaxFrames", pack: hoFramed, opts: Options{Limits: manifest.Limits{MaxFrames: 2}},
			openErr: []error{manifest.ErrTooLarge}},
		{name: "deep path (100 segments) is served", files: map[string][]byte{long: hoText(9, 1000), "x": hoText(8, 10)},
			pack: hoFramed, serveKeys: []string{long, "x"}},
		{name: "deep path over MaxPathBytes", files: map[string][]byte{long: hoText(9, 1000)},
			pack: hoFramed, opts: Options{Limits: manifest.Limits{MaxPathBytes: 150}},
			openErr: []error{manifest.ErrInvalid}},
		{name: "64 KiB path over the default MaxPathBytes", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = m.SourcePath + "/" + strings.Repeat("x", 64<<10)
			},
			openErr: []error{manifest.ErrInvalid}},
		{name: "version 3.0", edit: func(h *hoEnv, m *manifest.Manifest) { m.Version = "3.0" },
			openErr: []error{manifest.ErrVersion}},
		{name: "version banana", edit: func(h *hoEnv, m *manifest.Manifest) { m.Version = "banana" },
			openErr: []error{manifest.ErrVersion}},
		{name: "version empty", edit: func(h *hoEnv, m *manifest.Manifest) { m.Version = "" },
			openErr: []error{manifest.ErrVersion}},
		{name: "version 0.9", edit: func(h *hoEnv, m *manifest.Manifest) { m.Version = "0.9" },
			openErr: []error{manifest.ErrVersion}},
		{name: "encrypted wrapper stored under manifest.json.gz", pack: cargopack.Options{EncryptedManifest: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				data, err := os.ReadFile(h.objPath(h.mkey))
				if err != nil {
					h.t.Fatal(err)
				}
				h.mkey = strings.Replace(h.mkey, "manifest.encrypted.json.gz", "manifest.json.gz", 1)
				if err := os.WriteFile(h.objPath(h.mkey), data, 0o644); err != nil {
					h.t.Fatal(err)
				}
			},
			openErr: []error{manifest.ErrEncrypted}},
		{name: "manifest is an empty object", disk: hoRawManifest(nil), openErr: []error{manifest.ErrInvalid}},
		{name: "manifest is JSON null", disk: hoRawManifest([]byte("null")), openErr: []error{}},
		{name: "manifest is a JSON array", disk: hoRawManifest([]byte("[1,2,3]")), openErr: []error{manifest.ErrInvalid}},
		{name: "manifest JSON truncated", disk: hoRawManifest([]byte(`{"version":"2.1","files":[{"path":"a`)), openErr: []error{manifest.ErrInvalid}},
		{name: "manifest gzip truncated",
			disk: func(h *hoEnv, m *manifest.Manifest) {
				p := h.objPath(h.mkey)
				st, _ := os.Stat(p)
				if err := os.Truncate(p, st.Size()/2); err != nil {
					h.t.Fatal(err)
				}
			},
			openErr: []error{manifest.ErrInvalid}},
		{name: "manifest with deeply nested JSON", disk: hoRawManifest([]byte(`{"version":"2.1","x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`)),
			openErr: []error{}},
		{name: "encrypted manifest wrapper", pack: cargopack.Options{EncryptedManifest: true},
			openErr: []error{manifest.ErrEncrypted}},
		{name: "encrypted manifest wrapper (plain json)", pack: cargopack.Options{EncryptedManifest: true, PlainManifest: true},
			openErr: []error{manifest.ErrEncrypted}},
	}
}

// hoRawManifest stores data (gzipped) as the manifest object; nil stores
// an empty object.
func hoRawManifest(data []byte) func(h *hoEnv, m *manifest.Manifest) {
	return func(h *hoEnv, m *manifest.Manifest) {
		if data == nil {
			if err := os.WriteFile(h.objPath(h.mkey), nil, 0o644); err != nil {
				h.t.Fatal(err)
			}
			return
		}
		h.putJSON(h.mkey, data)
	}
}

// hoPathRow rewrites a.txt's path to p and expects an Open error, or
// (mayRefuse) a served-or-failed read under a safe key.
func hoPathRow(name, p string, openErr []error, alias map[string]string) hoRow {
	return hoRow{
		name: "path " + name, pack: hoFramed,
		edit: func(h *hoEnv, m *manifest.Manifest) {
			hoEntry(h.t, m, "a.txt").Path = strings.ReplaceAll(p, "$S", m.SourcePath)
		},
		openErr: openErr,
		alias:   alias,
	}
}

func hoPathRows() []hoRow {
	rows := []hoRow{
		hoPathRow(`".."`, "..", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow(`"a/../../etc/passwd"`, "a/../../etc/passwd", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow(`"$S/../../etc/passwd"`, "$S/../../etc/passwd", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow(`"$S/dir/../../x"`, "$S/dir/../../x", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow(`"..\\..\\x" (backslashes)`, `..\..\x`, []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow("with NUL", "$S/a\x00.txt", []error{manifest.ErrInvalid}, nil),
		hoPathRow("with a control character", "$S/a\x01.txt", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow("with DEL", "$S/a\x7f.txt", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow("with a newline", "$S/a\n.txt", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow("empty", "", []error{manifest.ErrInvalid}, nil),
		hoPathRow(`"/" only`, "/", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		hoPathRow("equal to source_path with slash", "$S/", []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		{
			// A single-file upload's path equals source_path: the key is
			// the base name; the tar member is named otherwise here.
			name: "path equal to source_path", pack: hoFramed,
			edit:     func(h *hoEnv, m *manifest.Manifest) { hoEntry(h.t, m, "a.txt").Path = m.SourcePath },
			failKeys: map[string][]error{"src": {ErrWrongMember}},
		},
		{
			// Absolute, outside source_path: served under "etc/passwd" at
			// most, never above the bucket; the tar member is named
			// otherwise, so the read is refused.
			name: "path absolute outside source_path", pack: hoFramed,
			edit:      func(h *hoEnv, m *manifest.Manifest) { hoEntry(h.t, m, "a.txt").Path = "/etc/passwd" },
			failKeys:  map[string][]error{"etc/passwd": {ErrWrongMember}},
			serveKeys: []string{"b.bin"},
		},
		{
			name: `path "C:\x" (Windows volume)`, pack: hoFramed,
			edit:      func(h *hoEnv, m *manifest.Manifest) { hoEntry(h.t, m, "a.txt").Path = `C:\x` },
			failKeys:  map[string][]error{"x": {ErrWrongMember}},
			serveKeys: []string{"b.bin"},
		},
		{
			name: "path with Windows separators under source_path", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = strings.ReplaceAll(m.SourcePath+"/sub/a.txt", "/", `\`)
			},
			alias: map[string]string{"sub/a.txt": "a.txt"},
		},
		{
			name: "paths collide after sanitizing (./)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = m.SourcePath + "/./z.txt"
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"z.txt"},
		},
		{
			name: "paths collide after sanitizing (// and backslash)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = m.SourcePath + `\dir//e.txt`
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"dir/e.txt"},
		},
		{
			name: "paths collide: absolute outside source and relative", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = "/z.txt"
			},
			openErr: []error{ErrInvalidTree},
		},
		{
			name: "same path listed twice", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = hoEntry(h.t, m, "z.txt").Path
			},
			openErr: []error{ErrInvalidTree},
		},
		{
			name: "source_path is / and paths are relative traversals", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.SourcePath = "/"
				hoEntry(h.t, m, "a.txt").Path = "/../a.txt"
			},
			openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath},
		},
		{
			name: "source_path with traversal does not lift keys", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.SourcePath = "/cargopack/src/../../.."
			},
			mayRefuse: true,
			alias: map[string]string{"cargopack/src/a.txt": "a.txt", "cargopack/src/b.bin": "b.bin",
				"cargopack/src/dir/c.txt": "dir/c.txt", "cargopack/src/dir/e.txt": "dir/e.txt", "cargopack/src/z.txt": "z.txt"},
			serveKeys: []string{"cargopack/src/a.txt", "cargopack/src/z.txt"},
		},
		{
			name: "deleted_paths with traversal", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.DeletedPaths = []string{"../../etc/passwd"}
			},
			openErr: []error{ErrInvalidTree},
		},
		{
			name: "chunk s3_key escapes the bucket directory", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				old := m.Chunks[0].S3Key
				m.Chunks[0].S3Key = "../../../../../../../../etc/passwd.tar.zst"
				for i := range m.Files {
					if m.Files[i].S3Key == old {
						m.Files[i].S3Key = m.Chunks[0].S3Key
					}
				}
			},
			openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath},
		},
		{
			name: "direct object s3_key escapes the bucket directory", pack: cargopack.Options{Direct: true},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").S3Key = "../../../../../../../../etc/hostname"
			},
			openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath}, openHas: []string{"a.txt"},
		},
		{
			name: "prefix with traversal", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.Prefix = "../../../../../../.."
			},
			openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath},
		},
		{
			name: "s3_key as URL of another bucket", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				old := m.Chunks[0].S3Key
				m.Chunks[0].S3Key = "s3://other-bucket/../../x/chunk.tar.zst"
				for i := range m.Files {
					if m.Files[i].S3Key == old {
						m.Files[i].S3Key = m.Chunks[0].S3Key
					}
				}
			},
			openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath},
		},
	}
	return rows
}

// hoRawPathRows put raw bytes (invalid UTF-8, \u escapes) into the JSON.
func hoRawPathRows() []hoRow {
	mk := func(name, raw string, openErr []error, alias map[string]string) hoRow {
		return hoRow{
			name: "raw JSON path " + name, pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "a.txt").Path = "@@PLACEHOLDER@@"
			},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				js, err := json.Marshal(m)
				if err != nil {
					h.t.Fatal(err)
				}
				js = bytes.Replace(js, []byte("@@PLACEHOLDER@@"), []byte(strings.ReplaceAll(raw, "$S", m.SourcePath)), 1)
				h.putJSON(h.mkey, js)
			},
			openErr:   openErr,
			alias:     alias,
			mayRefuse: openErr == nil && alias == nil,
		}
	}
	return []hoRow{
		// encoding/json semantics: invalid UTF-8 becomes U+FFFD, so the
		// key is valid UTF-8. The entry is still a.txt's (its tar name
		// matches after Go's PAX ASCII folding), so serving a.txt's
		// verified bytes under the U+FFFD key is correct.
		mk("invalid UTF-8 bytes", "$S/a\xff\xfe.txt", nil, map[string]string{"a\ufffd\ufffd.txt": "a.txt"}),
		mk(`\u0000 escape`, `$S/a\u0000.txt`, []error{manifest.ErrInvalid}, nil),
		mk(`\u0001 escape`, `$S/a\u0001.txt`, []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		mk(`lone surrogate \ud800`, `$S/a\ud800.txt`, nil, map[string]string{"a\ufffd.txt": "a.txt"}),
		mk(`\u002e\u002e traversal`, `$S/\u002e\u002e/\u002e\u002e/etc/passwd`, []error{ErrInvalidTree, manifest.ErrUnsafePath}, nil),
		mk(`\u002f escaped slashes`, `\u002fcargopack\u002fsrc\u002fsub\u002fa.txt`, nil, map[string]string{"sub/a.txt": "a.txt"}),
	}
}

// hoDupFiles: the base files plus dup.txt, a copy of a.txt.
func hoDupFiles() map[string][]byte {
	f := hoBaseFiles()
	f["dup.txt"] = f["a.txt"]
	return f
}

func hoDupSplitRows() []hoRow {
	dupFiles := hoDupFiles
	splitFiles := map[string][]byte{"big.bin": hoRandom(7, 40000), "small.txt": hoText(8, 900)}
	split := cargopack.Options{FrameSize: 16 << 10, SplitSize: 12000}
	parts := func(m *manifest.Manifest) []int {
		var out []int
		for i := range m.Files {
			if strings.HasSuffix(m.Files[i].Path, "/big.bin") {
				out = append(out, i)
			}
		}
		slices.SortFunc(out, func(a, b int) int { return m.Files[a].PartIndex - m.Files[b].PartIndex })
		return out
	}
	return []hoRow{
		{name: "dedup untampered is served", files: dupFiles(), pack: cargopack.Options{FrameSize: 16 << 10, Dedup: true},
			serveKeys: []string{"a.txt", "dup.txt"}},
		{
			name: "duplicate whose original is missing", files: dupFiles(), pack: cargopack.Options{FrameSize: 16 << 10, Dedup: true},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				m.Files = slices.DeleteFunc(m.Files, func(fe manifest.FileEntry) bool { return strings.HasSuffix(fe.Path, "/a.txt") })
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"dup.txt"},
		},
		{
			name: "duplicate whose original's checksum differs", files: dupFiles(), pack: cargopack.Options{FrameSize: 16 << 10, Dedup: true},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				fe := hoEntry(h.t, m, "a.txt")
				fe.Checksum = strings.Repeat("0", 64)
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"dup.txt"},
		},
		{
			name: "duplicate that lies about its size", files: dupFiles(), pack: cargopack.Options{FrameSize: 16 << 10, Dedup: true},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoEntry(h.t, m, "dup.txt").Size += 100
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"dup.txt"},
		},
		{
			name: "unpatched duplicate (s3_key \"\", chunk_id -1)", files: dupFiles(),
			pack:    cargopack.Options{FrameSize: 16 << 10, Dedup: true, DedupUnpatched: true},
			openErr: []error{ErrInvalidTree}, openHas: []string{"dup.txt"},
		},
		{name: "split untampered is served", files: splitFiles, pack: split, serveKeys: []string{"big.bin", "small.txt"}},
		{
			name: "split file with a missing part", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files = slices.Delete(m.Files, p[1], p[1]+1)
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"big.bin"},
		},
		{
			name: "split file with overlapping parts", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[2]].Offset -= 100
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"big.bin"},
		},
		{
			name: "split file with a gap between parts", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[1]].Length -= 100
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"big.bin"},
		},
		{
			name: "split file with a part beyond size", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[len(p)-1]].Length += 100
			},
			openErr: []error{}, openHas: []string{"big.bin"},
		},
		{
			name: "split file with a repeated part index", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[2]].PartIndex = 1
			},
			openErr: []error{ErrInvalidTree}, openHas: []string{"big.bin"},
		},
		{
			name: "split parts swapped (offsets follow, tar names do not)", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				a, b := &m.Files[p[0]], &m.Files[p[1]]
				a.S3Key, b.S3Key = b.S3Key, a.S3Key
				a.ArchiveOffset, b.ArchiveOffset = b.ArchiveOffset, a.ArchiveOffset
				a.ChunkID, b.ChunkID = b.ChunkID, a.ChunkID
				a.ShardID, b.ShardID = b.ShardID, a.ShardID
			},
			failKeys: map[string][]error{"big.bin": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"small.txt"},
		},
		{
			name: "split total_parts disagree", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[1]].TotalParts++
			},
			openErr: []error{}, openHas: []string{"big.bin"},
		},
		{
			name: "split part checksum wrong", files: splitFiles, pack: split,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				p := parts(m)
				m.Files[p[1]].Checksum = strings.Repeat("ab", 32)
			},
			failKeys: map[string][]error{"big.bin": {ErrChecksum}},
		},
	}
}

// hoDotdot is a row whose manifest edit puts a ".." segment into an object
// key: it must be refused at Open, naming the manifest, and the key never
// reaches the store (issue 7 bug 5, fixed).
func hoDotdot(name string, pack cargopack.Options, edit func(h *hoEnv, m *manifest.Manifest)) hoRow {
	return hoRow{name: name, pack: pack, edit: edit, openErr: []error{ErrInvalidTree, manifest.ErrUnsafePath}}
}

// hoIssue7Rows are the hostile cases that revealed read-core bugs (issue 7),
// now fixed: they run with the rest of TestHostileArchives.
func hoIssue7Rows() []hoRow {
	return []hoRow{
		{
			// BUG 1: chunkReadState.hdrOK remembers a checked header by
			// offset only. Once a.txt's header was accepted, any other
			// file whose archive_offset equals a.txt's skips the check,
			// and a partial read of it (framed: frame-verified, so no
			// extent verification) serves a.txt's bytes.
			name: "archive_offset of another member already read (hdrOK keyed by offset only)", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoOffset(h.t, m, "dir/e.txt", *hoEntry(h.t, m, "a.txt").ArchiveOffset)
			},
			failKeys: map[string][]error{"dir/e.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.txt"},
		},
		{
			// BUG 1b: the verified-extent cache (keyExtent) is keyed by
			// chunk offset and length only. b.txt points at a.txt's
			// data (same size); a.txt was read (and its extent verified
			// against a.txt's sha256) first, so b.txt's partial read is
			// served from that cache entry without checking b.txt's
			// own sha256 or its header (hdrOK, BUG 1).
			name: "plain tar: archive_offset of a same-size member already read (extent cache keyed by offset)", pack: hoPlain,
			files: map[string][]byte{"a.txt": hoText(1, 3000), "b.txt": hoText(2, 3000), "c.txt": hoText(3, 3000)},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoOffset(h.t, m, "b.txt", *hoEntry(h.t, m, "a.txt").ArchiveOffset)
			},
			failKeys: map[string][]error{"b.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.txt", "c.txt"},
		},
		{
			// BUG 1c: the worst form of BUG 1. b.txt has no sha256 and
			// points at a.txt's data (same size); a.txt was read first,
			// so b.txt's header check is skipped and a WHOLE read of
			// b.txt serves a.txt's bytes with no error.
			name: "plain tar, no checksum: whole read of a member pointing at one already read", pack: hoPlain,
			files: map[string][]byte{"a.txt": hoText(1, 3000), "b.txt": hoText(2, 3000), "c.txt": hoText(3, 3000)},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				hoOffset(h.t, m, "b.txt", *hoEntry(h.t, m, "a.txt").ArchiveOffset)
				hoEntry(h.t, m, "b.txt").Checksum = ""
			},
			failKeys: map[string][]error{"b.txt": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.txt", "c.txt"},
		},
		{
			// BUG 1d: BUG 1 reached through s3_key. Split parts start
			// at the same offset (1536, after PAX and ustar headers) in
			// their own chunks; b.bin's part 1 is pointed at a.bin's
			// part-1 chunk. a.bin is read first, so the header at 1536
			// of that chunk is "known good" and a partial read of
			// b.bin's part 1 serves a.bin's bytes.
			name:  "split part s3_key pointing at another file's part chunk (same offset)",
			files: map[string][]byte{"a.bin": hoRandom(11, 30000), "b.bin": hoRandom(12, 30000)},
			pack:  cargopack.Options{FrameSize: 16 << 10, SplitSize: 15000},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				var pa, pb *manifest.FileEntry
				for i := range m.Files {
					fe := &m.Files[i]
					if fe.PartIndex == 1 && strings.HasSuffix(fe.Path, "/a.bin") {
						pa = fe
					}
					if fe.PartIndex == 1 && strings.HasSuffix(fe.Path, "/b.bin") {
						pb = fe
					}
				}
				if pa == nil || pb == nil || *pa.ArchiveOffset != *pb.ArchiveOffset {
					h.t.Fatalf("split layout changed")
				}
				pb.S3Key, pb.ChunkID, pb.ShardID = pa.S3Key, pa.ChunkID, pa.ShardID
			},
			failKeys: map[string][]error{"b.bin": {ErrWrongMember}}, partialFail: true,
			serveKeys: []string{"a.bin"},
		},
		{
			name: "duplicate_of_hash names another file's content", files: hoDupFiles(), pack: cargopack.Options{FrameSize: 16 << 10, Dedup: true},
			edit: func(h *hoEnv, m *manifest.Manifest) {
				fe := hoEntry(h.t, m, "z.txt")
				fe.IsDuplicate = true
				fe.DuplicateOfHash = hoEntry(h.t, m, "dir/e.txt").Checksum
				fe.Size = hoEntry(h.t, m, "dir/e.txt").Size
			},
			// Bug 2 (fixed): the original's bytes were served although
			// they contradict the duplicate's own checksum.
			openErr: []error{ErrInvalidTree}, openHas: []string{"z.txt", "duplicate_of_hash"},
		},
		{
			// Bug 3 (fixed): the compressed span was buffered whole.
			// Now an implausible span is refused unread, and any frame
			// whose span exceeds MaxFrameBytes is streamed.
			name: "frame claims a huge compressed span inside a huge (sparse) object", pack: hoFramed,
			edit: func(h *hoEnv, m *manifest.Manifest) {
				c := &m.Chunks[0]
				f := &c.Frames[len(c.Frames)-1]
				f.CompressedSize = 600 << 20
				c.CompressedSize = f.CompressedOffset + f.CompressedSize
				if err := os.Truncate(h.objPath(h.chunkKey(m, 0)), c.CompressedSize); err != nil {
					h.t.Fatal(err)
				}
			},
			failFn: func(h *hoEnv, m *manifest.Manifest) map[string][]error {
				c := &m.Chunks[0]
				out := map[string][]error{}
				for _, k := range hoKeysInFrame(m, 0, len(c.Frames)-1) {
					out[k] = []error{ErrCorrupt} // a 600 MiB span cannot hold one zstd frame of this size
				}
				return out
			},
			serveKeys: []string{"a.txt"},
		},
		hoDotdot("chunk s3_key with .. segments reaches the store", hoFramed, func(h *hoEnv, m *manifest.Manifest) {
			old := m.Chunks[0].S3Key
			m.Chunks[0].S3Key = "../../../../../../../../etc/passwd.tar.zst"
			for i := range m.Files {
				if m.Files[i].S3Key == old {
					m.Files[i].S3Key = m.Chunks[0].S3Key
				}
			}
		}),
		hoDotdot("direct s3_key with .. segments reaches the store", cargopack.Options{Direct: true}, func(h *hoEnv, m *manifest.Manifest) {
			hoEntry(h.t, m, "a.txt").S3Key = "../../../../../../../../etc/hostname"
		}),
		{
			// Bug 6 (fixed): two members named a.txt (b.txt's header
			// renamed), no offsets, no checksums: the tar walk kept the
			// last one and served b.txt's bytes as a.txt. An ambiguous
			// name in a walked chunk is now refused.
			name:  "duplicate member names in a chunk, no offsets or checksums (tar walk)",
			files: map[string][]byte{"a.txt": hoText(1, 3000), "b.txt": hoText(2, 3000)},
			pack:  cargopack.Options{PlainTar: hoPlain.PlainTar, Pre492: true, NoChecksums: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				p := h.objPath(h.chunkKey(m, 0))
				data, err := os.ReadFile(p)
				if err != nil {
					h.t.Fatal(err)
				}
				nameA, nameB := hoEntry(h.t, m, "a.txt").Path, hoEntry(h.t, m, "b.txt").Path
				for o := 0; o+512 <= len(data); o += 512 {
					if string(bytes.TrimRight(data[o:o+100], "\x00")) == nameB {
						hoEditHeader(h.t, p, int64(o), func(hdr []byte) {
							clear(hdr[0:100])
							copy(hdr[0:100], nameA)
						})
					}
				}
			},
			failKeys: map[string][]error{"a.txt": {ErrCorrupt}, "b.txt": {ErrNotInChunk}},
		},
		{
			// Bug 7 (fixed; CPU amplification, no wrong bytes): an
			// unframed pre-#492 chunk replaced by a 32 KiB zstd frame
			// of 1 GiB of zeros. Each read started a tar walk that
			// decoded the whole stream to check the object sha256, and
			// the failed walk was not remembered (10 reads + Verify
			// took ~10 s). Now the decode stops past a bound computed
			// from the chunk's manifest entries, and a walk that failed
			// on the data is remembered for the chunk.
			name: "stream zstd chunk, no offsets, 1 GiB zero bomb: decoded once, and only up to a bound", pack: cargopack.Options{Pre492: true},
			disk: func(h *hoEnv, m *manifest.Manifest) {
				if err := os.WriteFile(h.objPath(h.chunkKey(m, 0)), hoZeroBomb(1<<30), 0o644); err != nil {
					h.t.Fatal(err)
				}
			},
			failKeys: map[string][]error{"a.txt": nil, "z.txt": nil}, partialFail: true,
			maxTime: 3 * time.Second,
		},
	}
}
