package index

// The tree hash: the index file's trailer, sha256 over the sha256 of each
// indexHashBlock-byte block of everything before it (format.go), computed
// in parallel when a file is checked and as it is written.

import (
	"bufio"
	"crypto/sha256"
	"hash"
	"io"
	"runtime"
	"sync"
)

// TreeHash is the trailer of body: sha256 over the sha256 of each
// indexHashBlock-byte block, the blocks hashed by up to 4 goroutines.
func TreeHash(body []byte) [32]byte {
	nb := (len(body) + indexHashBlock - 1) / indexHashBlock
	sums := make([]byte, 32*nb)
	workers := min(runtime.GOMAXPROCS(0), 4, nb)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := w; b < nb; b += workers {
				blk := body[b*indexHashBlock : min(len(body), (b+1)*indexHashBlock)]
				s := sha256.Sum256(blk)
				copy(sums[32*b:], s[:])
			}
		}()
	}
	wg.Wait()
	return sha256.Sum256(sums)
}

// treeWriter writes through a buffer, hashing as treeHash does.
type treeWriter struct {
	w    *bufio.Writer
	h    hash.Hash
	n    uint64 // bytes written
	inBl int    // bytes of the current block
	sums []byte
	err  error
	zero [indexAlign]byte
}

func newTreeWriter(w io.Writer) *treeWriter {
	return &treeWriter{w: bufio.NewWriterSize(w, 1<<20), h: sha256.New()}
}

func (t *treeWriter) write(b []byte) {
	if t.err != nil {
		return
	}
	if _, t.err = t.w.Write(b); t.err != nil {
		return
	}
	t.n += uint64(len(b))
	for len(b) > 0 {
		k := min(len(b), indexHashBlock-t.inBl)
		t.h.Write(b[:k])
		t.inBl += k
		b = b[k:]
		if t.inBl == indexHashBlock {
			t.sums = t.h.Sum(t.sums)
			t.h.Reset()
			t.inBl = 0
		}
	}
}

// padTo writes zeros up to offset at.
func (t *treeWriter) padTo(at uint64) {
	for t.err == nil && t.n < at {
		t.write(t.zero[:min(uint64(len(t.zero)), at-t.n)])
	}
}

// finish writes the trailer and flushes.
func (t *treeWriter) finish() error {
	if t.err != nil {
		return t.err
	}
	if t.inBl > 0 || t.n == 0 {
		t.sums = t.h.Sum(t.sums)
	}
	trailer := sha256.Sum256(t.sums)
	if _, err := t.w.Write(trailer[:]); err != nil {
		return err
	}
	return t.w.Flush()
}
