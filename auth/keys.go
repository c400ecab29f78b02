package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

// maxKeysFile bounds how much of a keys file is read.
const maxKeysFile = 1 << 20

// keysFile is the on-disk layout read by LoadKeysFile.
type keysFile struct {
	Keys []Key `yaml:"keys"`
}

// LoadKeysFile reads access keys from a YAML file:
//
//	keys:
//	  - access_key: AKIA...
//	    secret_key: "..."
//	    buckets: [photos, logs]   # optional; absent or empty = every bucket
//	    restore: [photos]         # optional: true (default), false, or buckets
//
// restore says where the key may ask for restores of archived objects when
// the server allows them (RestoreGrant).
//
// Unknown fields are errors (a misspelt "bucket:" must not silently grant
// every bucket), and so is a second YAML document. The result is checked the way New checks a Config. The file
// holds secrets: keep it readable by the wharf user only.
func LoadKeysFile(path string) ([]Key, error) {
	// Stat first: opening a FIFO would wait for a writer.
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("auth: keys file %s: %w", path, err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("auth: keys file %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: keys file %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("auth: keys file %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeysFile+1))
	if err != nil {
		return nil, fmt.Errorf("auth: keys file %s: %w", path, err)
	}
	if len(data) > maxKeysFile {
		return nil, fmt.Errorf("auth: keys file %s: larger than %d bytes", path, maxKeysFile)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var kf keysFile
	if err := dec.Decode(&kf); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("auth: keys file %s: empty", path)
		}
		return nil, fmt.Errorf("auth: keys file %s: %w", path, err)
	}
	// Keys in a second document ("---") would be dropped without a word;
	// an empty one (a trailing "---") holds none.
	for {
		var more yaml.Node
		err := dec.Decode(&more)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("auth: keys file %s: %w", path, err)
		}
		if len(more.Content) > 0 && more.Content[0].Tag != "!!null" {
			return nil, fmt.Errorf("auth: keys file %s: more than one YAML document (line %d); put every key under one \"keys:\"", path, more.Line)
		}
	}
	if len(kf.Keys) == 0 {
		return nil, fmt.Errorf("auth: keys file %s: no keys under \"keys:\"", path)
	}
	if _, err := New(Config{Keys: kf.Keys}); err != nil {
		return nil, fmt.Errorf("auth: keys file %s: %w", path, err)
	}
	return kf.Keys, nil
}

// KeysFromEnv returns the key named by WHARF_ACCESS_KEY and
// WHARF_SECRET_KEY (every bucket), nil if neither is set, and an error if
// only one is.
func KeysFromEnv() ([]Key, error) {
	ak, sk := os.Getenv("WHARF_ACCESS_KEY"), os.Getenv("WHARF_SECRET_KEY")
	switch {
	case ak == "" && sk == "":
		return nil, nil
	case ak == "" || sk == "":
		return nil, errors.New("auth: WHARF_ACCESS_KEY and WHARF_SECRET_KEY must be set together")
	}
	keys := []Key{{AccessKey: ak, SecretKey: sk}}
	if _, err := New(Config{Keys: keys}); err != nil {
		return nil, fmt.Errorf("auth: WHARF_ACCESS_KEY: %w", err)
	}
	return keys, nil
}
