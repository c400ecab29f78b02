package index

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrFileChanged is wrapped by the error of a read of an index file mapped
// in place that faulted: the file was truncated under the server (written
// in place by something other than wharf, which only ever replaces index
// files by rename). The affected request fails; the process lives.
var ErrFileChanged = errors.New("index file changed while mapped")

// faultAddr is what a runtime error of a fault under
// debug.SetPanicOnFault has.
type faultAddr interface{ Addr() uintptr }

// Guard runs f, a reader of x's columns. For an index mapped in place, a
// fault reading the mapping (a page past the end of a file truncated in
// place, which would otherwise kill the process with SIGBUS) is turned
// into an error wrapping ErrFileChanged that names the file: the runtime
// panics instead of crashing (debug.SetPanicOnFault, set for this
// goroutine while f runs) and Guard recovers that panic. A panic with an
// error wrapping ErrFileChanged (Must, nested) is returned the same way;
// any other panic passes through. For an index in memory f just runs.
func (x *Index) Guard(f func()) (err error) {
	if x.mm == nil {
		f()
		return nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if fa, ok := r.(faultAddr); ok {
			err = fmt.Errorf("index %s: %w: fault at %#x reading the mapping (was the file written in place?)", x.mm.path, ErrFileChanged, fa.Addr())
			return
		}
		if e, ok := r.(error); ok && errors.Is(e, ErrFileChanged) {
			err = e
			return
		}
		panic(r)
	}()
	f()
	return nil
}

// Must is Guard for readers that cannot return an error (Stat, List): a
// fault becomes a panic with Guard's error, which fails the request that
// asked (net/http recovers a handler's panic and closes its connection)
// instead of the process.
func (x *Index) Must(f func()) {
	if err := x.Guard(f); err != nil {
		panic(err)
	}
}
