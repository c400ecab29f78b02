package archiveview

// Resolution's chunks (resolve.go): the union of the chain's chunks[]
// entries by resolved s3_key (collectChunks), materialized as files use
// them (chunkFor, directChunk for a direct-upload object), their kind
// from the key (chunkKindOf), their frame tables checked (frames), and
// the decode bound of unframed zstd chunks (streamBounds, chunkTable).

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// chunkTable materializes the chunks resolved so far.
func (r *resolver) chunkTable() []chunkio.Chunk {
	chunks := slices.Clone(r.chunks)
	for rk, b := range r.bounds {
		if ci := r.chunkIdx[rk]; ci >= 0 && chunks[ci].Kind == chunkio.StreamZstd {
			chunks[ci].MaxTar = b
		}
	}
	return chunks
}

// Slack of the decode bound of an unframed zstd chunk (streamBounds).
const (
	tarMemberOverhead = 4 << 10  // ustar + PAX headers and records per member, beyond the name
	tarBoundSlack     = 16 << 20 // added to twice the computed tar length
)

// streamBounds computes, per resolved key of an unframed zstd chunk, a
// bound on the tar stream it can decode to (chunkTable applies it). A
// chunk's members are the file entries of the chain that name it (a chunk
// is written by one upload, which lists every member); each needs at most
// its data rounded up to 512 bytes plus its headers. The bound is twice
// that sum plus 16 MiB, so that a manifest that leaves out a few members
// is still read, while a zstd bomb stops after a bounded decode instead of
// expanding to whatever it claims. It reads every file's path length, so
// it runs while the key arena lives.
func (r *resolver) streamBounds() {
	stream := map[int32]bool{}
	for rk, c := range r.cands {
		if c.link < 0 {
			continue
		}
		l := &r.chain[c.link]
		ce := &l.m.Chunks[c.entry]
		if k, err := chunkKindOf(r.rkeys[rk], l.m.CompressionType, len(ce.Frames) > 0); err == nil && k == chunkio.StreamZstd {
			stream[int32(rk)] = true
		}
	}
	if len(stream) == 0 {
		return
	}
	sums := map[int32]int64{}
	add := func(rk int32, v int64) {
		s := sums[rk]
		if v < 0 || s < 0 || s > math.MaxInt64/4-v {
			sums[rk] = -1 // overflow: unbounded
			return
		}
		sums[rk] = s + v
	}
	fs := r.fs
	for li := range r.chain {
		l := &r.chain[li]
		for f := l.fStart; f < l.fStart+l.nFiles; f++ {
			bits := fs.bits.at(f)
			s3 := fs.s3.at(f)
			if s3 == 0 || bits&bDup != 0 {
				continue
			}
			rk := l.s3res[s3-1]
			if !stream[rk] {
				continue
			}
			n := fs.size.at(f)
			if bits&bSplit != 0 {
				n = fs.sideOf(f).length
			}
			if n < 0 || n > math.MaxInt64/4 {
				add(rk, -1)
				continue
			}
			pathLen := len(fs.key(l.mStart + (f - l.fStart)))
			if bits&bOdd != 0 {
				pathLen = len(fs.odd[uint32(f)])
			} else {
				pathLen += len(fs.roots[fs.root.at(f)])
			}
			add(rk, (n+511)/512*512+tarMemberOverhead+2*int64(pathLen))
		}
	}
	for rk, s := range sums {
		if s >= 0 {
			r.bounds[rk] = 2*(s+1024) + tarBoundSlack
		}
	}
}

// collectChunks records every chunks[] entry of the chain by resolved key.
func (r *resolver) collectChunks() error {
	for li := range r.chain {
		m := r.chain[li].m
		for ci := range m.Chunks {
			ce := &m.Chunks[ci]
			if ce.S3Key == "" {
				return treeErr("manifest %s: chunk %d (shard %d) has no s3_key", r.chain[li].key, ce.ID, ce.ShardID)
			}
			key := manifest.ResolveObjectKey(r.bucket, m.Prefix, ce.S3Key)
			if err := manifest.CheckObjectKey(key); err != nil {
				return fmt.Errorf("%w: manifest %s: chunk %d (s3_key %q): %w", ErrInvalidTree, r.chain[li].key, ce.ID, ce.S3Key, err)
			}
			if err := r.confine(key); err != nil {
				return fmt.Errorf("manifest %s: chunk %d: %w", r.chain[li].key, ce.ID, err)
			}
			rk := r.internKey(key)
			prev := r.cands[rk]
			if prev.link < 0 {
				r.cands[rk] = chunkCand{int32(li), int32(ci)}
				continue
			}
			pe := &r.chain[prev.link].m.Chunks[prev.entry]
			if pe.CompressedSize == ce.CompressedSize && len(pe.Frames) == len(ce.Frames) {
				continue // the same chunk listed again (chain union)
			}
			r.shapes["staging-snapshots"] = true
			r.warnf("chunk %s is listed more than once with different sizes (%d and %d bytes): keeping the largest (staging snapshot)",
				key, pe.CompressedSize, ce.CompressedSize)
			if ce.CompressedSize > pe.CompressedSize {
				r.cands[rk] = chunkCand{int32(li), int32(ci)}
			}
		}
	}
	return nil
}

