package index

// The meta section's fields (format.go): little-endian integers, a byte
// for a boolean, strings as a u32 length and the bytes, string lists as a
// u32 count and the strings. idxWriter encodes them (or counts their
// bytes); idxCursor decodes them with every length checked against the
// bytes left, its first failure sticking.

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// idxWriter encodes the meta section's fields into b, or (b nil) only
// counts their bytes in n.
type idxWriter struct {
	b   *bytes.Buffer
	n   int
	buf [8]byte
}

func (w *idxWriter) raw(b []byte) {
	w.n += len(b)
	if w.b != nil {
		w.b.Write(b)
	}
}
func (w *idxWriter) u8(v uint8)   { w.buf[0] = v; w.raw(w.buf[:1]) }
func (w *idxWriter) u32(v uint32) { binary.LittleEndian.PutUint32(w.buf[:4], v); w.raw(w.buf[:4]) }
func (w *idxWriter) u64(v uint64) { binary.LittleEndian.PutUint64(w.buf[:8], v); w.raw(w.buf[:8]) }
func (w *idxWriter) i64(v int64)  { w.u64(uint64(v)) }
func (w *idxWriter) str(s string) {
	w.u32(uint32(len(s)))
	w.n += len(s)
	if w.b != nil {
		w.b.WriteString(s)
	}
}
func (w *idxWriter) strs(s []string) {
	w.u32(uint32(len(s)))
	for _, v := range s {
		w.str(v)
	}
}
func (w *idxWriter) b1(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

// idxCursor reads fixed-width fields with bounds checks; the first failure
// sticks.
type idxCursor struct {
	b   []byte
	off int
	err error
}

func (c *idxCursor) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

func (c *idxCursor) left() uint64 { return uint64(len(c.b) - c.off) }

// take returns the next n bytes, or nil (and fails) past the end.
func (c *idxCursor) take(n uint64) []byte {
	if c.err != nil {
		return nil
	}
	if n > c.left() {
		c.fail("truncated at byte %d (%d more bytes wanted, %d left)", c.off, n, c.left())
		return nil
	}
	s := c.b[c.off : c.off+int(n)]
	c.off += int(n)
	return s
}

func (c *idxCursor) u8() uint8 {
	if b := c.take(1); b != nil {
		return b[0]
	}
	return 0
}
func (c *idxCursor) u32() uint32 {
	if b := c.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}
func (c *idxCursor) u64() uint64 {
	if b := c.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
func (c *idxCursor) i64() int64 { return int64(c.u64()) }
func (c *idxCursor) flag() bool {
	v := c.u8()
	if v > 1 {
		c.fail("boolean byte %d at %d", v, c.off-1)
	}
	return v == 1
}
func (c *idxCursor) str() string {
	n := c.u32()
	return string(c.take(uint64(n)))
}

// strs reads a count and that many strings, the count checked against the
// bytes left first.
func (c *idxCursor) strs() []string {
	n := c.u32()
	if c.err != nil {
		return nil
	}
	if uint64(n)*idxStrMin > c.left() {
		c.fail("%d strings cannot fit in %d bytes", n, c.left())
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = c.str()
	}
	return out
}
