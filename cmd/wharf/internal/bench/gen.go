package bench

import (
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logGen writes deterministic, log-like text: compressible the way real
// service logs are (about 4-6x with zstd level 3), never a repeated block.
type logGen struct {
	rng  *rand.Rand
	t    time.Time
	line []byte
}

var (
	levels   = []string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}
	services = []string{"api", "auth", "billing", "search", "ingest", "export", "scheduler", "gateway"}
	paths    = []string{"/v1/items", "/v1/items/{id}", "/v1/users/{id}", "/v2/search", "/healthz", "/v1/orders", "/v1/export"}
	msgs     = []string{"request completed", "cache miss", "retrying upstream call", "slow query", "token refreshed", "queue drained", "connection reset by peer"}
)

func newLogGen(seed uint64) *logGen {
	return &logGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), t: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)}
}

// next returns one log line (valid until the next call).
func (g *logGen) next() []byte {
	g.t = g.t.Add(time.Duration(g.rng.IntN(50_000_000)))
	b := g.line[:0]
	b = g.t.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, ' ')
	b = append(b, levels[g.rng.IntN(len(levels))]...)
	b = append(b, " svc="...)
	b = append(b, services[g.rng.IntN(len(services))]...)
	b = append(b, " req="...)
	b = strconv.AppendUint(b, g.rng.Uint64()&0xffffffffff, 16)
	b = append(b, " path="...)
	b = append(b, paths[g.rng.IntN(len(paths))]...)
	b = append(b, " status="...)
	b = strconv.AppendInt(b, int64(200+100*g.rng.IntN(4)+g.rng.IntN(5)), 10)
	b = append(b, " latency_ms="...)
	b = strconv.AppendInt(b, int64(g.rng.ExpFloat64()*40), 10)
	b = append(b, " msg=\""...)
	b = append(b, msgs[g.rng.IntN(len(msgs))]...)
	b = append(b, "\"\n"...)
	g.line = b
	return b
}

// fill writes exactly n bytes of log text into dst's tail and returns it.
func (g *logGen) fill(dst []byte, n int) []byte {
	for n > 0 {
		l := g.next()
		if len(l) > n {
			l = l[:n]
		}
		dst = append(dst, l...)
		n -= len(l)
	}
	return dst
}

// genReader is an io.Reader of size bytes of log text for seed.
type genReader struct {
	g     *logGen
	left  int64
	buf   []byte // unread part of store
	store []byte
}

func newGenReader(seed uint64, size int64) *genReader {
	return &genReader{g: newLogGen(seed), left: size}
}

func (r *genReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if len(r.buf) == 0 {
		want := 64 << 10
		if int64(want) > r.left {
			want = int(r.left)
		}
		r.store = r.g.fill(r.store[:0], want)
		r.buf = r.store
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	r.left -= int64(n)
	return n, nil
}

func (r *genReader) Close() error { return nil }

// tree is a generated source tree held in memory (a few tens of MB).
type tree struct {
	rels  []string
	data  map[string][]byte
	bytes int64
}

// makeTree builds n log-like files of 0..maxSize bytes under dated
// directories, like a log directory.
func makeTree(n int, maxSize int, seed uint64) *tree {
	rng := rand.New(rand.NewPCG(seed, 7))
	t := &tree{data: make(map[string][]byte, n)}
	for i := 0; i < n; i++ {
		rel := fmt.Sprintf("logs/2026-06-%02d/%s/part-%05d.log", 1+i%28, services[i%len(services)], i)
		size := rng.IntN(maxSize + 1)
		b := newLogGen(seed+uint64(i)).fill(make([]byte, 0, size), size)
		t.rels = append(t.rels, rel)
		t.data[rel] = b
		t.bytes += int64(size)
	}
	return t
}

func (t *tree) files(mtime time.Time) []cargopack.File {
	return cargopack.FromMap(t.data, mtime)
}

// writePerObject stores every file of t as its own object under prefix in
// bucket, the layout a per-object reader lists and GETs.
func (t *tree) writePerObject(root, bucket, prefix string) error {
	for rel, b := range t.data {
		p := filepath.Join(root, bucket, filepath.FromSlash(prefix+"/"+rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// mixedReader is an io.Reader of size bytes like scientific data with
// compressed media inside: log-like text interleaved with stretches of
// random binary, in runs of 16 to 256 KiB (half of each; measured 0.59 over 96 MiB). zstd (level 3)
// compresses it to about 0.6 of its size, as real archives do; the
// log-only file (4-6x) compresses so well that one connection hides the
// per-connection bandwidth limit.
type mixedReader struct {
	text   *genReader
	rng    *rand.Rand
	left   int64
	run    int64 // bytes left in the current run
	binary bool
	word   [8]byte // random bytes drawn but not yet delivered: word[used:]
	used   int
}

func newMixedReader(seed uint64, size int64) *mixedReader {
	return &mixedReader{text: newGenReader(seed, size), rng: rand.New(rand.NewPCG(seed, 0x5bd1e995)), left: size, used: 8}
}

func (r *mixedReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if r.run == 0 {
		r.binary = !r.binary
		r.run = int64(16<<10 + r.rng.IntN(240<<10))
	}
	n := int(min(int64(len(p)), r.run, r.left))
	if r.binary {
		// The same bytes however the reads are sized: a random word is
		// drawn only when the last one is used up.
		for i := 0; i < n; i++ {
			if r.used == 8 {
				v := r.rng.Uint64()
				for k := range r.word {
					r.word[k] = byte(v >> (8 * k))
				}
				r.used = 0
			}
			p[i] = r.word[r.used]
			r.used++
		}
	} else {
		var err error
		n, err = io.ReadFull(r.text, p[:n])
		if err != nil {
			return n, err
		}
	}
	r.run -= int64(n)
	r.left -= int64(n)
	return n, nil
}

func (r *mixedReader) Close() error { return nil }

// content names a generated large file: its reader and what it is.
type content struct {
	name string
	open func(seed uint64, size int64) io.ReadCloser
}

var contents = []content{
	{"mixed text and binary (zstd ~0.6)", func(seed uint64, size int64) io.ReadCloser { return newMixedReader(seed, size) }},
	{"log-like text (zstd 4-6x)", func(seed uint64, size int64) io.ReadCloser { return newGenReader(seed, size) }},
}
