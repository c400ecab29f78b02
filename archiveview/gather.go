package archiveview

// The index builder: the resolver's survivors gathered into the columns
// of an index.Index.

import (
	"fmt"
	"math"

	"github.com/wharf-s3/wharf/archiveview/internal/index"
)

// treeBuilder gathers an index from a fileStore: the survivors' keys
// first, then the placed files (flags, chunks, offsets, roots, extents),
// then the other columns, each gathered in key order and (when consuming
// the store) released from the store once gathered.
type treeBuilder struct {
	x        index.Index
	fs       *fileStore
	roots    map[uint32]uint32 // store root id -> index root id
	extNames []byte
	anyMD5   bool
}

// gatherNames sets the index's keys: those of files (in key order, whose
// keys are mentions fileMention(f)).
func (b *treeBuilder) gatherNames(files []uint32, fileMention func(int) int) error {
	total := 0
	for _, f := range files {
		total += len(b.fs.key(fileMention(int(f))))
		if total > math.MaxUint32 {
			return fmt.Errorf("%w: keys exceed 4 GiB in total", ErrInvalidTree)
		}
	}
	names := make([]byte, 0, total)
	ends := make([]uint32, len(files))
	var prev []byte
	for i, f := range files {
		k := b.fs.key(fileMention(int(f)))
		if i > 0 && string(k) <= string(prev) {
			return fmt.Errorf("%w: keys out of order at %q", ErrInvalidTree, k)
		}
		names = append(names, k...)
		ends[i] = uint32(len(names))
		prev = names[len(names)-len(k):]
	}
	b.x.Names = unsafeString(names) // never written again
	b.x.Ends = ends
	return nil
}

// startPlacing allocates the columns add fills, for n files.
func (b *treeBuilder) startPlacing(n int) {
	b.x.Flags = make([]uint8, n)
	b.x.Chunk = make([]int32, n)
	b.x.Off = make([]int64, n)
	b.x.Root = make([]uint32, n)
	b.roots = map[uint32]uint32{}
}

// add records survivor s (file f) as placed. Its final sha256 (or
// identity digest) is written over the store's sum of f, and a split
// file's newest part time over f's time: f is this key's alone, and no
// later placement reads them (a duplicate reads its original's sum only
// when the original's manifest verifies checksums, and such an original
// keeps its sum).
func (b *treeBuilder) add(s, f int, rec fileRec) error {
	x := &b.x
	var fl uint8
	var sum [32]byte
	switch {
	case rec.hasSum:
		fl |= index.FlagSum
		sum = rec.sum
	default:
		fl |= index.FlagIdentity
		copy(sum[:], rec.identity[:])
	}
	if rec.hasMD5 {
		fl |= index.FlagMD5
		b.anyMD5 = true
	}
	b.fs.sum.set(f, sum)
	b.fs.msec.set(f, rec.msec)
	b.fs.mnsec.set(f, rec.mnsec)
	if rec.isSingle {
		ri, ok := b.roots[rec.root]
		if !ok {
			ri = uint32(len(x.Roots))
			b.roots[rec.root] = ri
			x.Roots = append(x.Roots, b.fs.roots[rec.root])
		}
		x.Chunk[s], x.Off[s], x.Root[s] = rec.single.Chunk, rec.single.Off, ri
	} else {
		fl |= index.FlagMulti
		if rec.split {
			fl |= index.FlagSplit
		}
		if len(x.Exts)+len(rec.exts) > math.MaxInt32 || len(b.extNames) > math.MaxUint32-len(rec.exts)*maxArenaKey*2 {
			return fmt.Errorf("%w: too many extents", ErrInvalidTree)
		}
		x.Chunk[s] = int32(len(rec.exts))
		x.Off[s] = int64(len(x.Exts))
		for _, e := range rec.exts {
			r := index.ExtRec{FileOff: e.FileOff, Off: e.Off, Length: e.Length, Sum: e.Sum, Chunk: e.Chunk,
				Name: uint32(len(b.extNames)), NameLen: uint32(len(e.TarName))}
			if e.HasSum {
				r.HasSum = 1
			}
			b.extNames = append(b.extNames, e.TarName...)
			x.Exts = append(x.Exts, r)
		}
	}
	x.Flags[s] = fl
	return nil
}

// gatherColumns sets the remaining columns from the store, in key order
// (files). With release set, each store column is dropped once gathered
// and release is called (the store is consumed). linkOf, when not nil,
// gives the link column.
func (b *treeBuilder) gatherColumns(files []uint32, release func(), linkOf func(int) int32) error {
	fs, x := b.fs, &b.x
	consume := release != nil
	x.Size = gather(&fs.size, files)
	x.Msec = gather(&fs.msec, files)
	if consume {
		fs.size, fs.msec = pages[int64]{}, pages[int64]{}
		fs.bits, fs.s3, fs.aoff, fs.root = pages[uint16]{}, pages[uint32]{}, pages[int64]{}, pages[uint32]{}
		release()
	}
	x.Mnsec = gather(&fs.mnsec, files)
	x.Sum = gather(&fs.sum, files)
	if consume {
		fs.mnsec, fs.sum = pages[uint32]{}, pages[[32]byte]{}
		release()
	}
	if b.anyMD5 {
		x.MD5 = make([][16]byte, len(files))
		for s, f := range files {
			if x.Flags[s]&index.FlagMD5 != 0 {
				x.MD5[s] = fs.md5.atOr(int(f))
			}
		}
	}
	ctypeMap := map[uint32]uint32{0: 0} // store content type id -> index id
	for s, f := range files {
		c := fs.ctype.atOr(int(f))
		if c == 0 && x.Ctype == nil {
			continue
		}
		if x.Ctype == nil {
			x.Ctype = make([]uint32, len(files))
			x.Ctypes = []string{""}
		}
		ci, ok := ctypeMap[c]
		if !ok {
			ci = uint32(len(x.Ctypes))
			ctypeMap[c] = ci
			x.Ctypes = append(x.Ctypes, fs.ctypes[c])
		}
		x.Ctype[s] = ci
	}
	if linkOf != nil {
		x.Link = make([]uint16, len(files))
		for s, f := range files {
			l := linkOf(int(f))
			if l < 0 || l > math.MaxUint16 {
				return fmt.Errorf("%w: chain link %d out of range", ErrInvalidTree, l)
			}
			x.Link[s] = uint16(l)
		}
	}
	x.ExtNames = string(b.extNames)
	return nil
}

// gather returns c's elements at files, in order.
func gather[T any](c *pages[T], files []uint32) []T {
	out := make([]T, len(files))
	for s, f := range files {
		out[s] = c.at(int(f))
	}
	return out
}
