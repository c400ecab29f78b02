package main

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
)

// maxSecretFile bounds what is read of a secret file.
const maxSecretFile = 4096

// readSecretFile reads a shared secret named by flag (the
// --index-cache-secret-file and --peer-secret-file rule): the file's bytes
// without trailing whitespace (a newline left by an editor or echo), at
// least min of them, at most maxSecretFile. The file must be a local,
// regular file that other users cannot read (on Unix: no permission bits
// for "other"; group-readable is allowed, as for a secret mounted for a
// service group). A URL is refused by name: the secret is each replica's
// own file.
func readSecretFile(flag, path string, min int) ([]byte, error) {
	fail := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("%s %s: "+format, append([]any{flag, path}, args...)...)
	}
	if strings.Contains(path, "://") {
		return fail("a URL, not a local file: the secret is read from each replica's own disk (a mounted secret)")
	}
	data, mode, err := readLocalFile(flag, path, maxSecretFile)
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" && mode.Perm()&0o007 != 0 {
		return fail("readable by every user (mode %#o): make it private (chmod 600, or 640 for a service group; in Kubernetes, defaultMode: 0400)", mode.Perm())
	}
	data = bytes.TrimRight(data, " \t\r\n")
	if len(data) < min {
		return fail("%d bytes of secret, want at least %d (create one with: openssl rand -hex 32 > FILE)", len(data), min)
	}
	return data, nil
}
