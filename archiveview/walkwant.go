package archiveview

// walkwant.go tells a chunk's tar walk which members an archive may ask
// for (chunkio.Options.TarMembers), so that the walk remembers the names
// the manifest lists and nothing a hostile chunk adds.

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/wharf-s3/wharf/archiveview/internal/index"
)

// tarWant is the set of (chunk, tar name) of every extent without an
// archive_offset in the indexes a Set serves, as seeded 64-bit hashes,
// sorted: 8 bytes per such extent, built once, at the first walk. A hash
// collision only makes a walk keep one more name.
type tarWant struct {
	seed    maphash.Seed
	indexes func() []*index.Index // the indexes whose extents read the Set

	once sync.Once
	sums []uint64
	err  error
}

func newTarWant(indexes func() []*index.Index) *tarWant {
	return &tarWant{seed: maphash.MakeSeed(), indexes: indexes}
}

// hash is the set's hash of tar member name in chunk ci, the name given
// in pieces (root and key) so that no string is built.
func (w *tarWant) hash(ci int32, name ...string) uint64 {
	var h maphash.Hash
	h.SetSeed(w.seed)
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(ci))
	h.Write(b[:])
	for _, s := range name {
		h.WriteString(s)
	}
	return h.Sum64()
}

func (w *tarWant) build() {
	var sums []uint64
	for _, x := range w.indexes() {
		err := x.Guard(func() {
			for i := range x.N() {
				if x.Flags[i]&index.FlagMulti == 0 {
					if x.Off[i] < 0 {
						sums = append(sums, w.hash(x.Chunk[i], x.Roots[x.Root[i]], x.RawKey(i)))
					}
					continue
				}
				start := x.Off[i]
				for _, r := range x.Exts[start : start+int64(x.Chunk[i])] {
					if r.Off < 0 {
						sums = append(sums, w.hash(r.Chunk, x.ExtNames[r.Name:r.Name+r.NameLen]))
					}
				}
			}
		})
		if err != nil {
			w.err = err
			return
		}
	}
	slices.Sort(sums)
	w.sums = slices.Compact(sums)
}

// members is chunkio.Options.TarMembers.
func (w *tarWant) members(ci int32) (func(string) bool, error) {
	w.once.Do(w.build)
	if w.err != nil {
		return nil, w.err
	}
	return func(name string) bool {
		_, ok := slices.BinarySearch(w.sums, w.hash(ci, name))
		return ok
	}, nil
}
