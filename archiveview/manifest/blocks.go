package manifest

import "iter"

// blocks accumulates a growing array in fixed blocks, then assembles it
// into one exactly sized slice. Appending a million 250-byte FileEntries to
// a slice copies ~2x their size and can hold 3x at peak; blocks copy once
// and hold ~1x plus one block (each block is released as it is copied).
type blocks[T any] struct {
	full [][]T
	cur  []T
	n    int
}

const maxBlock = 1 << 16

// next appends a zero element and returns a pointer to it, valid until
// slice is called.
func (b *blocks[T]) next() *T {
	if len(b.cur) == cap(b.cur) {
		if b.cur != nil {
			b.full = append(b.full, b.cur)
		}
		size := 16
		if c := cap(b.cur); c > 0 {
			size = min(2*c, maxBlock)
		}
		b.cur = make([]T, 0, size)
	}
	var zero T
	b.cur = append(b.cur, zero)
	b.n++
	return &b.cur[len(b.cur)-1]
}

// len is the number of elements so far.
func (b *blocks[T]) len() int { return b.n }

// slice returns the elements as one slice (non-nil, possibly empty) and
// empties b.
func (b *blocks[T]) slice() []T {
	if len(b.full) == 0 {
		out := b.cur
		if out == nil {
			out = []T{}
		}
		*b = blocks[T]{}
		return out
	}
	out := make([]T, 0, b.n)
	for i, blk := range b.full {
		out = append(out, blk...)
		b.full[i] = nil
	}
	out = append(out, b.cur...)
	*b = blocks[T]{}
	return out
}

// all yields the elements in order, by pointer.
func (b *blocks[T]) all() iter.Seq[*T] {
	return func(yield func(*T) bool) {
		for _, blk := range b.full {
			for i := range blk {
				if !yield(&blk[i]) {
					return
				}
			}
		}
		for i := range b.cur {
			if !yield(&b.cur[i]) {
				return
			}
		}
	}
}
