package index

// The invariants of a decoded tree's files and tombstones (Decoder.Tree):
// what the resolver guarantees of every tree it builds, checked on an
// index file's columns before they are used.

import (
	"fmt"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// checkExtent checks one stored piece against its chunk.
func checkExtent(e *Extent, chunks []chunkio.Chunk, uncomp []int64) error {
	if e.Chunk < 0 || int(e.Chunk) >= len(chunks) {
		return fmt.Errorf("chunk index %d out of range", e.Chunk)
	}
	ch := &chunks[e.Chunk]
	switch {
	case e.Length < 0 || e.Off < -1:
		return fmt.Errorf("offset %d length %d", e.Off, e.Length)
	case ch.Kind == chunkio.Direct:
		if e.Off != 0 || e.Length != ch.Size || e.TarName != "" {
			return fmt.Errorf("direct object %s: offset %d length %d (object %d bytes)", ch.Key, e.Off, e.Length, ch.Size)
		}
	case e.TarName == "":
		return fmt.Errorf("no tar name in chunk %s", ch.Key)
	case ch.Kind == chunkio.FramedZstd && e.Off >= 0:
		if e.Off > uncomp[e.Chunk] || e.Length > uncomp[e.Chunk]-e.Off {
			return fmt.Errorf("bytes [%d,+%d) outside chunk %s (%d bytes)", e.Off, e.Length, ch.Key, uncomp[e.Chunk])
		}
	}
	return nil
}

// checkFiles checks every file against the tree's invariants.
func (d *Decoder) checkFiles(x *Index, chunks []chunkio.Chunk, uncomp []int64) error {
	n := x.N()
	nRoots, nCtypes := uint32(len(x.Roots)), uint32(len(x.Ctypes))
	for i := range x.Exts {
		r := &x.Exts[i]
		if uint64(r.Name)+uint64(r.NameLen) > uint64(len(x.ExtNames)) {
			return d.errf("Extent %d: tar name [%d,+%d) past %d name bytes", i, r.Name, r.NameLen, len(x.ExtNames))
		}
		e := r.Extent(x)
		if err := checkExtent(&e, chunks, uncomp); err != nil {
			return d.errf("Extent %d: %v", i, err)
		}
	}
	var prevStart, prevEnd uint32
	nextExt := int64(0)
	for i := 0; i < n; i++ {
		end := x.Ends[i]
		if end <= prevEnd || uint64(end) > d.h.namesLen {
			return d.errf("file %d: key end %d (previous %d, %d name bytes)", i, end, prevEnd, d.h.namesLen)
		}
		if i > 0 && x.Names[prevEnd:end] <= x.Names[prevStart:prevEnd] {
			return d.errf("file %d: key %q does not sort after %q", i, x.Names[prevEnd:end], x.Names[prevStart:prevEnd])
		}
		if err := manifest.CheckVirtualKey(x.Names[prevEnd:end]); err != nil {
			return d.errf("file %d: %v", i, err)
		}
		prevStart, prevEnd = prevEnd, end
		fsize := x.Size[i]
		fl := x.Flags[i]
		ch, off, root := x.Chunk[i], x.Off[i], x.Root[i]
		if x.Ctype != nil && x.Ctype[i] >= nCtypes {
			return d.errf("file %d: content type %d of %d", i, x.Ctype[i], nCtypes)
		}
		switch {
		case fsize < 0 || x.Mnsec[i] >= 1e9:
			return d.errf("file %d: size %d, nanoseconds %d", i, fsize, x.Mnsec[i])
		case fl&^knownFlags != 0:
			return d.errf("file %d: unknown flags %#x", i, fl)
		case (fl&FlagSum != 0) == (fl&FlagIdentity != 0):
			return d.errf("file %d: flags %#x: exactly one of checksum and identity", i, fl)
		case fl&FlagMD5 != 0 && x.MD5 == nil:
			return d.errf("file %d: md5 flag without an md5 column", i)
		case fl&FlagSplit != 0 && fl&FlagMulti == 0:
			return d.errf("file %d: split file without extents", i)
		}
		if fl&FlagMulti == 0 {
			e := Extent{Chunk: ch, Off: off, Length: fsize}
			if root >= nRoots {
				return d.errf("file %d: root %d of %d", i, root, nRoots)
			}
			if ch >= 0 && int(ch) < len(chunks) && chunks[ch].Kind != chunkio.Direct {
				e.TarName = "-" // roots[root]+key, never empty (keys are not)
			}
			if err := checkExtent(&e, chunks, uncomp); err != nil {
				return d.errf("file %d: %v", i, err)
			}
			continue
		}
		if ch < 1 || off != nextExt || int64(ch) > int64(len(x.Exts))-off {
			return d.errf("file %d: extents [%d,+%d) (expected to start at %d, %d extents)", i, off, ch, nextExt, len(x.Exts))
		}
		nextExt += int64(ch)
		var at int64
		for j := off; j < off+int64(ch); j++ {
			e := &x.Exts[j]
			if e.FileOff != at || e.Length > fsize-at {
				return d.errf("file %d: Extent at %d+%d does not continue at %d within %d bytes", i, e.FileOff, e.Length, at, fsize)
			}
			if fl&FlagSplit != 0 && e.Length == 0 {
				return d.errf("file %d: empty split part", i)
			}
			at += e.Length
		}
		if at != fsize {
			return d.errf("file %d: extents cover %d of %d bytes", i, at, fsize)
		}
	}
	if uint64(prevEnd) != d.h.namesLen {
		return d.errf("names: %d bytes, keys use %d", d.h.namesLen, prevEnd)
	}
	if nextExt != int64(len(x.Exts)) {
		return d.errf("%d extents, files use %d", len(x.Exts), nextExt)
	}
	return nil
}

// checkTombstones checks the tombstone table and the link column: keys
// strictly ascending, links within the chain, no key both a file and
// deleted.
func (d *Decoder) checkTombstones(x *Index, nChain int) error {
	for i, l := range x.Link {
		if int(l) >= nChain {
			return d.errf("file %d: chain link %d of %d", i, l, nChain)
		}
	}
	t := &x.Tombs
	var prev uint32
	for i := range t.Ends {
		if t.Ends[i] <= prev || uint64(t.Ends[i]) > d.h.tombNamesLen {
			return d.errf("tombstone %d: end %d (previous %d, %d name bytes)", i, t.Ends[i], prev, d.h.tombNamesLen)
		}
		if i > 0 && t.Key(i) <= t.Key(i-1) {
			return d.errf("tombstone %d: key %q does not sort after %q", i, t.Key(i), t.Key(i-1))
		}
		if err := manifest.CheckVirtualKey(t.Key(i)); err != nil {
			return d.errf("tombstone %d: %v", i, err)
		}
		if int(t.Link[i]) >= nChain {
			return d.errf("tombstone %d: chain link %d of %d", i, t.Link[i], nChain)
		}
		prev = t.Ends[i]
	}
	if uint64(prev) != d.h.tombNamesLen {
		return d.errf("tombstone names: %d bytes, keys use %d", d.h.tombNamesLen, prev)
	}
	for i := 0; i < t.N(); i++ {
		k := t.Key(i)
		if j := x.Search(k); j < x.N() && x.RawKey(j) == k {
			return d.errf("key %q is both a file and deleted", k)
		}
	}
	return nil
}
