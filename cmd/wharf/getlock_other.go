//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import (
	"errors"
	"os"
)

// lockTemp: no flock here; a temporary file is judged by its age (and on
// Windows a file another process has open cannot be removed).
func lockTemp(*os.File) (bool, error) {
	return false, errors.ErrUnsupported
}
