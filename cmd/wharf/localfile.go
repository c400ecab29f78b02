package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// readLocalFile reads a small local file the operator names at start (a
// config, a certificate, a key), at most max bytes. It refuses what is not
// a regular file before opening it: opening a FIFO would wait for a writer,
// and a directory or device is never what was meant. The file opened is
// checked again (the name may have been replaced in between); its mode is
// returned with the bytes. Errors are "<what> <path>: reason".
func readLocalFile(what, path string, max int64) ([]byte, os.FileMode, error) {
	fail := func(err error) ([]byte, os.FileMode, error) {
		return nil, 0, fmt.Errorf("%s %s: %w", what, path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fail(err)
	}
	if !st.Mode().IsRegular() {
		return fail(errNotRegular)
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return fail(err)
	}
	if !st.Mode().IsRegular() {
		return fail(errNotRegular)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return fail(err)
	}
	if int64(len(data)) > max {
		return fail(fmt.Errorf("larger than %d bytes", max))
	}
	return data, st.Mode(), nil
}

// errNotRegular: a named file is a directory, FIFO, socket or device.
var errNotRegular = errors.New("not a regular file")
