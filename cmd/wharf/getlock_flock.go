//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"errors"
	"os"
	"syscall"
)

// lockTemp takes an exclusive flock of f without waiting. get holds one
// on each temporary file it writes for as long as it writes it (the
// kernel drops it when the process dies, SIGKILL included), so a later
// run that gets the lock knows no live get is writing the file. locked
// false with a nil error: another holds it; an error: this file system
// has no flock (NFS without a lock daemon), and age decides.
func lockTemp(f *os.File) (locked bool, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB) }); err != nil {
		return false, err
	}
	if errors.Is(ferr, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return ferr == nil, ferr
}
