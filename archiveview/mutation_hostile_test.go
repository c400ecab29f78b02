package archiveview

// Hostile-archive cases (see hostile_test.go for the harness and what every
// case must satisfy).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// hoMutate applies one random mutation to m. withBugs enables the
// mutations that hit issue 7's (fixed) bugs: an archive_offset copied from another
// member, an s3_key copied from another chunk (split parts all start at
// offset 1536 of their chunks, so this lands on another member at an
// offset whose header was already accepted: bug 1), and duplicate_of_hash
// naming another file's checksum (bug 2).
func hoMutate(r *rand.Rand, m *manifest.Manifest, withBugs bool) string {
	num := func(v int64) int64 {
		switch r.IntN(11) {
		case 0:
			return v + 1
		case 1:
			return v - 1
		case 2:
			return v + 512
		case 3:
			return v - 512
		case 4:
			return 0
		case 5:
			return -1
		case 6:
			return v * 2
		case 7:
			return v / 2
		case 8:
			return 1 << 40
		case 9:
			return v + int64(r.IntN(64<<10))
		}
		return int64(r.IntN(int(max(v, 1)) * 2))
	}
	str := func(v string) string {
		switch r.IntN(6) {
		case 0:
			return ""
		case 1:
			return v + "x"
		case 2:
			if v != "" {
				return v[:len(v)-1]
			}
			return "y"
		case 3:
			if v != "" {
				i := r.IntN(len(v))
				return v[:i] + string(v[i]^1) + v[i+1:]
			}
			return "z"
		case 4:
			return "../" + v
		}
		return strings.ToUpper(v)
	}
	nf, nc := len(m.Files), len(m.Chunks)
	switch k := r.IntN(16); {
	case k < 8 && nf > 0:
		fe := &m.Files[r.IntN(nf)]
		switch r.IntN(9) {
		case 0:
			fe.Size = num(fe.Size)
			return "file size"
		case 1:
			if fe.ArchiveOffset == nil || r.IntN(4) == 0 {
				fe.ArchiveOffset = nil
				return "file archive_offset nil"
			}
			v := num(*fe.ArchiveOffset)
			fe.ArchiveOffset = &v
			return "file archive_offset"
		case 2:
			if r.IntN(2) == 0 {
				fe.Path = str(fe.Path)
			} else {
				fe.Path = m.Files[r.IntN(nf)].Path
			}
			return "file path"
		case 3:
			fe.Checksum = str(fe.Checksum)
			return "file checksum"
		case 4:
			if withBugs && nc > 0 && r.IntN(2) == 0 {
				fe.S3Key = m.Chunks[r.IntN(nc)].S3Key
				return "file s3_key of another chunk"
			}
			fe.S3Key = str(fe.S3Key)
			return "file s3_key"
		case 5:
			fe.Offset, fe.Length = num(fe.Offset), num(fe.Length)
			return "file offset/length"
		case 6:
			fe.PartIndex, fe.TotalParts = int(num(int64(fe.PartIndex))), int(num(int64(fe.TotalParts)))
			return "file part_index/total_parts"
		case 7:
			fe.IsDuplicate = !fe.IsDuplicate
			if withBugs && r.IntN(2) == 0 {
				o := &m.Files[r.IntN(nf)]
				fe.DuplicateOfHash, fe.Size = o.Checksum, o.Size
			}
			return "file is_duplicate"
		case 8:
			if withBugs {
				o := m.Files[r.IntN(nf)]
				if o.ArchiveOffset != nil {
					v := *o.ArchiveOffset
					fe.ArchiveOffset = &v
					fe.Size = o.Size
					return "file archive_offset of another member"
				}
			}
			fe.ModTime = fe.ModTime.Add(time.Duration(num(3600)) * time.Second)
			return "file mod_time"
		}
	case k < 14 && nc > 0:
		c := &m.Chunks[r.IntN(nc)]
		nfr := len(c.Frames)
		switch r.IntN(8) {
		case 0:
			c.CompressedSize = num(c.CompressedSize)
			return "chunk compressed_size"
		case 1:
			c.UncompressedSize = num(c.UncompressedSize)
			return "chunk uncompressed_size"
		case 2:
			if withBugs {
				c.S3Key = m.Chunks[r.IntN(nc)].S3Key
				return "chunk s3_key of another chunk"
			}
			c.S3Key = str(c.S3Key)
			return "chunk s3_key"
		case 3:
			c.Checksum = str(c.Checksum)
			return "chunk checksum"
		case 4:
			if nfr > 0 {
				f := &c.Frames[r.IntN(nfr)]
				switch r.IntN(5) {
				case 0:
					f.CompressedOffset = num(f.CompressedOffset)
				case 1:
					f.CompressedSize = num(f.CompressedSize)
				case 2:
					f.UncompressedOffset = num(f.UncompressedOffset)
				case 3:
					f.UncompressedSize = num(f.UncompressedSize)
				case 4:
					f.Checksum = str(f.Checksum)
				}
				return "frame field"
			}
		case 5:
			if nfr > 1 {
				i, j := r.IntN(nfr), r.IntN(nfr)
				c.Frames[i], c.Frames[j] = c.Frames[j], c.Frames[i]
				return "frames swapped"
			}
		case 6:
			if nfr > 0 {
				i := r.IntN(nfr)
				c.Frames = slices.Delete(c.Frames, i, i+1)
				return "frame deleted"
			}
		case 7:
			if nfr > 0 {
				i := r.IntN(nfr)
				c.Frames = slices.Insert(c.Frames, i, c.Frames[i])
				return "frame repeated"
			}
		}
		c.CompressedSize = num(c.CompressedSize)
		return "chunk compressed_size"
	}
	switch r.IntN(4) {
	case 0:
		m.SourcePath = str(m.SourcePath)
		return "source_path"
	case 1:
		m.Prefix = str(m.Prefix)
		return "prefix"
	case 2:
		if nf > 0 {
			m.DeletedPaths = append(m.DeletedPaths, m.Files[r.IntN(nf)].Path)
		}
		return "deleted_paths"
	}
	m.CompressionType = str(m.CompressionType)
	return "compression_type"
}

