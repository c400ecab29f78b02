package index

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goldenPath is the pinned index file of format version 3 (written by
// archiveview's TestGoldenIndex, which rebuilds it byte for byte).
const goldenPath = "testdata/golden.widx"

// decodeGolden decodes the pinned file from memory.
func decodeGolden(t testing.TB) (*Decoder, *Provenance, *Tree, []byte) {
	t.Helper()
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(data, goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Provenance()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := d.Tree(nil)
	if err != nil {
		t.Fatal(err)
	}
	return d, p, tr, data
}

// TestGoldenFile: the pinned file decodes, answers Stat, List and
// DeleteMarker as the archive it was written from, and encodes back to
// the same bytes.
func TestGoldenFile(t *testing.T) {
	d, p, tr, data := decodeGolden(t)
	if d.Bucket() != "bkt" || d.ManifestKey() != "g/uploads/20250305-00000002/manifest.json.gz" || len(p.Sources) != 2 {
		t.Fatalf("provenance: %s/%s, %d sources", d.Bucket(), d.ManifestKey(), len(p.Sources))
	}
	x := &tr.Idx
	x.IDs = tr.Chain
	if tr.Upload != "20250305-00000002" || len(tr.Chain) != 2 || x.N() != 9 || len(tr.Chunks) != 5 {
		t.Fatalf("tree: upload %s, chain %v, %d files, %d chunks", tr.Upload, tr.Chain, x.N(), len(tr.Chunks))
	}
	for key, want := range map[string]struct {
		size    int64
		version string
		extents int
	}{
		"a.txt":          {1234, "20250305-00000002", 1},
		"dup.txt":        {3000, "20250304-00000001", 1},
		"dir/split.bin":  {40000, "20250304-00000001", 3},
		"direct/raw.bin": {2000, "20250304-00000001", 1},
		"plain/p.dat":    {999, "20250305-00000002", 1},
	} {
		f, ok := x.Stat(key)
		if !ok || f.Size != want.size || f.VersionID != want.version || len(x.Extents(int(Ordinal(f)))) != want.extents {
			t.Errorf("Stat(%s) = %+v, %v; want size %d, version %s, %d extents", key, f, ok, want.size, want.version, want.extents)
		}
	}
	if f, _ := x.Stat("plain/q.json"); x.Extents(int(Ordinal(f)))[0].Off < 0 {
		t.Error("plain/q.json: the learned offset is not recorded")
	}
	if _, ok := x.Stat("z/gone.csv"); ok {
		t.Error("a deleted key is a file")
	}
	if v, ok := x.DeleteMarker("z/gone.csv"); !ok || v != "20250305-00000002" {
		t.Errorf("DeleteMarker(z/gone.csv) = %q, %v", v, ok)
	}
	res := x.List(ListParams{Delimiter: "/", MaxKeys: 4})
	var names []string
	for _, e := range res.Entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "a.txt dir/ direct/ dup.txt" || !res.Truncated || res.NextAfter != "dup.txt" {
		t.Errorf("List = %q, truncated %v, next %q", names, res.Truncated, res.NextAfter)
	}
	var buf bytes.Buffer
	if err := Write(&buf, "golden", tr, &Meta{Bucket: d.Bucket(), ManifestKey: d.ManifestKey(), Prov: p, Units: d.Units()}, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("the decoded golden file encodes to other bytes (%d vs %d)", buf.Len(), len(data))
	}
	if FileBytes(tr, &Meta{Bucket: d.Bucket(), ManifestKey: d.ManifestKey(), Prov: p, Units: d.Units()}) != int64(len(data)) {
		t.Error("FileBytes disagrees with Write")
	}
}

// FuzzDecode: any input, as given and resealed (a fresh tree hash, so
// mutations reach the decoder), decodes without panicking; a refusal wraps
// ErrBadIndex; an accepted file encodes back to itself.
func FuzzDecode(f *testing.F) {
	_, _, _, data := decodeGolden(f)
	f.Add(data[:len(data)-TrailerBytes])
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := TreeHash(body)
		for _, in := range [][]byte{body, append(bytes.Clone(body), sum[:]...)} {
			d, err := Decode(in, "fuzz")
			var p *Provenance
			var tr *Tree
			if err == nil {
				p, err = d.Provenance()
			}
			if err == nil {
				tr, err = d.Tree(nil)
			}
			if err != nil {
				if !errors.Is(err, ErrBadIndex) {
					t.Fatalf("refusal does not wrap ErrBadIndex: %v", err)
				}
				continue
			}
			var buf bytes.Buffer
			if err := Write(&buf, "fuzz", tr, &Meta{Bucket: d.Bucket(), ManifestKey: d.ManifestKey(), Prov: p, Units: d.Units()}, nil); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), in) {
				t.Fatalf("accepted file does not encode back to itself")
			}
		}
	})
}

