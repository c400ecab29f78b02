package archiveview

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/backend/faults"
)

// TestEachIdentity: every shape's files, in memory and from an index file
// mapped in place, have the identity EachIdentity gives in key order: its
// SHA256Hex and ETag are the File's, and two files' identities are equal
// exactly when their size, SHA256 and ETag are.
func TestEachIdentity(t *testing.T) {
	for _, sh := range piShapes() {
		t.Run(sh.name, func(t *testing.T) {
			dir, key, _ := piSetup(t, sh)
			store := backend.NewFileStore(dir)
			a, err := Open(context.Background(), store, rvBucket, key, Options{Name: "served"})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			path := filepath.Join(t.TempDir(), "index")
			if err := a.WriteIndexFile(path); err != nil {
				t.Fatal(err)
			}
			m, err := OpenIndexFile(context.Background(), store, path, Options{Name: "mapped"})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, arc := range []*Archive{a, m} {
				var files []File
				for after := ""; ; {
					r := arc.List(ListParams{After: after, MaxKeys: 100})
					for _, e := range r.Entries {
						files = append(files, e.File)
					}
					if !r.Truncated {
						break
					}
					after = r.NextAfter
				}
				var ids []FileIdentity
				err := arc.EachIdentity(func(k string, id FileIdentity) error {
					f := files[len(ids)]
					if k != f.Key || id.Size != f.Size || id.SHA256Hex() != f.SHA256 || id.ETag() != f.ETag {
						t.Errorf("%s: identity %q %d %q %q, File %q %d %q %q", arc.Name(), k, id.Size, id.SHA256Hex(), id.ETag(), f.Key, f.Size, f.SHA256, f.ETag)
					}
					ids = append(ids, id)
					return nil
				})
				if err != nil || len(ids) != len(files) {
					t.Fatalf("%s: %d identities of %d files: %v", arc.Name(), len(ids), len(files), err)
				}
				for i := range ids {
					for j := range ids {
						fi, fj := files[i], files[j]
						want := fi.Size == fj.Size && fi.SHA256 == fj.SHA256 && fi.ETag == fj.ETag
						if (ids[i] == ids[j]) != want || ids[i].SameETag(ids[j]) != (fi.ETag == fj.ETag) {
							t.Errorf("%s: %s and %s: identities equal %v, files %v", arc.Name(), fi.Key, fj.Key, ids[i] == ids[j], want)
						}
					}
				}
			}
			stop := errors.New("stop")
			n := 0
			if err := a.EachIdentity(func(string, FileIdentity) error { n++; return stop }); err != stop || n != 1 {
				t.Errorf("fn's error: %v after %d calls", err, n)
			}
		})
	}
}

// TestObjectKeys: ObjectKeys names the objects FileStorage reports for
// every file of every shape, in the same order, with no request.
func TestObjectKeys(t *testing.T) {
	for _, sh := range piShapes() {
		t.Run(sh.name, func(t *testing.T) {
			dir, key, _ := piSetup(t, sh)
			fa := faults.NewFaulty(backend.NewFileStore(dir), faults.FaultConfig{})
			a, err := Open(context.Background(), fa, rvBucket, key, Options{Name: "served"})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			r := a.List(ListParams{MaxKeys: 100000})
			for _, e := range r.Entries {
				before := fa.Requests("")
				keys, err := a.ObjectKeys(e.File)
				if err != nil || fa.Requests("") != before {
					t.Fatalf("%s: %v, %d requests", e.File.Key, err, fa.Requests("")-before)
				}
				st, err := a.FileStorage(context.Background(), e.File)
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, o := range st.Objects {
					want = append(want, o.Key)
				}
				if strings.Join(keys, " ") != strings.Join(want, " ") || len(keys) == 0 && e.File.Size > 0 {
					t.Errorf("%s: objects %q, FileStorage %q", e.File.Key, keys, want)
				}
			}
		})
	}
}
