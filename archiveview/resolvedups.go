package archiveview

// Resolution's duplicates (resolve.go): every surviving duplicate entry
// is mapped to its original (same s3_key, not a duplicate, checksum ==
// duplicate_of_hash, same size), else to any non-duplicate with that
// checksum and size anywhere in the chain, in two lookups per duplicate.

// origin is a duplicate's original: its file and its path (kept, since
// the key arena is released before the files are placed).
type origin struct {
	file uint32
	path string
}

// findOriginals maps every surviving duplicate to its original entry.
func (r *resolver) findOriginals(surv []uint32) (map[uint32]origin, error) {
	fs := r.fs
	wanted := map[[32]byte]bool{}
	type dup struct {
		file uint32
		hash [32]byte
	}
	var dups []dup
	for _, f32 := range surv {
		f := int(f32)
		bits := fs.bits.at(f)
		if bits&bDup == 0 {
			continue
		}
		if bits&bSplit != 0 {
			return nil, treeErr("file %s is both a duplicate and a split file", r.where(f))
		}
		r.duplicates++
		d := fs.dupOf(f)
		if fs.s3.at(f) == 0 || d.chunkID < 0 {
			return nil, treeErr("duplicate file %s was never patched with its original's location (s3_key %q, chunk_id %d): unreadable",
				r.where(f), r.rawS3Key(f), d.chunkID)
		}
		if !d.hashOK {
			return nil, treeErr("duplicate file %s has no usable duplicate_of_hash (%q)", r.where(f), d.raw)
		}
		// The duplicate's own checksum, when it has one, is a claim about
		// its bytes: it must name the same content as duplicate_of_hash,
		// or the original's bytes would be served under another checksum.
		if bits&bSum != 0 && fs.sum.at(f) != d.hash {
			own := fs.sum.at(f)
			return nil, treeErr("duplicate file %s: its checksum %x differs from its duplicate_of_hash %x", r.where(f), own, d.hash)
		}
		wanted[d.hash] = true
		dups = append(dups, dup{f32, d.hash})
	}
	if len(dups) == 0 {
		return nil, nil
	}
	// Candidates: every non-duplicate, non-split entry of the chain whose
	// checksum is wanted, newest first: the first by (checksum, size,
	// resolved s3_key) and the first by (checksum, size), so that each
	// duplicate costs two lookups, not a scan of every entry sharing its
	// checksum (an uploader's manifest could make that quadratic).
	type content struct {
		sum  [32]byte
		size int64
	}
	type placed struct {
		content
		rk int32
	}
	byContent := map[content]uint32{}
	byPlace := map[placed]uint32{}
	for f := 0; f < fs.files(); f++ {
		bits := fs.bits.at(f)
		if bits&(bDup|bSplit) != 0 || bits&bSum == 0 || fs.s3.at(f) == 0 {
			continue
		}
		sum := fs.sum.at(f)
		if !wanted[sum] {
			continue
		}
		c := content{sum, fs.size.at(f)}
		if !hasKey(byContent, c) {
			byContent[c] = uint32(f)
		}
		if pk := (placed{c, r.rkey(f)}); !hasKey(byPlace, pk) {
			byPlace[pk] = uint32(f)
		}
	}
	out := make(map[uint32]origin, len(dups))
	for _, d := range dups {
		f := int(d.file)
		want := r.rkey(f)
		c := content{d.hash, fs.size.at(f)}
		found, fallback := -1, -1
		if o, ok := byPlace[placed{c, want}]; ok {
			found = int(o)
		} else if o, ok := byContent[c]; ok {
			fallback = int(o)
		}
		size := c.size
		if found < 0 && fallback >= 0 {
			found = fallback
			r.warnf("duplicate %s: no original in %s, using %s with the same checksum", r.where(f), r.rkeys[want], r.where(found))
		}
		if found < 0 {
			return nil, treeErr("duplicate file %s: original (checksum %x, %d bytes) not found in the manifest chain", r.where(f), d.hash, size)
		}
		out[d.file] = origin{file: uint32(found), path: fs.pathOf(&r.chain[r.linkOfFile(found)], found)}
	}
	return out, nil
}

// hasKey reports whether m holds k.
func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}
