package index_test

import (
	"fmt"

	"github.com/wharf-s3/wharf/archiveview/internal/index"
)

// Map serves an index file in place: the decoder checks the file, the
// provenance says what it indexes, and Tree returns the columns, read
// from the mapping.
func ExampleMap() {
	d, m, err := index.Map("testdata/golden.widx", nil)
	if err != nil {
		panic(err)
	}
	p, err := d.Provenance()
	if err != nil {
		m.Unmap()
		panic(err)
	}
	t, err := d.Tree(nil)
	if err != nil {
		m.Unmap()
		panic(err)
	}
	x := &t.Idx
	fmt.Printf("%s/%s: %d manifests, %d files, in place %v\n", d.Bucket(), d.ManifestKey(), len(p.Sources), x.N(), x.InPlace())
	f, _ := x.Stat("dir/split.bin")
	fmt.Printf("%s: %d bytes in %d pieces\n", f.Key, f.Size, len(x.Extents(int(index.Ordinal(f)))))
	page := x.List(index.ListParams{Prefix: "plain/", MaxKeys: 10})
	for _, e := range page.Entries {
		fmt.Println(e.Name())
	}
	// Output:
	// bkt/g/uploads/20250305-00000002/manifest.json.gz: 2 manifests, 9 files, in place true
	// dir/split.bin: 40000 bytes in 3 pieces
	// plain/p.dat
	// plain/q.json
}
