package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
)

// lexer is a small pull JSON reader over an io.Reader, written for the one
// document shape this package decodes. It exists for speed and bounded
// memory: encoding/json's Decoder buffers each whole value before decoding
// it and decodes by reflection (about 100 MB/s here, 1.5 GB allocated for a
// 1M-file manifest); this reads each token from a sliding buffer and
// decodes straight into the typed fields.
//
// It follows encoding/json's semantics where a manifest can exercise them
// (see decode.go): RFC 8259 grammar, strings with invalid UTF-8 and lone
// surrogates replaced by U+FFFD, null into non-pointer fields a no-op,
// integers must be integral and in range, nesting capped at 10000.
type lexer struct {
	r       io.Reader
	buf     []byte
	pos     int   // next unread byte in buf
	end     int   // end of valid data in buf
	base    int64 // stream offset of buf[0]
	eof     bool
	rerr    error // sticky read error (not io.EOF)
	depth   int
	name    []byte // current member name (copied out of buf)
	scratch []byte // scratch for unescaped strings
}

const (
	lexBufSize    = 64 << 10
	maxTokenBytes = 64 << 20 // one kept string or number; longer is ErrTooLarge
	maxDepth      = 10000    // encoding/json's nesting limit
)

// newLexer reads r with an initial buffer of size bytes (grown on demand
// for long tokens, up to maxTokenBytes).
func newLexer(r io.Reader, size int) *lexer {
	return &lexer{r: r, buf: make([]byte, max(size, 64))}
}

// syntaxError is malformed JSON or a value of the wrong type.
type syntaxError struct {
	msg string
	off int64
}

func (e *syntaxError) Error() string { return fmt.Sprintf("JSON error at byte %d: %s", e.off, e.msg) }

func (l *lexer) errf(format string, args ...any) error {
	return &syntaxError{msg: fmt.Sprintf(format, args...), off: l.base + int64(l.pos)}
}

