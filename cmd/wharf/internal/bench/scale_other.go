//go:build !linux

package bench

import "errors"

// evictIndexFiles needs posix_fadvise (Linux).
func evictIndexFiles(dir string) (int64, error) {
	return 0, errors.New("bench --scale: evicting index files from the page cache needs Linux")
}
