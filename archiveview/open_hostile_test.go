package archiveview

// Hostile-archive cases (see hostile_test.go for the harness and what every
// case must satisfy).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
	"github.com/wharf-s3/wharf/archiveview/manifest"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestHostileJSONSize: just over MaxJSONBytes is refused, exactly at it
// opens (the limit is on the gunzipped JSON).
func TestHostileJSONSize(t *testing.T) {
	h := hoPack(t, t.TempDir(), hoBaseFiles(), hoFramed)
	m := h.manifest()
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	h.putJSON(h.mkey, js)
	n := int64(len(js))
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{n, true}, {n - 1, false}, {n / 2, false}} {
		fs := faults.NewFaulty(backend.NewFileStore(h.dir), faults.FaultConfig{})
		a, err := Open(context.Background(), fs, h.bucket, h.mkey, Options{Name: hoName, Limits: manifest.Limits{MaxJSONBytes: tc.limit}})
		switch {
		case tc.ok && err != nil:
			t.Errorf("limit %d (JSON %d bytes): %v", tc.limit, n, err)
		case !tc.ok && err == nil:
			t.Errorf("limit %d (JSON %d bytes): opened", tc.limit, n)
		case !tc.ok && (!errors.Is(err, manifest.ErrTooLarge) || !strings.Contains(err.Error(), h.mkey)):
			t.Errorf("limit %d: error %v does not wrap ErrTooLarge or name %s", tc.limit, err, h.mkey)
		}
		if a != nil {
			a.Close()
		}
		hoCheckRequests(t, fs)
	}
	// A gzip bomb: 64 MiB of spaces in front of the JSON, gzipped to
	// ~64 KiB, against a 1 MiB JSON limit: refused without inflating it all.
	pad := bytes.Repeat([]byte(" "), 64<<20)
	h.putJSON(h.mkey, append(pad, js...))
	runtime.GC()
	a0 := hoTotalAlloc()
	_, err = Open(context.Background(), backend.NewFileStore(h.dir), h.bucket, h.mkey, Options{Name: hoName, Limits: manifest.Limits{MaxJSONBytes: 1 << 20}})
	if !errors.Is(err, manifest.ErrTooLarge) {
		t.Errorf("gzip bomb: %v, want ErrTooLarge", err)
	}
	if d := hoTotalAlloc() - a0; d > 32<<20 {
		t.Errorf("gzip bomb: Open allocated %d bytes", d)
	}
}

// TestHostile100kManifestOpens: a manifest of 100,000 entries (direct
// objects, which Open never touches) opens and lists within seconds: Open
// takes at most 3x (+100ms) what decoding the same manifest's JSON into a
// manifest.Manifest takes, measured in the same run (the baseline: any
// Open must at least decode it; Open measured 0.9-1.9x of it, 0.4-1.4 s
// without -race, 6-8 s under it). A miss is measured once more (a loaded
// machine); only two misses fail.
func TestHostile100kManifestOpens(t *testing.T) {
	h := hoPack(t, t.TempDir(), map[string][]byte{"a.txt": hoText(1, 100)}, cargopack.Options{Direct: true})
	m := h.manifest()
	proto := m.Files[0]
	const n = 100_000
	m.Files = make([]manifest.FileEntry, n)
	for i := range m.Files {
		fe := proto
		rel := fmt.Sprintf("d%03d/f%06d.txt", i%512, i)
		fe.Path = m.SourcePath + "/" + rel
		fe.S3Key = path.Dir(proto.S3Key) + "/" + rel
		m.Files[i] = fe
	}
	m.TotalFiles = n
	h.putManifest(m)
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var misses []string
	for len(misses) < 2 {
		t0 := time.Now()
		var decoded manifest.Manifest
		if err := json.Unmarshal(js, &decoded); err != nil {
			t.Fatal(err)
		}
		base := time.Since(t0)
		start := time.Now()
		a, err := Open(context.Background(), backend.NewFileStore(h.dir), h.bucket, h.mkey, Options{Name: hoName})
		el := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if a.Files() != n {
			t.Fatalf("Files() = %d, want %d", a.Files(), n)
		}
		if k := len(hoAllKeysFast(a)); k != n {
			t.Fatalf("listed %d keys", k)
		}
		t.Logf("100k-entry manifest: Open %v, Open+List %v; decoding its JSON %v", el, time.Since(start), base)
		a.Close()
		if el <= 3*base+100*time.Millisecond {
			return
		}
		misses = append(misses, fmt.Sprintf("%v against a decode of %v", el, base))
	}
	t.Errorf("Open of a 100k-entry manifest took %s, twice", strings.Join(misses, ", then "))
}