// fill reads more input, keeping buf[pos:end]. It returns false at EOF or
// on a read error (then in l.rerr). Callers holding indexes into buf must
// hold them relative to l.pos, which fill may move.
func (l *lexer) fill() bool {
	if l.eof || l.rerr != nil {
		return false
	}
	if l.pos > 0 {
		n := copy(l.buf, l.buf[l.pos:l.end])
		l.base += int64(l.pos)
		l.end = n
		l.pos = 0
	}
	if l.end == len(l.buf) {
		if len(l.buf) >= maxTokenBytes {
			l.rerr = &capError{what: "one JSON string or number", limit: maxTokenBytes}
			return false
		}
		nb := make([]byte, 2*len(l.buf))
		copy(nb, l.buf[:l.end])
		l.buf = nb
	}
	for {
		n, err := l.r.Read(l.buf[l.end:])
		l.end += n
		if err != nil {
			if err == io.EOF {
				l.eof = true
			} else {
				l.rerr = err
			}
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
}

// endErr is the error for input ending inside a value.
func (l *lexer) endErr() error {
	if l.rerr != nil {
		return l.rerr
	}
	return io.ErrUnexpectedEOF
}

// wsErr is the error when ws returned 0 where a token was due: the end of
// input, or a real NUL byte in it (a syntax error, not the end).
func (l *lexer) wsErr() error {
	if l.pos < l.end {
		return l.errf("invalid character %q", l.buf[l.pos])
	}
	return l.endErr()
}

// ws skips whitespace and returns the next byte without consuming it; 0 at
// the end of input (check l.rerr).
func (l *lexer) ws() byte {
	for {
		for l.pos < l.end {
			switch c := l.buf[l.pos]; c {
			case ' ', '\n', '\t', '\r':
				l.pos++
			default:
				return c
			}
		}
		if !l.fill() {
			return 0
		}
	}
}

// scanString finds the string token at l.pos (which must be '"') and returns
// its content's bounds in buf (valid until the next fill) and whether it
// holds escapes or non-ASCII bytes. l.pos moves past the closing quote.
func (l *lexer) scanString() (start, end int, esc, hi bool, err error) {
	rel := 1
	for {
		i := l.pos + rel
		for i < l.end {
			c := l.buf[i]
			if c >= 0x20 && c < 0x80 && c != '"' && c != '\\' {
				i++ // the common case first: printable ASCII
				continue
			}
			switch {
			case c == '"':
				start, end = l.pos+1, i
				l.pos = i + 1
				return start, end, esc, hi, nil
			case c == '\\':
				esc = true
				i++ // skip the escaped byte (validated by appendUnescaped)
			case c < 0x20:
				l.pos += i - l.pos
				return 0, 0, false, false, l.errf("control character 0x%02x in string", c)
			case c >= 0x80:
				hi = true
			}
			i++
		}
		rel = i - l.pos
		if !l.fill() {
			return 0, 0, false, false, l.endErr()
		}
	}
}

// readString reads a string token into a byte slice valid until the next
// lexer call.
func (l *lexer) readString() ([]byte, error) {
	if l.ws() != '"' {
		return nil, l.typeErr("string")
	}
	s, e, esc, hi, err := l.scanString()
	if err != nil {
		return nil, err
	}
	raw := l.buf[s:e]
	if !esc && (!hi || utf8.Valid(raw)) {
		return raw, nil
	}
	out, ok := appendUnescaped(l.scratch[:0], raw)
	if !ok {
		return nil, l.errf("invalid escape in string")
	}
	l.scratch = out
	return out, nil
}

// String token content (RFC 8259 section 7) is decoded to UTF-8 by these
// rules, which are the ones encoding/json applies:
//
//   - \" \\ \/ \b \f \n \r \t each stand for one byte (shortEscape);
//   - \uXXXX (four hex digits, either case) stands for one UTF-16 code unit
//     (codeUnit). A high surrogate immediately followed by a \u escape of a
//     low surrogate is one character beyond U+FFFF (joinSurrogates). Any
//     other surrogate (a lone high or low one, or a high one followed by
//     anything else) becomes U+FFFD, and what follows is decoded on its
//     own;
//   - a backslash followed by anything else, or \u without four hex
//     digits, makes the string invalid;
//   - a byte that is not part of valid UTF-8 becomes U+FFFD, one per byte
//     (appendValidUTF8).
//
// The lexer's scanner (scanString) has already refused unescaped control
// characters and found the closing quote; the functions below see only
// the content between the quotes.

// appendUnescaped appends the decoded content raw of a string token to dst.
// ok is false when raw holds an invalid escape.
func appendUnescaped(dst, raw []byte) (out []byte, ok bool) {
	for len(raw) > 0 {
		plain := bytes.IndexByte(raw, '\\')
		if plain < 0 {
			return appendValidUTF8(dst, raw), true
		}
		dst = appendValidUTF8(dst, raw[:plain])
		raw = raw[plain:] // starts with the backslash
		if len(raw) < 2 {
			return dst, false
		}
		if b, isShort := shortEscape(raw[1]); isShort {
			dst = append(dst, b)
			raw = raw[2:]
			continue
		}
		unit, isUnit := codeUnit(raw)
		if !isUnit {
			return dst, false
		}
		raw = raw[6:]
		if unit >= surrogateMin && unit <= surrogateMax {
			next, nextIsUnit := codeUnit(raw)
			if joined, isPair := joinSurrogates(unit, next); nextIsUnit && isPair {
				dst = utf8.AppendRune(dst, joined)
				raw = raw[6:]
				continue
			}
			unit = utf8.RuneError
		}
		dst = utf8.AppendRune(dst, unit)
	}
	return dst, true
}

// appendValidUTF8 appends s to dst with every byte that is not part of a
// valid UTF-8 sequence replaced by U+FFFD.
func appendValidUTF8(dst, s []byte) []byte {
	for len(s) > 0 {
		if s[0] < utf8.RuneSelf {
			dst = append(dst, s[0])
			s = s[1:]
			continue
		}
		// An invalid byte decodes as (RuneError, 1); a real U+FFFD as
		// (RuneError, 3). Both append U+FFFD.
		r, size := utf8.DecodeRune(s)
		dst = utf8.AppendRune(dst, r)
		s = s[size:]
	}
	return dst
}

// shortEscape returns the byte that the one-letter escape \c stands for.
func shortEscape(c byte) (b byte, ok bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// UTF-16 surrogates: a high one (D800-DBFF) then a low one (DC00-DFFF)
// encode one code point in U+10000..U+10FFFF.
const (
	surrogateMin     = 0xD800
	lowSurrogateMin  = 0xDC00
	surrogateMax     = 0xDFFF
	supplementaryMin = 0x10000
)

// joinSurrogates returns the code point that the pair (high, low) encodes;
// ok is false when they are not a high and then a low surrogate.
func joinSurrogates(high, low rune) (r rune, ok bool) {
	if high < surrogateMin || high >= lowSurrogateMin || low < lowSurrogateMin || low > surrogateMax {
		return 0, false
	}
	return supplementaryMin + (high-surrogateMin)<<10 + (low - lowSurrogateMin), true
}

// codeUnit reads the escape \uXXXX at the start of s and returns the code
// unit it names; ok is false when s does not start with such an escape.
func codeUnit(s []byte) (unit rune, ok bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	d3, d2, d1, d0 := hexDigit(s[2]), hexDigit(s[3]), hexDigit(s[4]), hexDigit(s[5])
	if d3|d2|d1|d0 < 0 {
		return 0, false
	}
	return d3<<12 | d2<<8 | d1<<4 | d0, true
}

// hexDigit returns the value of the hexadecimal digit c, or -1.
func hexDigit(c byte) rune {
	if c >= '0' && c <= '9' {
		return rune(c - '0')
	}
	// Setting bit 0x20 maps 'A'..'F' onto 'a'..'f' and no other byte
	// there.
	if lc := c | 0x20; lc >= 'a' && lc <= 'f' {
		return rune(lc-'a') + 10
	}
	return -1
}

// skipString consumes a string token without keeping it (any length).
func (l *lexer) skipString() error {
	l.pos++ // opening quote
	for {
		for l.pos < l.end {
			c := l.buf[l.pos]
			switch {
			case c == '"':
				l.pos++
				return nil
			case c == '\\':
				if l.pos+1 >= l.end {
					goto more
				}
				if _, isShort := shortEscape(l.buf[l.pos+1]); isShort {
					l.pos += 2
					continue
				}
				if l.buf[l.pos+1] != 'u' {
					return l.errf("invalid escape")
				}
				if l.pos+6 > l.end {
					goto more
				}
				if _, isUnit := codeUnit(l.buf[l.pos : l.pos+6]); !isUnit {
					return l.errf("invalid \\u escape")
				}
				l.pos += 6
				continue
			case c < 0x20:
				return l.errf("control character 0x%02x in string", c)
			}
			l.pos++
		}
	more:
		if !l.fill() {
			return l.endErr()
		}
	}
}

// readNumber reads a number token, validating RFC 8259 grammar; the slice
// is valid until the next lexer call.
func (l *lexer) readNumber() ([]byte, error) {
	rel := 0
	for {
		i := l.pos + rel
		for i < l.end && isNumByte(l.buf[i]) {
			i++
		}
		rel = i - l.pos
		if i < l.end {
			break
		}
		if !l.fill() {
			if l.rerr != nil {
				return nil, l.rerr
			}
			break // EOF ends the number
		}
	}
	num := l.buf[l.pos : l.pos+rel]
	if !validNumber(num) {
		return nil, l.errf("invalid number %q", clip(string(num)))
	}
	l.pos += rel
	return num, nil
}

func isNumByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// validNumber reports whether s is exactly one number of RFC 8259's
// grammar:
//
//	number = [ "-" ] int [ frac ] [ exp ]
//	int    = "0" / ( digit1-9 *DIGIT )
//	frac   = "." 1*DIGIT
//	exp    = ( "e" / "E" ) [ "-" / "+" ] 1*DIGIT
//
// Each part consumes its bytes from the front of s; what is left at the end
// must be nothing.
func validNumber(s []byte) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	switch {
	case len(s) == 0:
		return false
	case s[0] == '0':
		s = s[1:] // a leading zero stands alone
	case s[0] >= '1' && s[0] <= '9':
		s = s[digitRun(s):]
	default:
		return false
	}
	if len(s) > 0 && s[0] == '.' {
		n := digitRun(s[1:])
		if n == 0 {
			return false
		}
		s = s[1+n:]
	}
	if len(s) > 0 && s[0]|0x20 == 'e' { // 'e' or 'E'
		s = s[1:]
		if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
			s = s[1:]
		}
		n := digitRun(s)
		if n == 0 {
			return false
		}
		s = s[n:]
	}
	return len(s) == 0
}

// digitRun is the number of ASCII digits at the start of s.
func digitRun(s []byte) int {
	for i, c := range s {
		if c < '0' || c > '9' {
			return i
		}
	}
	return len(s)
}

// literal consumes the literal word (true, false, null) at l.pos.
func (l *lexer) literal(word string) error {
	for l.end-l.pos < len(word) {
		if !l.fill() {
			if l.rerr != nil {
				return l.rerr
			}
			break
		}
	}
	if l.end-l.pos < len(word) || string(l.buf[l.pos:l.pos+len(word)]) != word {
		return l.errf("invalid literal")
	}
	l.pos += len(word)
	return nil
}

// null consumes a null and reports true, or reports false leaving the
// value in place.
func (l *lexer) null() (bool, error) {
	if l.ws() != 'n' {
		return false, nil
	}
	return true, l.literal("null")
}

// typeErr describes the value at l.pos, which is not of the wanted kind.
func (l *lexer) typeErr(want string) error {
	c := l.ws()
	var have string
	switch {
	case c == 0:
		return l.wsErr()
	case c == '"':
		have = "string"
	case c == '{':
		have = "object"
	case c == '[':
		have = "array"
	case c == 't' || c == 'f':
		have = "bool"
	case c == 'n':
		have = "null"
	case c == '-' || c >= '0' && c <= '9':
		have = "number"
	default:
		return l.errf("invalid character %q", c)
	}
	return l.errf("want %s, have %s", want, have)
}

// skipValue consumes one value of any kind.
func (l *lexer) skipValue() error {
	switch c := l.ws(); {
	case c == '"':
		return l.skipString()
	case c == '{':
		return l.object(func([]byte) error { return l.skipValue() })
	case c == '[':
		return l.array(l.skipValue)
	case c == 't':
		return l.literal("true")
	case c == 'f':
		return l.literal("false")
	case c == 'n':
		return l.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		_, err := l.readNumber()
		return err
	case c == 0:
		return l.wsErr()
	default:
		return l.errf("invalid character %q looking for a value", c)
	}
}

// object iterates an object's members, calling member with each name (a
// copy, valid until the next member); member must consume the value.
func (l *lexer) object(member func(name []byte) error) error {
	if l.ws() != '{' {
		return l.typeErr("object")
	}
	l.pos++
	if l.depth++; l.depth > maxDepth {
		return l.errf("exceeded max nesting depth")
	}
	c := l.ws()
	if c == '}' {
		l.pos++
		l.depth--
		return nil
	}
	for {
		if c != '"' {
			if c == 0 {
				return l.wsErr()
			}
			return l.errf("invalid character %q looking for a member name", c)
		}
		name, err := l.readString()
		if err != nil {
			return err
		}
		l.name = append(l.name[:0], name...)
		if c = l.ws(); c != ':' {
			if c == 0 {
				return l.wsErr()
			}
			return l.errf("invalid character %q after member name", c)
		}
		l.pos++
		if err := member(l.name); err != nil {
			return err
		}
		switch c = l.ws(); c {
		case ',':
			l.pos++
			c = l.ws()
		case '}':
			l.pos++
			l.depth--
			return nil
		case 0:
			return l.wsErr()
		default:
			return l.errf("invalid character %q after object member", c)
		}
	}
}

// array iterates an array's elements; elem must consume one value.
func (l *lexer) array(elem func() error) error {
	if l.ws() != '[' {
		return l.typeErr("array")
	}
	l.pos++
	if l.depth++; l.depth > maxDepth {
		return l.errf("exceeded max nesting depth")
	}
	if l.ws() == ']' {
		l.pos++
		l.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch c := l.ws(); c {
		case ',':
			l.pos++
		case ']':
			l.pos++
			l.depth--
			return nil
		case 0:
			return l.wsErr()
		default:
			return l.errf("invalid character %q after array element", c)
		}
	}
}

// finish checks that only whitespace remains.
func (l *lexer) finish() error {
	if c := l.ws(); c != 0 || l.pos < l.end {
		return l.errf("invalid character %q after top-level value", c)
	}
	if l.rerr != nil {
		return l.rerr
	}
	return nil
}

// Typed readers. Each treats null as "leave the field as it is", as
// encoding/json does for non-pointer fields.

func (l *lexer) str(dst *string) error {
	if isNull, err := l.null(); isNull || err != nil {
		return err
	}
	b, err := l.readString()
	if err != nil {
		return err
	}
	*dst = string(b)
	return nil
}

// strLike reads a string like str, but reuses like's memory when the
// value equals like (manifests repeat s3_keys and paths many times).
func (l *lexer) strLike(dst *string, like string) error {
	if isNull, err := l.null(); isNull || err != nil {
		return err
	}
	b, err := l.readString()
	if err != nil {
		return err
	}
	if string(b) == like {
		*dst = like
	} else {
		*dst = string(b)
	}
	return nil
}

func (l *lexer) boolean(dst *bool) error {
	switch l.ws() {
	case 'n':
		return l.literal("null")
	case 't':
		*dst = true
		return l.literal("true")
	case 'f':
		*dst = false
		return l.literal("false")
	}
	return l.typeErr("bool")
}

// integer reads an integral number in [min,max].
func (l *lexer) integer(min, max int64) (v int64, isNull bool, err error) {
	c := l.ws()
	if c == 'n' {
		return 0, true, l.literal("null")
	}
	if c != '-' && (c < '0' || c > '9') {
		return 0, false, l.typeErr("integer")
	}
	b, err := l.readNumber()
	if err != nil {
		return 0, false, err
	}
	neg := b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	var u uint64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false, l.errf("number %s is not an integer", clip(string(b)))
		}
		if u > (1<<63)/10 {
			return 0, false, l.errf("number %s out of range", clip(string(b)))
		}
		u = u*10 + uint64(c-'0')
		if u > 1<<63 {
			return 0, false, l.errf("number %s out of range", clip(string(b)))
		}
	}
	if neg {
		v = -int64(u) // u == 1<<63 wraps to MinInt64, which is right
	} else {
		if u > 1<<63-1 {
			return 0, false, l.errf("number %s out of range", clip(string(b)))
		}
		v = int64(u)
	}
	if v < min || v > max {
		return 0, false, l.errf("number %s out of range", clip(string(b)))
	}
	return v, false, nil
}