// TestTruncatedMappedFile: an index file mapped in place and then
// truncated in place (as `cp NEW DIR/NAME` does) fails the reads that
// touch it with an error wrapping ErrFileChanged, and the process lives.
// The reads run in a child process, so that a SIGBUS (the old behaviour)
// fails this test instead of killing the test binary.
func TestTruncatedMappedFile(t *testing.T) {
	if path := os.Getenv("WHARF_TRUNCATED_INDEX"); path != "" {
		truncatedChild(path)
		return
	}
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mapped.widx")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTruncatedMappedFile$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WHARF_TRUNCATED_INDEX="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the process did not survive reads of a truncated mapped index: %v\n%s", err, out)
	}
	for _, want := range []string{"guard: true index " + path + ": index file changed while mapped", "must: true index " + path, "survived"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("child output lacks %q:\n%s", want, out)
		}
	}
}

// truncatedChild maps path, truncates it in place and reads.
func truncatedChild(path string) {
	d, m, err := Map(path, nil)
	if err != nil {
		panic(err)
	}
	if _, err := d.Provenance(); err != nil {
		panic(err)
	}
	tr, err := d.Tree(nil)
	if err != nil {
		panic(err)
	}
	defer m.Unmap()
	if err := os.Truncate(path, 0); err != nil {
		panic(err)
	}
	x := &tr.Idx
	err = x.Guard(func() { x.Extents(0) })
	println("guard:", errors.Is(err, ErrFileChanged), err.Error())
	func() {
		defer func() {
			r := recover()
			e, _ := r.(error)
			println("must:", errors.Is(e, ErrFileChanged), e.Error())
		}()
		x.Stat("a.txt")
	}()
	println("survived")
}

// decodeAll decodes in (called name) through provenance and tree.
func decodeAll(in []byte, name string) (*Decoder, *Provenance, *Tree, error) {
	d, err := Decode(in, name)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := d.Provenance()
	if err != nil {
		return nil, nil, nil, err
	}
	tr, err := d.Tree(nil)
	return d, p, tr, err
}

// checkTree checks what the read path relies on, independently of the
// decoder's own checks: keys strictly ascending and found by Stat,
// extents tiling each file inside the chunk table.
func checkTree(t *testing.T, tr *Tree) {
	t.Helper()
	x := &tr.Idx
	x.IDs = tr.Chain
	prev := ""
	for i := 0; i < x.N(); i++ {
		k := x.KeyAt(i)
		if i > 0 && k <= prev {
			t.Fatalf("keys not strictly ascending at %d: %q after %q", i, k, prev)
		}
		prev = k
		f := x.File(i)
		if g, ok := x.Stat(k); !ok || g != f {
			t.Fatalf("Stat(%q) does not find file %d", k, i)
		}
		var at int64
		for _, e := range x.Extents(i) {
			if e.Chunk < 0 || int(e.Chunk) >= len(tr.Chunks) || e.FileOff != at || e.Length < 0 || e.Off < -1 {
				t.Fatalf("file %q: bad extent %+v at %d", k, e, at)
			}
			at += e.Length
		}
		if at != f.Size {
			t.Fatalf("file %q: extents cover %d of %d", k, at, f.Size)
		}
	}
	x.List(ListParams{Delimiter: "/", MaxKeys: 1000})
}

// TestDecodeMutations is FuzzDecode's property as a plain test over
// deterministic random mutations of the golden file (1-4 bytes replaced,
// the trailer recomputed, so that every run reaches the decoder past the
// tree hash): each is refused with ErrBadIndex, or accepted, keeps the
// read path's invariants and encodes back to itself.
func TestDecodeMutations(t *testing.T) {
	_, _, _, golden := decodeGolden(t)
	body := golden[:len(golden)-TrailerBytes]
	r := rand.New(rand.NewPCG(6, 7))
	accepted := 0
	for it := 0; it < 3000; it++ {
		s := bytes.Clone(body)
		for k := 0; k < 1+r.IntN(4); k++ {
			s[r.IntN(len(s))] = byte(r.Uint32())
		}
		sum := TreeHash(s)
		in := append(s, sum[:]...)
		d, p, tr, err := decodeAll(in, "mut.widx")
		if err != nil {
			if !errors.Is(err, ErrBadIndex) {
				t.Fatalf("refusal does not wrap ErrBadIndex: %v", err)
			}
			continue
		}
		accepted++
		checkTree(t, tr)
		var buf bytes.Buffer
		if err := Write(&buf, "mut", tr, &Meta{Bucket: d.Bucket(), ManifestKey: d.ManifestKey(), Prov: p, Units: d.Units()}, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), in) {
			t.Fatalf("iteration %d: accepted file does not encode back to itself", it)
		}
	}
	if accepted == 0 || accepted == 3000 {
		t.Fatalf("%d of 3000 mutated files accepted: the mutations do not reach both outcomes", accepted)
	}
	t.Logf("%d of 3000 mutated files accepted", accepted)
}