// directChunk returns the chunk for a direct-upload object (resolved key
// rk) holding file f's bytes.
func (r *resolver) directChunk(f int, where func() string, rk int32, length int64) (int32, error) {
	var sum [32]byte
	hasSum := false
	if r.chain[r.linkOfFile(f)].verify && r.fs.bits.at(f)&bSplit == 0 {
		sum, hasSum = r.sum(f, nil)
	}
	key := r.rkeys[rk]
	if ci := r.chunkIdx[rk]; ci >= 0 {
		c := &r.chunks[ci]
		if c.Kind != chunkio.Direct {
			return 0, treeErr("file %s: object %s is used both as a chunk and as a direct object", where(), key)
		}
		if c.Size != length || (hasSum && c.HasSum && sum != c.Sum) {
			return 0, treeErr("file %s: direct object %s is claimed by files of different size or checksum", where(), key)
		}
		return ci, nil
	}
	return r.addChunk(rk, chunkio.Chunk{Key: key, Kind: chunkio.Direct, Size: length, Sum: sum, HasSum: hasSum}, length), nil
}

// addChunk materializes c, of uncomp tar bytes (a direct object's own
// length), as the chunk of resolved key rk and returns its index.
func (r *resolver) addChunk(rk int32, c chunkio.Chunk, uncomp int64) int32 {
	ci := int32(len(r.chunks))
	r.chunks = append(r.chunks, c)
	r.uncomp = append(r.uncomp, uncomp)
	r.chunkIdx[rk] = ci
	return ci
}

// chunkFor materializes the chunk with resolved key rk (which has a
// candidate).
func (r *resolver) chunkFor(rk int32) (int32, error) {
	key := r.rkeys[rk]
	if ci := r.chunkIdx[rk]; ci >= 0 {
		if r.chunks[ci].Kind == chunkio.Direct {
			return 0, treeErr("object %s is used both as a chunk and as a direct object", key)
		}
		return ci, nil
	}
	cand := r.cands[rk]
	l := &r.chain[cand.link]
	ce := &l.m.Chunks[cand.entry]
	where := fmt.Sprintf("chunk %s (manifest %s)", key, l.key)

	c := chunkio.Chunk{Key: key, Size: ce.CompressedSize}
	if c.Size < 0 || ce.UncompressedSize < 0 {
		return 0, treeErr("%s: negative size", where)
	}
	kind, err := chunkKindOf(key, l.m.CompressionType, len(ce.Frames) > 0)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrInvalidTree, where, err)
	}
	c.Kind = kind
	uncomp := ce.UncompressedSize
	if kind == chunkio.FramedZstd {
		frames, t, err := r.frames(ce, l.verify, where)
		if err != nil {
			return 0, err
		}
		c.Frames = frames
		uncomp = t.Total
		if c.Size == 0 {
			c.Size = t.End
		}
	} else if l.verify {
		sum, ok, err := manifest.ParseChecksum(ce.Checksum)
		if err != nil {
			r.warnf("%s: unusable checksum ignored: %v", where, err)
		} else {
			c.Sum, c.HasSum = sum, ok
		}
	}
	return r.addChunk(rk, c, uncomp), nil
}

// chunkKindOf decides a chunk's decoding from its key, as CargoShip does:
// the extension is the only per-chunk signal; any other ending falls back
// to the manifest-wide compression_type ("" = zstd).
func chunkKindOf(key, compressionType string, hasFrames bool) (chunkio.Kind, error) {
	k := strings.ToLower(key)
	comp := ""
	switch {
	case strings.HasSuffix(k, ".tar.zst"), strings.HasSuffix(k, ".zst"):
		comp = "zstd"
	case strings.HasSuffix(k, ".tar.gz"), strings.HasSuffix(k, ".gz"):
		comp = "gzip"
	case strings.HasSuffix(k, ".tar"):
		comp = "none"
	default:
		comp = strings.ToLower(compressionType)
		if comp == "" {
			comp = "zstd"
		}
	}
	switch comp {
	case "zstd":
		if hasFrames {
			return chunkio.FramedZstd, nil
		}
		return chunkio.StreamZstd, nil
	case "none":
		if hasFrames {
			return 0, errors.New("a plain tar chunk cannot have zstd frames")
		}
		return chunkio.PlainTar, nil
	}
	return 0, fmt.Errorf("unsupported chunk compression %q", comp)
}

// frames checks a framed chunk's frame table with manifest.CheckFrames
// (the one frame-table rule) and returns it with the table's tar length
// and compressed end. A compressed_size of 0 (unknown) is allowed.
func (r *resolver) frames(ce *manifest.ChunkEntry, verify bool, where string) ([]chunkio.Frame, manifest.FrameTable, error) {
	fs := make([]chunkio.Frame, len(ce.Frames))
	for i, fe := range ce.Frames {
		f := chunkio.Frame{COff: fe.CompressedOffset, CSize: fe.CompressedSize, UOff: fe.UncompressedOffset, USize: fe.UncompressedSize}
		if verify {
			sum, ok, err := manifest.ParseChecksum(fe.Checksum)
			if err != nil {
				return nil, manifest.FrameTable{}, fmt.Errorf("%w: %s: frame %d checksum: %w", ErrInvalidTree, where, i, err)
			}
			f.Sum, f.HasSum = sum, ok
		}
		fs[i] = f
	}
	t, err := manifest.CheckFrames(len(fs), func(i int) manifest.FrameSpan { return fs[i].Span() }, ce.CompressedSize)
	if err != nil {
		return nil, t, fmt.Errorf("%w: %s: %w", ErrInvalidTree, where, err)
	}
	o := r.opts.chunkOptions()
	giant := 0
	for _, f := range fs {
		if o.Giant(f) {
			giant++
		}
	}
	if giant > 0 {
		r.shapes["giant-frame"] = true
		r.warnf("%s: %d frame(s) decode to, or are stored in, more than %d bytes; reads stream them instead of caching", where, giant, o.MaxFrame())
	}
	return fs, t, nil
}
