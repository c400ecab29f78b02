package archiveview

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
)

// TestKeySort: the mention sort orders by (key, mention index) and marks
// exactly the first mention of each key, for keys that share long
// prefixes, are prefixes of each other, repeat, and end on and off the
// 4-byte digit boundaries.
func TestKeySort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "ab/é.-0"
	gen := func() string {
		var b strings.Builder
		switch r.IntN(4) {
		case 0:
			b.WriteString("common/prefix/that/is/long/")
		case 1:
			b.WriteString("abcd")
		}
		for n := r.IntN(12); n > 0; n-- {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		if b.Len() == 0 {
			b.WriteByte('x')
		}
		return b.String()
	}
	for _, n := range []int{0, 1, 2, 7, 100, 5000} {
		s := newFileStore()
		var keys []string
		for i := 0; i < n; i++ {
			k := gen()
			if i > 0 && r.IntN(5) == 0 {
				k = keys[r.IntN(len(keys))] // a repeat (another link's mention)
			}
			keys = append(keys, k)
			s.kpos.add(s.keys.addString(k))
		}
		order, starts := s.sortMentions()
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		slices.SortStableFunc(want, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
		for i := range order {
			if got := int(uint32(order[i])); got != want[i] {
				t.Fatalf("n=%d: position %d holds mention %d (%q), want %d (%q)", n, i, got, keys[got], want[i], keys[want[i]])
			}
			newKey := i == 0 || keys[want[i]] != keys[want[i-1]]
			if isStart(starts, i) != newKey {
				t.Fatalf("n=%d: position %d (%q): start mark %v, want %v", n, i, keys[want[i]], isStart(starts, i), newKey)
			}
		}
	}
}

// TestPagesAndArena: columns and arenas across page boundaries.
func TestPagesAndArena(t *testing.T) {
	var c pages[int64]
	for i := 0; i < 3*pageLen+5; i++ {
		c.add(int64(i) * 3)
	}
	for _, i := range []int{0, 63, 64, pageLen - 1, pageLen, 2*pageLen + 1, 3*pageLen + 4} {
		if c.at(i) != int64(i)*3 {
			t.Fatalf("at(%d) = %d", i, c.at(i))
		}
	}
	var sparse pages[uint32]
	sparse.padTo(10)
	sparse.add(7)
	if sparse.atOr(10) != 7 || sparse.atOr(3) != 0 || sparse.atOr(1000) != 0 {
		t.Fatal("lazily started column")
	}
	var a byteArena
	var pos []uint64
	var want []string
	for i := 0; i < 5000; i++ {
		k := strings.Repeat(string(rune('a'+i%26)), 1+i%700)
		pos = append(pos, a.addString(k))
		want = append(want, k)
	}
	for i, p := range pos {
		if string(a.at(p)) != want[i] {
			t.Fatalf("key %d differs", i)
		}
	}
	if len(a.p) < 2 {
		t.Fatal("the arena should span several pages")
	}
}

// TestOpenSourcePathAfterFiles: a manifest whose source_path (and prefix)
// come after its files — not the writer's order — resolves to the same
// tree: keys are derived once source_path is known.
func TestOpenSourcePathAfterFiles(t *testing.T) {
	dir := t.TempDir()
	res := rvPack(t, dir, rvSources(), cargopack.Options{FrameSize: 16 << 10, SplitSize: 50000})
	ctx := context.Background()
	store := backend.NewFileStore(dir)
	want, err := Open(ctx, store, rvBucket, res.ManifestKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(js, &fields); err != nil {
		t.Fatal(err)
	}
	// files first, then everything else (source_path and prefix last).
	var b strings.Builder
	b.WriteString(`{"files":` + string(fields["files"]))
	for k, v := range fields {
		if k != "files" && k != "source_path" && k != "prefix" {
			b.WriteString(`,"` + k + `":` + string(v))
		}
	}
	b.WriteString(`,"prefix":` + string(fields["prefix"]) + `,"source_path":` + string(fields["source_path"]) + `}`)
	h := &hoEnv{t: t, dir: dir, bucket: rvBucket}
	h.putJSON(res.ManifestKey, []byte(b.String()))
	got, err := Open(ctx, store, rvBucket, res.ManifestKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Files() != want.Files() || got.Files() == 0 {
		t.Fatalf("%d files, want %d", got.Files(), want.Files())
	}
	for i := 0; i < want.Files(); i++ {
		fw, fg := want.tree.Idx.File(i), got.tree.Idx.File(i)
		if fw != fg || !slices.Equal(want.fileExtents(int32(i)), got.fileExtents(int32(i))) {
			t.Fatalf("file %d: %+v vs %+v", i, fg, fw)
		}
	}
	piReadAll(t, got, rvSources(), rand.New(rand.NewPCG(3, 4)))
}

// TestStreamHeadSeen: the Head callback says whether source_path came
// before the files.
func TestStreamHeadSeen(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		seen bool
	}{
		{`{"version":"2.1","source_path":"/s","files":[{"path":"/s/a","size":1}]}`, true},
		{`{"version":"2.1","files":[{"path":"/s/a","size":1}],"source_path":"/s"}`, false},
		{`{"version":"2.1","Source_Path":"/s","files":[{"path":"/s/a","size":1}]}`, true},
	} {
		called := 0
		_, err := manifest.Stream(strings.NewReader(tc.doc), "k", manifest.Limits{}, manifest.StreamFuncs{
			Head: func(m *manifest.Manifest, seen func(string) bool) error {
				called++
				if seen("source_path") != tc.seen || seen("files") {
					t.Errorf("%s: seen(source_path) = %v", tc.doc, seen("source_path"))
				}
				return nil
			},
			Files: func(int, *manifest.FileEntry) error { return nil },
		})
		if err != nil || called != 1 {
			t.Fatalf("%s: err %v, Head called %d times", tc.doc, err, called)
		}
	}
}
