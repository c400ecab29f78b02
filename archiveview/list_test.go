package archiveview

import (
	"github.com/wharf-s3/wharf/archiveview/internal/index"

	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// lsIndex builds an index straight from a key set (sizes = key length).
func lsIndex(t testing.TB, keys []string) *index.Index {
	t.Helper()
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	x := &index.Index{Roots: []string{""}}
	var names strings.Builder
	for _, k := range keys {
		names.WriteString(k)
		x.Ends = append(x.Ends, uint32(names.Len()))
		x.Size = append(x.Size, int64(len(k)))
		x.Msec = append(x.Msec, rvTime.Unix())
		x.Mnsec = append(x.Mnsec, uint32(rvTime.Nanosecond()))
		x.Sum = append(x.Sum, [32]byte{})
		x.Flags = append(x.Flags, index.FlagIdentity)
		x.Chunk = append(x.Chunk, 0)
		x.Off = append(x.Off, -1)
		x.Root = append(x.Root, 0)
	}
	x.Names = names.String()
	return x
}

// lsReference is the brute-force listing: every key with the prefix,
// rolled up, deduplicated, sorted, then everything <= After dropped.
func lsReference(keys []string, p ListParams) []string {
	set := map[string]bool{}
	for _, k := range keys {
		if !strings.HasPrefix(k, p.Prefix) {
			continue
		}
		name := k
		if p.Delimiter != "" {
			if j := strings.Index(k[len(p.Prefix):], p.Delimiter); j >= 0 {
				name = k[:len(p.Prefix)+j+len(p.Delimiter)] + "\x00cp" // mark as prefix
			}
		}
		set[name] = true
	}
	var out []string
	for n := range set {
		if strings.TrimSuffix(n, "\x00cp") > p.After {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		return strings.Compare(strings.TrimSuffix(a, "\x00cp"), strings.TrimSuffix(b, "\x00cp"))
	})
	return out
}

// lsName renders an entry like the reference does.
func lsName(e ListEntry) string {
	if e.Prefix != "" {
		return e.Prefix + "\x00cp"
	}
	return e.File.Key
}

// lsPageAll pages through a listing with page size maxKeys and checks each
// page's contract; it returns every entry name.
func lsPageAll(t testing.TB, x *index.Index, p ListParams, maxKeys int) []string {
	t.Helper()
	var all []string
	p.MaxKeys = maxKeys
	for pages := 0; ; pages++ {
		if pages > x.N()+2 {
			t.Fatalf("paging does not terminate: %+v", p)
		}
		r := x.List(p)
		if len(r.Entries) > maxKeys {
			t.Fatalf("page of %d entries > MaxKeys %d", len(r.Entries), maxKeys)
		}
		for _, e := range r.Entries {
			if e.Prefix == "" {
				if e.File.Key == "" {
					t.Fatalf("empty entry in %+v", r)
				}
				if f, ok := (&Archive{tree: index.Tree{Idx: *x}}).Stat(e.File.Key); !ok || f != e.File {
					t.Fatalf("listed %q does not Stat the same", e.File.Key)
				}
			}
			all = append(all, lsName(e))
		}
		if !r.Truncated {
			if r.NextAfter != "" {
				t.Fatalf("NextAfter %q on the last page", r.NextAfter)
			}
			return all
		}
		if len(r.Entries) == 0 || r.NextAfter != r.Entries[len(r.Entries)-1].Name() {
			t.Fatalf("truncated page: NextAfter %q, entries %d", r.NextAfter, len(r.Entries))
		}
		p.After = r.NextAfter
	}
}

func TestListBasics(t *testing.T) {
	keys := []string{"a", "a/b", "a/b/c", "a/d", "a//x", "ab", "b/x", "b/y/z", "c", "dir/", "dir/f", "é/1", "\u00ff"}
	x := lsIndex(t, keys)
	tests := []struct {
		p     ListParams
		want  []string // names; prefixes end with "\x00cp"
		trunc bool
	}{
		{p: ListParams{MaxKeys: 1000}, want: slices.Sorted(slices.Values(keys))},
		{p: ListParams{MaxKeys: 0}, want: nil},
		{p: ListParams{MaxKeys: -1}, want: nil},
		{p: ListParams{Delimiter: "/", MaxKeys: 1000}, want: []string{"a", "a/\x00cp", "ab", "b/\x00cp", "c", "dir/\x00cp", "é/\x00cp", "\u00ff"}},
		{p: ListParams{Prefix: "a/", Delimiter: "/", MaxKeys: 1000}, want: []string{"a//\x00cp", "a/b", "a/b/\x00cp", "a/d"}},
		{p: ListParams{Prefix: "a", MaxKeys: 2}, want: []string{"a", "a//x"}, trunc: true},
		{p: ListParams{Prefix: "a", MaxKeys: 6}, want: []string{"a", "a//x", "a/b", "a/b/c", "a/d", "ab"}},
		{p: ListParams{Delimiter: "/", After: "a/", MaxKeys: 1000}, want: []string{"ab", "b/\x00cp", "c", "dir/\x00cp", "é/\x00cp", "\u00ff"}},
		{p: ListParams{Delimiter: "/", After: "a/b", MaxKeys: 1000}, want: []string{"ab", "b/\x00cp", "c", "dir/\x00cp", "é/\x00cp", "\u00ff"}},
		{p: ListParams{Delimiter: "/", After: "a", MaxKeys: 2}, want: []string{"a/\x00cp", "ab"}, trunc: true},
		{p: ListParams{Prefix: "dir/", Delimiter: "/", MaxKeys: 10}, want: []string{"dir/", "dir/f"}},
		{p: ListParams{Prefix: "zzz", MaxKeys: 10}, want: nil},
		{p: ListParams{Prefix: "b", After: "a", MaxKeys: 10}, want: []string{"b/x", "b/y/z"}},
		{p: ListParams{Prefix: "b", After: "c", MaxKeys: 10}, want: nil},
		{p: ListParams{Delimiter: "/b", MaxKeys: 20}, want: []string{"a", "a/b\x00cp", "a/d", "a//x", "ab", "b/x", "b/y/z", "c", "dir/", "dir/f", "é/1", "\u00ff"}},
		// the last entry exactly fills the page: not truncated
		{p: ListParams{Prefix: "b/", MaxKeys: 2}, want: []string{"b/x", "b/y/z"}},
	}
	for _, tc := range tests {
		r := x.List(tc.p)
		var got []string
		for _, e := range r.Entries {
			got = append(got, lsName(e))
		}
		slices.SortStableFunc(tc.want, func(a, b string) int {
			return strings.Compare(strings.TrimSuffix(a, "\x00cp"), strings.TrimSuffix(b, "\x00cp"))
		})
		if !slices.Equal(got, tc.want) || r.Truncated != tc.trunc {
			t.Errorf("list(%+v) = %q truncated %v, want %q truncated %v", tc.p, got, r.Truncated, tc.want, tc.trunc)
		}
		if ref := lsReference(keys, tc.p); tc.p.MaxKeys > 0 && !tc.trunc && !slices.Equal(ref, got) {
			t.Errorf("reference disagrees with the table for %+v: %q", tc.p, ref)
		}
	}
}

// lsRandomKeys draws keys over a small alphabet so prefixes, delimiters and
// nesting collide often.
func lsRandomKeys(r *rand.Rand, n int) []string {
	alpha := []string{"a", "b", "/", "-", "ab", "é", "\xff", "//", "z"}
	keys := make([]string, 0, n)
	for range n {
		var b strings.Builder
		for l := 1 + r.IntN(6); l > 0; l-- {
			b.WriteString(alpha[r.IntN(len(alpha))])
		}
		keys = append(keys, b.String())
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func lsRandomParams(r *rand.Rand, keys []string) ListParams {
	pick := func() string {
		switch r.IntN(4) {
		case 0:
			return ""
		case 1:
			k := keys[r.IntN(len(keys))]
			return k[:r.IntN(len(k)+1)]
		case 2:
			return keys[r.IntN(len(keys))]
		}
		return []string{"a", "b/", "a/", "ab", "zz", "\xff", "a-"}[r.IntN(7)]
	}
	delims := []string{"", "/", "/", "-", "ab", "//", "é", "b/"}
	return ListParams{Prefix: pick(), Delimiter: delims[r.IntN(len(delims))], After: pick()}
}

// TestListAgainstReference pages through random listings with every page
// size and compares with the brute-force reference: every key once, every
// common prefix once, byte order, paging contract.
func TestListAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		keys := lsRandomKeys(r, 1+r.IntN(60))
		x := lsIndex(t, keys)
		for range 10 {
			p := lsRandomParams(r, keys)
			want := lsReference(keys, p)
			for _, mk := range []int{1, 2, 3, 7, 1000} {
				got := lsPageAll(t, x, p, mk)
				if !slices.Equal(got, want) {
					t.Fatalf("round %d keys %q params %+v maxKeys %d:\n got  %q\n want %q", round, keys, p, mk, got, want)
				}
			}
		}
	}
}

func FuzzList(f *testing.F) {
	f.Add("a\na/b\na/b/c\nab\nb", "a", "/", "", 2)
	f.Add("x//y\nx/y\nx-y", "", "//", "x", 1)
	f.Add("\xff\n\xfe/a\né/é", "", "é", "\xfe", 3)
	f.Add("a", "", "", "", 0)
	f.Fuzz(func(t *testing.T, keyList, prefix, delim, after string, maxKeys int) {
		var keys []string
		for k := range strings.SplitSeq(keyList, "\n") {
			if k != "" {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 || len(keys) > 200 {
			return
		}
		x := lsIndex(t, keys)
		keys = slices.Compact(slices.Sorted(slices.Values(keys)))
		p := ListParams{Prefix: prefix, Delimiter: delim, After: after}
		want := lsReference(keys, p)
		mk := maxKeys%50 + 1
		if mk <= 0 {
			mk += 50
		}
		if got := lsPageAll(t, x, p, mk); !slices.Equal(got, want) {
			t.Fatalf("params %+v maxKeys %d: got %q want %q", p, mk, got, want)
		}
		p.MaxKeys = 0
		if r := x.List(p); len(r.Entries) != 0 || r.Truncated {
			t.Fatalf("MaxKeys 0 gave %+v", r)
		}
	})
}

// TestListOpenedArchive lists a real archive written by cargopack.
func TestListOpenedArchive(t *testing.T) {
	dir := t.TempDir()
	src := rvSources()
	res := rvPack(t, dir, src, cargopack.Options{FrameSize: 1 << 20})
	a, err := rvOpen(t, dir, res.ManifestKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := a.List(ListParams{Delimiter: "/", MaxKeys: 1000})
	var got []string
	for _, e := range r.Entries {
		got = append(got, e.Name())
	}
	want := []string{"a.txt", "big/", "dir/", "space name/", "z/"}
	if !slices.Equal(got, want) || r.Truncated {
		t.Errorf("root listing %q (truncated %v), want %q", got, r.Truncated, want)
	}
	r = a.List(ListParams{Prefix: "dir/sub/", MaxKeys: 1})
	if len(r.Entries) != 1 || r.Entries[0].File.Key != "dir/sub/c.bin" || !r.Truncated || r.NextAfter != "dir/sub/c.bin" {
		t.Errorf("probe = %+v", r)
	}
	if r.Entries[0].File.Size != int64(len(src["dir/sub/c.bin"])) {
		t.Errorf("listed size %d", r.Entries[0].File.Size)
	}
}