// hoShape is one archive shape for the mutation loop and the fuzz target.
type hoShape struct {
	name  string
	files map[string][]byte
	opt   cargopack.Options
}

func hoShapes() []hoShape {
	return []hoShape{
		{"framed", hoBaseFiles(), hoFramed},
		{"plain", hoBaseFiles(), hoPlain},
		{"stream", hoBaseFiles(), cargopack.Options{}},
		{"split+dedup", hoDupFiles(), cargopack.Options{FrameSize: 16 << 10, SplitSize: 15000, Dedup: true}},
		{"direct", hoBaseFiles(), cargopack.Options{Direct: true}},
	}
}

// hoRoundStats counts the outcomes of mutation rounds.
type hoRoundStats struct {
	opened, refused, served, failed int
}

// hoRound applies 1-3 random mutations to base (the manifest as written,
// JSON), stores the result, opens it and reads every key whole and by one
// random range. Open may fail; a read may fail; bytes served must be
// exactly those of a source file whose manifest entry maps to that key.
// Errors must name the manifest key (Open) or the archive and file key
// (reads). fs and cache may be shared between rounds (withBugs).
func hoRound(t testing.TB, h *hoEnv, base []byte, r *rand.Rand, withBugs bool, fs *faults.Faulty, cache *chunkio.FrameCache, label string, st *hoRoundStats) {
	var m manifest.Manifest
	if err := json.Unmarshal(base, &m); err != nil {
		t.Fatal(err)
	}
	orig := make([]string, len(m.Files))
	for i := range m.Files {
		orig[i], _ = manifest.RelativeKey(m.SourcePath, m.Files[i].Path)
	}
	baseFiles := slices.Clone(m.Files) // as written: checksums of the sources
	var what []string
	for n := 1 + r.IntN(3); n > 0; n-- {
		what = append(what, hoMutate(r, &m, withBugs))
	}
	desc := fmt.Sprintf("%s (%s)", label, strings.Join(what, ", "))
	if testing.Verbose() {
		t.Logf("%s: %s", desc, hoDiff(base, &m))
	}
	h.putManifest(&m)
	allowed := map[string][][]byte{}
	for i := range m.Files {
		if k, err := manifest.RelativeKey(m.SourcePath, m.Files[i].Path); err == nil {
			allowed[k] = append(allowed[k], h.files[orig[i]])
			// A duplicate says "my bytes are those of the content with
			// hash duplicate_of_hash": serving that content is what the
			// manifest describes (a duplicate whose own checksum names
			// other content is refused at Open).
			if fe := &m.Files[i]; fe.IsDuplicate && fe.DuplicateOfHash != "" {
				for j := range baseFiles {
					if strings.EqualFold(baseFiles[j].Checksum, fe.DuplicateOfHash) {
						allowed[k] = append(allowed[k], h.files[orig[j]])
					}
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hoDeadline)
	defer cancel()
	defer hoCheckRequests(t, fs)
	a, err := Open(ctx, fs, h.bucket, h.mkey, Options{Name: hoName, Cache: cache})
	if err != nil {
		st.refused++
		if !strings.Contains(err.Error(), h.mkey) {
			t.Errorf("%s: Open error does not name the manifest: %v", desc, err)
		}
		return
	}
	defer a.Close()
	st.opened++
	for _, f := range hoAllKeys(a) {
		if why := hoSafeKey(f.Key); why != "" {
			t.Errorf("%s: listed key %q: %s", desc, f.Key, why)
		}
		rgs := [][2]int64{{0, f.Size}}
		if f.Size > 0 {
			off := r.Int64N(f.Size)
			rgs = append(rgs, [2]int64{off, 1 + r.Int64N(f.Size-off)})
		}
		for _, rg := range rgs {
			res := hoRead(ctx, a, f, rg[0], rg[1], r.IntN(2) == 0)
			if errors.Is(res.err, errHoPanic) {
				t.Errorf("%s: read %s [%d,+%d): %v", desc, f.Key, rg[0], rg[1], res.err)
				continue
			}
			if res.err != nil {
				st.failed++
				if msg := res.err.Error(); !strings.Contains(msg, hoName) || !strings.Contains(msg, f.Key) {
					t.Errorf("%s: read %s: error does not name archive and key: %v", desc, f.Key, res.err)
				}
				continue
			}
			ok := false
			for _, src := range allowed[f.Key] {
				if int64(len(src)) >= rg[0]+rg[1] && int64(len(res.got)) == rg[1] && bytes.Equal(res.got, src[rg[0]:rg[0]+rg[1]]) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s: read %s [%d,+%d): WRONG BYTES served (%d bytes)", desc, f.Key, rg[0], rg[1], len(res.got))
			}
			st.served++
		}
	}
}

// hoDiff describes how m differs from the manifest JSON base, entry by
// entry, for reproducing a failing round.
func hoDiff(base []byte, m *manifest.Manifest) string {
	var b manifest.Manifest
	if err := json.Unmarshal(base, &b); err != nil {
		return err.Error()
	}
	var out []string
	cmp := func(what string, x, y any) {
		jx, _ := json.Marshal(x)
		jy, _ := json.Marshal(y)
		if !bytes.Equal(jx, jy) {
			out = append(out, fmt.Sprintf("%s: %s -> %s", what, jx, jy))
		}
	}
	for i := range max(len(b.Files), len(m.Files)) {
		var x, y any
		if i < len(b.Files) {
			x = b.Files[i]
		}
		if i < len(m.Files) {
			y = m.Files[i]
		}
		cmp(fmt.Sprintf("files[%d]", i), x, y)
	}
	for i := range max(len(b.Chunks), len(m.Chunks)) {
		var x, y any
		if i < len(b.Chunks) {
			x = b.Chunks[i]
		}
		if i < len(m.Chunks) {
			y = m.Chunks[i]
		}
		cmp(fmt.Sprintf("chunks[%d]", i), x, y)
	}
	cmp("source_path", b.SourcePath, m.SourcePath)
	cmp("prefix", b.Prefix, m.Prefix)
	cmp("deleted_paths", b.DeletedPaths, m.DeletedPaths)
	cmp("compression_type", b.CompressionType, m.CompressionType)
	return strings.Join(out, "; ")
}

// hoMutationLoop runs deterministic mutation rounds over every shape
// (seeded, at most 300 rounds per shape and about 7 s in all).
func hoMutationLoop(t *testing.T, withBugs bool) {
	const rounds = 300
	budget := 7 * time.Second
	start := time.Now()
	var st hoRoundStats
	// Normally every round gets its own chunkio.FrameCache and store. withBugs
	// shares one cache and one store across the rounds of a shape, as a
	// server does when a manifest is replaced and the archive reopened
	// (cached frames were keyed by frame index: issue 7 bug 4).
	shared := chunkio.NewFrameCache(16 << 20)
	for si, sh := range hoShapes() {
		h := hoPack(t, t.TempDir(), sh.files, sh.opt)
		base, err := json.Marshal(h.manifest())
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(si)+1, 0x5eed))
		sharedStore := faults.NewFaulty(backend.NewFileStore(h.dir), faults.FaultConfig{})
		for round := 0; round < rounds && time.Since(start) < budget; round++ {
			fs, cache := faults.NewFaulty(backend.NewFileStore(h.dir), faults.FaultConfig{}), chunkio.NewFrameCache(16<<20)
			if withBugs {
				fs, cache = sharedStore, shared
			}
			hoRound(t, h, base, r, withBugs, fs, cache, fmt.Sprintf("%s round %d", sh.name, round), &st)
		}
	}
	t.Logf("mutation loop: %v; %d opened, %d refused at Open; %d reads served exact, %d refused",
		time.Since(start).Round(time.Millisecond), st.opened, st.refused, st.served, st.failed)
}

// FuzzHostileManifest drives the same mutations from fuzzer input: seed
// selects the random mutations, shape the archive shape.
//
//	go test ./archiveview -run '^$' -fuzz FuzzHostileManifest -fuzztime=10s
func FuzzHostileManifest(f *testing.F) {
	for seed := uint64(0); seed < 8; seed++ {
		f.Add(seed, uint8(seed))
	}
	shapes := hoShapes()
	envs := make([]*hoEnv, len(shapes))
	bases := make([][]byte, len(shapes))
	for i, sh := range shapes {
		envs[i] = hoPack(f, f.TempDir(), sh.files, sh.opt)
		m := envs[i].manifest()
		var err error
		if bases[i], err = json.Marshal(m); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, seed uint64, shape uint8) {
		i := int(shape) % len(shapes)
		h := *envs[i]
		h.t = t
		r := rand.New(rand.NewPCG(seed, uint64(shape)))
		var st hoRoundStats
		hoRound(t, &h, bases[i], r, false, faults.NewFaulty(backend.NewFileStore(h.dir), faults.FaultConfig{}),
			chunkio.NewFrameCache(16<<20), fmt.Sprintf("%s seed %d", shapes[i].name, seed), &st)
	})
}

func TestHostileManifestMutations(t *testing.T) {
	hoMutationLoop(t, false)
}

// TestHostileManifestMutationsShared runs the mutation loop with the
// mutations that hit issue 7's bugs (archive_offset and s3_key of another
// member, duplicate_of_hash naming another file's content) and one store
// and one chunkio.FrameCache shared by every round of a shape, as a server does
// when a manifest is replaced and the archive reopened.
func TestHostileManifestMutationsShared(t *testing.T) {
	hoMutationLoop(t, true)
}
