package cargopack

import (
	"archive/tar"
	"bufio"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"strconv"

	"github.com/klauspost/compress/zstd"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// countingWriter counts the bytes passing through and optionally hashes them.
type countingWriter struct {
	w  io.Writer
	n  int64
	hs []hash.Hash
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	for _, h := range c.hs {
		h.Write(p[:n])
	}
	c.n += int64(n)
	return n, err
}

// item is one tar entry to write: a whole file or one part of a split file.
type item struct {
	f          *File
	entry      int    // index into the manifest's files
	name       string // manifest path (tar name is name, or name.partN)
	part       int
	totalParts int
	off, n     int64 // byte range of the file this entry holds
	direct     bool  // stored as its own object, not in a chunk
}

// itemResult is what writing an item records.
type itemResult struct {
	archiveOffset int64
	sha256        string
	md5           string
}

// chunkOut is one finished chunk spooled to a temporary file.
type chunkOut struct {
	tmp    *os.File
	size   int64 // object size
	sha256 string
	frames []manifest.FrameEntry
	items  []itemResult
}

// chunkWriter writes one chunk: tar → count(U) → [zstd encoder → ] count(C,
// sha256) → temp file. With framing, the encoder is closed (ending a zstd
// frame) and reset at each cut, exactly as CargoShip's framer does.
type chunkWriter struct {
	opt      *Options
	compress bool
	framed   bool

	tmp    *os.File
	buf    *bufio.Writer
	cwC    *countingWriter
	whole  hash.Hash
	frameH hash.Hash
	enc    *zstd.Encoder
	cwU    *countingWriter
	tw     *tar.Writer

	frameStartU, frameStartC int64
	frames                   []manifest.FrameEntry
	copyBuf                  []byte
}

func newChunkWriter(opt *Options, compress bool, enc *zstd.Encoder) (*chunkWriter, error) {
	tmp, err := os.CreateTemp("", "cargopack-chunk-*")
	if err != nil {
		return nil, fmt.Errorf("cargopack: spool chunk: %w", err)
	}
	cw := &chunkWriter{
		opt:      opt,
		compress: compress,
		framed:   compress && opt.FrameSize > 0,
		tmp:      tmp,
		buf:      bufio.NewWriterSize(tmp, 256<<10),
		whole:    sha256.New(),
		frameH:   sha256.New(),
		copyBuf:  make([]byte, 128<<10),
	}
	cw.cwC = &countingWriter{w: cw.buf, hs: []hash.Hash{cw.whole, cw.frameH}}
	var under io.Writer = cw.cwC
	if compress {
		enc.Reset(cw.cwC)
		cw.enc = enc
		under = enc
	}
	cw.cwU = &countingWriter{w: under}
	cw.tw = tar.NewWriter(cw.cwU)
	return cw, nil
}

// discard removes the spool file.
func (cw *chunkWriter) discard() {
	_ = cw.tmp.Close()
	_ = os.Remove(cw.tmp.Name())
}

// cut ends the current zstd frame and records it; with next, the encoder
// is reset to start the following frame.
func (cw *chunkWriter) cut(next bool) error {
	if err := cw.enc.Close(); err != nil {
		return fmt.Errorf("close zstd frame: %w", err)
	}
	fe := manifest.FrameEntry{
		CompressedOffset:   cw.frameStartC,
		CompressedSize:     cw.cwC.n - cw.frameStartC,
		UncompressedOffset: cw.frameStartU,
		UncompressedSize:   cw.cwU.n - cw.frameStartU,
	}
	if cw.opt.checksums() {
		fe.Checksum = hex.EncodeToString(cw.frameH.Sum(nil))
	}
	cw.frames = append(cw.frames, fe)
	cw.frameH.Reset()
	if next {
		cw.enc.Reset(cw.cwC)
	}
	cw.frameStartU, cw.frameStartC = cw.cwU.n, cw.cwC.n
	return nil
}

// add writes one tar entry and returns its data offset and hashes.
func (cw *chunkWriter) add(it *item) (itemResult, error) {
	var res itemResult
	f := it.f
	hdr, err := tar.FileInfoHeader(fileInfo{name: path.Base(f.Rel), f: f}, "")
	if err != nil {
		return res, fmt.Errorf("cargopack: tar header for %s: %w", it.name, err)
	}
	hdr.Size = it.n
	if it.totalParts > 1 {
		hdr.Name = fmt.Sprintf("%s.part%d", it.name, it.part)
		hdr.PAXRecords = map[string]string{
			"CARGOSHIP.part_index":    strconv.Itoa(it.part),
			"CARGOSHIP.total_parts":   strconv.Itoa(it.totalParts),
			"CARGOSHIP.offset":        strconv.FormatInt(it.off, 10),
			"CARGOSHIP.original_path": it.name,
		}
	} else {
		hdr.Name = it.name
	}
	if err := cw.tw.WriteHeader(hdr); err != nil {
		return res, fmt.Errorf("cargopack: tar header for %s: %w", hdr.Name, err)
	}
	res.archiveOffset = cw.cwU.n

	rc, err := f.Open()
	if err != nil {
		return res, fmt.Errorf("cargopack: open %s: %w", f.Rel, err)
	}
	defer rc.Close()
	if it.off > 0 {
		if s, ok := rc.(io.Seeker); ok {
			if _, err := s.Seek(it.off, io.SeekStart); err != nil {
				return res, fmt.Errorf("cargopack: seek %s to %d: %w", f.Rel, it.off, err)
			}
		} else if _, err := io.CopyN(io.Discard, rc, it.off); err != nil {
			return res, fmt.Errorf("cargopack: skip %s to %d: %w", f.Rel, it.off, err)
		}
	}
	sh := sha256.New()
	var mh hash.Hash
	if cw.opt.ContentHash {
		mh = md5.New()
	}
	sub := cw.framed && !cw.opt.NoSubFrames && it.n > cw.opt.FrameSize
	remaining := it.n
	for remaining > 0 {
		n := min(remaining, int64(len(cw.copyBuf)))
		if sub {
			room := cw.opt.FrameSize - (cw.cwU.n - cw.frameStartU)
			if room <= 0 {
				if err := cw.cut(true); err != nil {
					return res, fmt.Errorf("cargopack: %s: %w", f.Rel, err)
				}
				room = cw.opt.FrameSize
			}
			n = min(n, room)
		}
		b := cw.copyBuf[:n]
		if _, err := io.ReadFull(rc, b); err != nil {
			return res, fmt.Errorf("cargopack: read %s: file shorter than its declared size %d: %w", f.Rel, f.Size, err)
		}
		sh.Write(b)
		if mh != nil {
			mh.Write(b)
		}
		if _, err := cw.tw.Write(b); err != nil {
			return res, fmt.Errorf("cargopack: write %s: %w", hdr.Name, err)
		}
		cw.opt.progress(n)
		remaining -= n
	}
	if it.off+it.n == f.Size {
		var one [1]byte
		if k, _ := io.ReadFull(rc, one[:]); k > 0 {
			return res, fmt.Errorf("cargopack: read %s: file longer than its declared size %d", f.Rel, f.Size)
		}
	}
	res.sha256 = hex.EncodeToString(sh.Sum(nil))
	if mh != nil {
		res.md5 = hex.EncodeToString(mh.Sum(nil))
	}
	// CargoShip's maybeCut: the test counts bytes before the entry padding;
	// Flush then writes that padding into the frame being closed.
	if cw.framed && cw.cwU.n-cw.frameStartU >= cw.opt.FrameSize {
		if err := cw.tw.Flush(); err != nil {
			return res, fmt.Errorf("cargopack: flush %s: %w", hdr.Name, err)
		}
		if err := cw.cut(true); err != nil {
			return res, fmt.Errorf("cargopack: %s: %w", f.Rel, err)
		}
	}
	return res, nil
}

// finish writes the tar trailer, ends the last frame and flushes the spool.
func (cw *chunkWriter) finish() (*chunkOut, error) {
	if err := cw.tw.Close(); err != nil {
		return nil, fmt.Errorf("cargopack: tar trailer: %w", err)
	}
	if cw.framed {
		if err := cw.cut(false); err != nil {
			return nil, fmt.Errorf("cargopack: %w", err)
		}
	} else if cw.compress {
		if err := cw.enc.Close(); err != nil {
			return nil, fmt.Errorf("cargopack: close zstd stream: %w", err)
		}
	}
	if err := cw.buf.Flush(); err != nil {
		return nil, fmt.Errorf("cargopack: spool chunk: %w", err)
	}
	if _, err := cw.tmp.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("cargopack: spool chunk: %w", err)
	}
	if cw.frames != nil {
		var sum int64
		for _, fr := range cw.frames {
			sum += fr.CompressedSize
		}
		if sum != cw.cwC.n {
			return nil, errors.New("cargopack: internal error: frames do not tile the chunk")
		}
	}
	return &chunkOut{
		tmp:    cw.tmp,
		size:   cw.cwC.n,
		sha256: hex.EncodeToString(cw.whole.Sum(nil)),
		frames: cw.frames,
	}, nil
}
