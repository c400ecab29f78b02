//go:build !unix

package main

import "testing"

// testMkfifo: no named pipes on this platform.
func testMkfifo(t *testing.T, path string) bool { return false }
