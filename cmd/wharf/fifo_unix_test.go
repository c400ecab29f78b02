//go:build unix

package main

import (
	"syscall"
	"testing"
)

// testMkfifo makes a named pipe at path.
func testMkfifo(t *testing.T, path string) bool {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return true
}
