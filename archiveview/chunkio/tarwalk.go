package chunkio

// tarwalk.go finds tar members whose data offset the manifest does not
// record (1.0/2.0 manifests, older unframed chunks, duplicates) and checks
// the ustar header in front of offsets it does record.

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxWalkEntries bounds the names one tar walk remembers.
const maxWalkEntries = 50_000_000

// walkEntry is a member's data offset and size; off == walkDup marks a
// name that appears more than once (whatever the members' types),
// walkSparse a GNU sparse member, walkOther a member that is no regular
// file.
type walkEntry struct{ off, size int64 }

const (
	walkDup    = -1
	walkSparse = -2
	walkOther  = -3 // a member that is not a regular file (link, directory, device)
)

// isSparse reports whether hdr is a GNU sparse member in PAX form, which
// archive/tar reports as a regular member of its expanded size: its
// stored bytes are a sparse map and the data runs, not its content.
func isSparse(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// tarOffset returns the data offset and size of tar member name in chunk
// ci, walking the chunk's headers once (concurrent first readers share the
// walk; a walk that failed for a backend or context reason is retried by
// the next reader, one that failed on the data is remembered: the object
// cannot change under this chunk state, its first ETag is pinned, so
// walking it again would only redo the work, a zstd bomb on every read).
// A name that appears more than once in the chunk (as any two members, a
// regular file and a link included) is refused (ErrCorrupt).
func (s *Set) tarOffset(ctx context.Context, ci int32, name string) (int64, int64, error) {
	rs := s.state(ci)
	entries, err := rs.walk.Do(ctx, func(ctx context.Context) (map[string]walkEntry, error) {
		m, err := runTarWalk(ctx, s, ci)
		if errors.Is(err, ErrChecksum) {
			// Walked once more, as a frame is fetched again: a body
			// corrupted in transit passes, corruption at rest fails
			// twice, and only that is remembered (dataFailure).
			s.log.Warn().Str("archive", s.name).Str("chunk", s.chunks[ci].Key).Err(err).
				Msg("checksum mismatch in a tar walk: walking the chunk again")
			m, err = runTarWalk(ctx, s, ci)
		}
		return m, err
	}, s.keepFailure(rs))
	if err != nil {
		return 0, 0, fmt.Errorf("tar walk: %w", err)
	}
	e, ok := entries[name]
	if !ok {
		return 0, 0, fmt.Errorf("tar member %q: %w", name, ErrNotInChunk)
	}
	if e.off == walkOther {
		return 0, 0, fmt.Errorf("tar member %q is not a regular file: %w", name, ErrNotInChunk)
	}
	if e.off == walkSparse {
		return 0, 0, fmt.Errorf("tar member %q is a GNU sparse file (its stored bytes are not its content; not supported): %w", name, ErrCorrupt)
	}
	if e.off < 0 {
		return 0, 0, fmt.Errorf("tar member %q appears more than once in the chunk (ambiguous): %w", name, ErrCorrupt)
	}
	return e.off, e.size, nil
}

// LearnedOffset returns the data offset of tar member name in chunk ci if
// a completed tar walk found it with length bytes (the persistent index
// records such offsets). It never waits for or starts a walk.
func (s *Set) LearnedOffset(ci int32, name string, length int64) (int64, bool) {
	if name == "" || s.chunks[ci].Kind == Direct {
		return 0, false
	}
	rs := s.states[ci].Load()
	if rs == nil {
		return 0, false
	}
	entries, ok := rs.walk.Peek()
	if !ok {
		return 0, false
	}
	e, ok := entries[name]
	if !ok || e.size != length || e.off < 512 {
		return 0, false
	}
	return e.off, true
}

// countReader counts the bytes read (and seeked over) from r.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// seekCountReader adds Seek for readers that can skip (plain objects), so
// the walk does not download the members' data.
type seekCountReader struct {
	countReader
	s    io.Seeker
	size int64 // the object's size
}

func (c *seekCountReader) Seek(off int64, whence int) (int64, error) {
	if to := off + c.n; whence == io.SeekCurrent && to > c.size {
		// A member whose data runs past the object's end: a truncated
		// chunk or a lying size field.
		return c.n, fmt.Errorf("tar member data at byte %d runs to byte %d, past the object's end (%d bytes): %w", c.n, to, c.size, ErrCorrupt)
	}
	n, err := c.s.Seek(off, whence)
	if err == nil {
		c.n = n
	}
	return n, err
}

// runTarWalk reads chunk ci's tar headers in order and records the data
// offset of every regular member by name (PAX path records honoured by
// archive/tar; unknown entries skipped), of those Options.TarMembers
// wants when it is set.
func runTarWalk(ctx context.Context, s *Set, ci int32) (map[string]walkEntry, error) {
	c := &s.chunks[ci]
	var r io.Reader
	var drain func() error
	switch {
	case c.Kind == Direct:
		return nil, fmt.Errorf("a direct object has no tar members: %w", ErrCorrupt)
	case c.Kind == PlainTar:
		size, err := s.objectSize(ctx, ci)
		if err != nil {
			return nil, err
		}
		// One part at a time, no readahead: the walk seeks past the
		// members' data instead of downloading it.
		or := s.newPartReader(ctx, ci, 0, size)
		or.win = window{n: 1, max: 1}
		defer or.suspend()
		r = &seekCountReader{countReader{r: or}, or, size}
	case c.Kind == FramedZstd && len(c.Frames) > 0:
		last := c.Frames[len(c.Frames)-1]
		src, err := s.Range(ctx, ci, 0, last.UOff+last.USize)
		if err != nil {
			return nil, err
		}
		sr := &segReader{src: src}
		defer sr.Close()
		r = &countReader{r: sr}
	default: // stream zstd: decode from byte 0; the whole-object sum is checked at the end
		z, err := s.newZstream(ctx, ci, -1)
		if err != nil {
			return nil, err
		}
		healthy := false
		defer func() { z.discard(s.cache, healthy) }()
		zr := &zReader{z: z, set: s}
		r = &countReader{r: zr}
		drain = func() error {
			if _, err := io.Copy(io.Discard, zr); err != nil {
				return err
			}
			if !z.src.verified {
				if err := z.atEnd(); err != nil {
					return err
				}
			}
			healthy = true
			return nil
		}
	}
	var cr interface{ count() int64 }
	switch v := r.(type) {
	case *countReader:
		cr = v
	case *seekCountReader:
		cr = &v.countReader
	}
	var wanted func(string) bool
	if s.opts.TarMembers != nil {
		var err error
		if wanted, err = s.opts.TarMembers(ci); err != nil {
			return nil, err
		}
	}
	tr := tar.NewReader(r)
	entries := make(map[string]walkEntry)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("after %d members: %w", len(entries), walkErr(err))
		}
		if wanted != nil && !wanted(hdr.Name) {
			continue // no extent asks for it: not kept
		}
		if len(entries) >= maxWalkEntries {
			return nil, fmt.Errorf("more than %d tar members: %w", maxWalkEntries, ErrCorrupt)
		}
		if _, dup := entries[hdr.Name]; dup {
			// Readers disagree on which of two same-named members is
			// "the" member (archive/tar consumers keep the last,
			// others the first): the name is ambiguous, never served.
			// A link, directory or device of a regular member's name
			// counts too: an extractor ends with whichever comes last.
			entries[hdr.Name] = walkEntry{off: walkDup, size: -1}
			continue
		}
		if hdr.Typeflag != tar.TypeReg { // archive/tar reports old '\x00' members as TypeReg
			entries[hdr.Name] = walkEntry{off: walkOther, size: -1}
			continue
		}
		if isSparse(hdr) {
			entries[hdr.Name] = walkEntry{off: walkSparse, size: -1}
			continue
		}
		entries[hdr.Name] = walkEntry{off: cr.count(), size: hdr.Size}
	}
	if drain != nil {
		if err := drain(); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

func (c *countReader) count() int64 { return c.n }

// walkErr keeps backend and checksum causes, and marks tar format errors
// as corruption.
func walkErr(err error) error {
	if errors.Is(err, tar.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	return err
}

// zReader reads a zstream to its end.
type zReader struct {
	z   *zstream
	set *Set
}

func (r *zReader) Read(p []byte) (int, error) {
	n, err := r.z.dec.Read(p)
	r.z.pos += int64(n)
	r.set.decoded.Add(int64(n))
	if lerr := r.z.overLimit(); lerr != nil {
		return n, lerr
	}
	if err != nil && err != io.EOF {
		if r.z.src.failed != nil {
			err = r.z.src.failed
		} else {
			err = fmt.Errorf("zstd at uncompressed byte %d: %v: %w", r.z.pos, err, ErrCorrupt)
		}
	}
	return n, err
}

// typeRegOld is the regular-file type byte of pre-POSIX tar writers (NUL);
// a raw header may still carry it.
const typeRegOld = '\x00'

// checkTarHeader checks that hdr (the 512 bytes ending at a manifest
// archive_offset) is a valid ustar header of a regular member called
// tarName (exactly, or as Go's PAX writer truncates/ASCII-folds it) whose
// size is length (or whose ustar size field defers to a PAX size record).
func checkTarHeader(hdr []byte, tarName string, length int64) error {
	if len(hdr) != 512 {
		return fmt.Errorf("header is %d bytes: %w", len(hdr), ErrWrongMember)
	}
	if bytes.Count(hdr, []byte{0}) == 512 {
		return fmt.Errorf("zero block instead of a tar header: %w", ErrWrongMember)
	}
	want, err := parseOctal(hdr[148:156])
	if err != nil {
		return fmt.Errorf("header checksum field: %w", ErrWrongMember)
	}
	var unsigned, signed int64
	for i, b := range hdr {
		if i >= 148 && i < 156 {
			b = ' '
		}
		unsigned += int64(b)
		signed += int64(int8(b))
	}
	if want != unsigned && want != signed {
		return fmt.Errorf("not a tar header (checksum %d, computed %d): %w", want, unsigned, ErrWrongMember)
	}
	switch hdr[156] {
	case tar.TypeReg, typeRegOld, tar.TypeCont:
	default:
		return fmt.Errorf("tar member of type %q, not a regular file: %w", hdr[156], ErrWrongMember)
	}
	size, err := parseNumeric(hdr[124:136])
	if err != nil {
		return fmt.Errorf("size field: %w", ErrWrongMember)
	}
	if size != length && !(size == 0 && length > 077777777777) {
		return fmt.Errorf("tar member has %d bytes, manifest says %d: %w", size, length, ErrWrongMember)
	}
	if tarName == "" {
		return nil
	}
	nameField := cstr(hdr[0:100])
	name := nameField
	if string(hdr[257:263]) == "ustar\x00" {
		if prefix := cstr(hdr[345:500]); prefix != "" {
			name = prefix + "/" + nameField
		}
	}
	if !tarNameMatches(name, len(nameField), tarName) {
		return fmt.Errorf("tar member is named %q, expected %q: %w", name, tarName, ErrWrongMember)
	}
	return nil
}

// tarNameMatches accepts the exact name, the name as Go's PAX writer puts
// it into the ustar field (non-ASCII dropped, cut at 100 bytes), and for a
// full name field a prefix or suffix of the expected name.
func tarNameMatches(got string, fieldLen int, want string) bool {
	if got == want {
		return true
	}
	ascii := toASCII(want)
	if got == ascii {
		return true
	}
	if got == "" {
		return false
	}
	if fieldLen >= 99 {
		return strings.HasPrefix(ascii, got) || strings.HasPrefix(want, got) ||
			strings.HasSuffix(want, got) || strings.HasSuffix(ascii, got)
	}
	return false
}

func toASCII(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c < 0x80 && c != 0 {
			b.WriteByte(byte(c))
		}
	}
	return b.String()
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func parseOctal(b []byte) (int64, error) {
	s := strings.Trim(string(b), " \x00")
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 8, 64)
}

// parseNumeric parses an octal or base-256 tar number field.
func parseNumeric(b []byte) (int64, error) {
	if len(b) > 0 && b[0]&0x80 != 0 {
		if b[0]&0x40 != 0 {
			return 0, errors.New("negative base-256 number")
		}
		var x int64
		for i, c := range b {
			if i == 0 {
				c &= 0x7f
			}
			if x>>56 != 0 {
				return 0, errors.New("base-256 number overflows")
			}
			x = x<<8 | int64(c)
		}
		return x, nil
	}
	return parseOctal(b)
}

// TarWalks is the number of chunks whose tar walk is running or done.
func (s *Set) TarWalks() int {
	n := 0
	for i := range s.states {
		if rs := s.states[i].Load(); rs != nil && rs.walk.Started() {
			n++
		}
	}
	return n
}
