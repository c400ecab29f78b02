//go:build linux

package bench

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// evictIndexFiles drops the page-cache pages of the index files in dir
// (they are clean: written and synced) and returns their bytes.
func evictIndexFiles(dir string) (int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.widx"))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return n, err
		}
		if fi, err := f.Stat(); err == nil {
			n += fi.Size()
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return n, fmt.Errorf("evict %s from the page cache: %w", p, err)
		}
	}
	return n, nil
}
