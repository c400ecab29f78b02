//go:build !unix

package index

import "os"

// mapFile reads the file whole where mapping is not available: the index
// is then served from memory, with the same checks.
func mapFile(path string) ([]byte, error) { return os.ReadFile(path) }

func unmapFile([]byte) {}