func hoAllKeysFast(a *Archive) []string {
	var out []string
	p := ListParams{MaxKeys: 1000}
	for {
		res := a.List(p)
		for _, e := range res.Entries {
			out = append(out, e.Name())
		}
		if !res.Truncated {
			return out
		}
		p.After = res.NextAfter
	}
}

// hoChainPack writes upload id with previous prev into dir.
func hoChainPack(t *testing.T, dir, id, prev string, files map[string][]byte) *hoEnv {
	return hoPack(t, dir, files, cargopack.Options{FrameSize: 16 << 10, UploadID: id, PreviousManifestID: prev, SyncType: "incremental"})
}

func TestHostileChains(t *testing.T) {
	f1 := map[string][]byte{"a.txt": hoText(1, 500)}
	f2 := map[string][]byte{"b.txt": hoText(2, 500)}
	cases := []struct {
		name  string
		build func(t *testing.T, dir string) *hoEnv
		lim   manifest.Limits
		ok    []string // keys served (nil: Open must fail with ErrBrokenChain)
		has   []string
	}{
		{name: "cycle A->B->A", build: func(t *testing.T, dir string) *hoEnv {
			hoChainPack(t, dir, "20250304-bbbbbbbb", "20250304-aaaaaaaa", f2)
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-bbbbbbbb", f1)
		}, has: []string{"20250304-aaaaaaaa", "cycle"}},
		{name: "self reference", build: func(t *testing.T, dir string) *hoEnv {
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-aaaaaaaa", f1)
		}, has: []string{"cycle"}},
		{name: "missing ancestor", build: func(t *testing.T, dir string) *hoEnv {
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-deadbeef", f1)
		}, has: []string{"20250304-deadbeef"}},
		{name: "ancestor with traversal id", build: func(t *testing.T, dir string) *hoEnv {
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "../../../../etc", f1)
		}, has: []string{"../../../../etc"}},
		{name: "ancestor is another upload's manifest", build: func(t *testing.T, dir string) *hoEnv {
			// B's manifest is stored where C would be: upload_id disagrees.
			b := hoChainPack(t, dir, "20250304-bbbbbbbb", "", f2)
			cKey := strings.Replace(b.mkey, "20250304-bbbbbbbb", "20250304-cccccccc", 1)
			if err := os.MkdirAll(filepath.Dir(b.objPath(cKey)), 0o755); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(b.objPath(b.mkey))
			os.WriteFile(b.objPath(cKey), data, 0o644)
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-cccccccc", f1)
		}, has: []string{"20250304-cccccccc"}},
		{name: "chain deeper than the limit", lim: manifest.Limits{MaxChainDepth: 2}, build: func(t *testing.T, dir string) *hoEnv {
			hoChainPack(t, dir, "20250304-00000001", "", map[string][]byte{"1.txt": hoText(1, 10)})
			hoChainPack(t, dir, "20250304-00000002", "20250304-00000001", map[string][]byte{"2.txt": hoText(2, 10)})
			hoChainPack(t, dir, "20250304-00000003", "20250304-00000002", map[string][]byte{"3.txt": hoText(3, 10)})
			return hoChainPack(t, dir, "20250304-00000004", "20250304-00000003", map[string][]byte{"4.txt": hoText(4, 10)})
		}, has: []string{"limit"}},
		{name: "chain at the limit opens", lim: manifest.Limits{MaxChainDepth: 3}, build: func(t *testing.T, dir string) *hoEnv {
			hoChainPack(t, dir, "20250304-00000001", "", map[string][]byte{"1.txt": hoText(1, 10)})
			hoChainPack(t, dir, "20250304-00000002", "20250304-00000001", map[string][]byte{"2.txt": hoText(2, 10)})
			hoChainPack(t, dir, "20250304-00000003", "20250304-00000002", map[string][]byte{"3.txt": hoText(3, 10)})
			return hoChainPack(t, dir, "20250304-00000004", "20250304-00000003", map[string][]byte{"4.txt": hoText(4, 10)})
		}, ok: []string{"1.txt", "2.txt", "3.txt", "4.txt"}},
		{name: "ancestor has an unknown version", build: func(t *testing.T, dir string) *hoEnv {
			b := hoChainPack(t, dir, "20250304-bbbbbbbb", "", f2)
			m := b.manifest()
			m.Version = "3.0"
			b.putManifest(m)
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-bbbbbbbb", f1)
		}, has: []string{"20250304-bbbbbbbb"}},
		{name: "ancestor is encrypted", build: func(t *testing.T, dir string) *hoEnv {
			hoPack(t, dir, f2, cargopack.Options{UploadID: "20250304-bbbbbbbb", EncryptedManifest: true})
			return hoChainPack(t, dir, "20250304-aaaaaaaa", "20250304-bbbbbbbb", f1)
		}, has: []string{"20250304-bbbbbbbb"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			h := tc.build(t, dir)
			files := map[string][]byte{}
			for i := 1; i <= 4; i++ {
				files[fmt.Sprintf("%d.txt", i)] = hoText(uint64(i), 10)
			}
			ctx, cancel := context.WithTimeout(context.Background(), hoDeadline)
			defer cancel()
			fs := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
			a, err := Open(ctx, fs, h.bucket, h.mkey, Options{Name: hoName, Limits: tc.lim})
			defer hoCheckRequests(t, fs)
			if tc.ok == nil {
				if err == nil {
					a.Close()
					t.Fatal("Open succeeded")
				}
				if !errors.Is(err, ErrBrokenChain) {
					t.Errorf("error does not wrap ErrBrokenChain: %v", err)
				}
				for _, s := range append([]string{h.mkey}, tc.has...) {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error does not name %q: %v", s, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			for _, k := range tc.ok {
				f, ok := a.Stat(k)
				if !ok {
					t.Errorf("%s not found", k)
					continue
				}
				r := hoRead(ctx, a, f, 0, f.Size, true)
				if r.err != nil || !bytes.Equal(r.got, files[k]) {
					t.Errorf("%s: %v (bytes equal: %v)", k, r.err, bytes.Equal(r.got, files[k]))
				}
			}
		})
	}
}

// TestHostileTraversalChain: a previous_manifest_id that is not one key
// segment ("../../../../etc") is refused at Open, and the store is never
// asked for a key with a ".." segment (issue 7 bug 5).
func TestHostileTraversalChain(t *testing.T) {
	dir := t.TempDir()
	h := hoChainPack(t, dir, "20250304-aaaaaaaa", "../../../../etc", map[string][]byte{"a.txt": hoText(1, 500)})
	fs := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
	a, err := Open(context.Background(), fs, h.bucket, h.mkey, Options{Name: hoName})
	if err == nil {
		a.Close()
		t.Fatal("Open succeeded")
	}
	if !errors.Is(err, ErrBrokenChain) || !errors.Is(err, manifest.ErrUnsafePath) || !strings.Contains(err.Error(), h.mkey) {
		t.Errorf("Open error: %v", err)
	}
	hoCheckRequests(t, fs)
}
