//go:build unix

package index

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// mapFile maps the file at path read-only and shared: its pages are the
// page cache's, resident only while used. syscall.Mmap is the whole need
// here (one read-only mapping, unix only), so no mapping module is added.
func mapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the mapping outlives the descriptor
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() <= 0 || fi.Size() > math.MaxInt {
		return nil, fmt.Errorf("index %s: %w: %d bytes, not a regular file of index size", path, ErrBadIndex, fi.Size())
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("index %s: mmap: %w", path, err)
	}
	return data, nil
}

func unmapFile(b []byte) { _ = syscall.Munmap(b) }