func (l *lexer) i64(dst *int64) error {
	v, isNull, err := l.integer(-1<<63, 1<<63-1)
	if err == nil && !isNull {
		*dst = v
	}
	return err
}

func (l *lexer) int(dst *int) error {
	v, isNull, err := l.integer(int64(minInt), int64(maxInt))
	if err == nil && !isNull {
		*dst = int(v)
	}
	return err
}

const (
	maxInt = int(^uint(0) >> 1)
	minInt = -maxInt - 1
)

func (l *lexer) i32(dst *int32) error {
	v, isNull, err := l.integer(-1<<31, 1<<31-1)
	if err == nil && !isNull {
		*dst = int32(v)
	}
	return err
}

func (l *lexer) f64(dst *float64) error {
	c := l.ws()
	if c == 'n' {
		return l.literal("null")
	}
	if c != '-' && (c < '0' || c > '9') {
		return l.typeErr("number")
	}
	b, err := l.readNumber()
	if err != nil {
		return err
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return l.errf("number %s: %v", clip(string(b)), errors.Unwrap(err))
	}
	*dst = v
	return nil
}

// i64ptr reads a nullable integer: null sets nil.
func (l *lexer) i64ptr(dst **int64, slab *[]int64) error {
	v, isNull, err := l.integer(-1<<63, 1<<63-1)
	if err != nil {
		return err
	}
	if isNull {
		*dst = nil
		return nil
	}
	if len(*slab) == 0 {
		*slab = make([]int64, 4096)
	}
	p := &(*slab)[0]
	*slab = (*slab)[1:]
	*p = v
	*dst = p
	return nil
}

// tm reads a time as time.Time.UnmarshalJSON does (RFC 3339 in quotes,
// escapes not interpreted). zones caches fixed-offset locations so a
// million timestamps share one *time.Location per offset.
func (l *lexer) tm(dst *time.Time, zones map[int]*time.Location) error {
	if isNull, err := l.null(); isNull || err != nil {
		return err
	}
	if l.ws() != '"' {
		return l.typeErr("time string")
	}
	s, e, esc, _, err := l.scanString()
	if err != nil {
		return err
	}
	if !esc {
		if t, ok := parseTimeFast(l.buf[s:e], zones); ok {
			*dst = t
			return nil
		}
	}
	var t time.Time
	if err := t.UnmarshalJSON(l.buf[s-1 : e+1]); err != nil {
		return l.errf("time %q: %v", clip(string(l.buf[s:e])), err)
	}
	if loc := t.Location(); loc != time.UTC && loc != time.Local {
		_, off := t.Zone()
		if z, ok := zones[off]; ok {
			t = t.In(z)
		} else if len(zones) < 64 {
			zones[off] = loc
		}
	}
	*dst = t
	return nil
}
