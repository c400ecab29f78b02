package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// decode stream-decodes the manifest JSON from r. The large arrays (files,
// chunks, shards, deleted_paths) are decoded one element at a time, capped
// and checked as they arrive; every other top-level member is gathered and
// decoded with encoding/json's ordinary rules at the end. Member names match
// case-insensitively, as encoding/json does.
func decode(r io.Reader, key string, lim Limits) (*Manifest, error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, readErr(key, err, "decoding JSON")
	}
	m := &Manifest{}
	var (
		rest      bytes.Buffer // other members, re-assembled as one object
		sawFiles  bool
		encMarker bool
		wrapper   encryptedWrapper
		frames    int
	)
	rest.WriteByte('{')
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, readErr(key, err, "decoding JSON")
		}
		name, _ := tok.(string)
		switch {
		case strings.EqualFold(name, "files"):
			sawFiles = true
			err = decodeArray(dec, &m.Files, lim.MaxFiles, "files", func(i int, f *FileEntry) error {
				return checkFile(f, i, key, lim)
			})
		case strings.EqualFold(name, "chunks"):
			frames = 0
			err = decodeArray(dec, &m.Chunks, lim.MaxChunks, "chunks", func(i int, c *ChunkEntry) error {
				frames += len(c.Frames)
				if frames > lim.MaxFrames {
					return &capError{what: "frames", limit: int64(lim.MaxFrames), count: true}
				}
				return nil
			})
		case strings.EqualFold(name, "shards"):
			err = decodeArray(dec, &m.Shards, lim.MaxChunks, "shards", nil)
		case strings.EqualFold(name, "deleted_paths"):
			err = decodeArray(dec, &m.DeletedPaths, lim.MaxFiles, "deleted_paths", nil)
		default:
			var raw json.RawMessage
			if err = dec.Decode(&raw); err != nil {
				break
			}
			switch {
			case name == "encrypted_data" || name == "encrypted_dek":
				encMarker = true
				continue
			case name == "algorithm" || name == "binding_version":
				_ = json.Unmarshal([]byte(`{"`+name+`":`+string(raw)+`}`), &wrapper)
			}
			if rest.Len() > 1 {
				rest.WriteByte(',')
			}
			kb, _ := json.Marshal(name)
			rest.Write(kb)
			rest.WriteByte(':')
			rest.Write(raw)
		}
		if err != nil {
			var me *Error
			if errors.As(err, &me) {
				return nil, err
			}
			return nil, readErr(key, err, fmt.Sprintf("decoding %q", clip(name)))
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, readErr(key, err, "decoding JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the manifest object")
		}
		return nil, readErr(key, err, "decoding JSON")
	}
	if encMarker && !sawFiles {
		return nil, encryptedErr(key, wrapper)
	}
	rest.WriteByte('}')
	if err := json.Unmarshal(rest.Bytes(), m); err != nil {
		return nil, readErr(key, err, "decoding JSON")
	}
	return m, nil
}

// decodeArray decodes a JSON array (or null) into *dst one element at a
// time, failing with a capError before element max+1 is allocated, and
// calling each (if non-nil) on every element as soon as it is decoded.
func decodeArray[T any](dec *json.Decoder, dst *[]T, max int, what string, each func(int, *T) error) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*dst = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("%s: want an array, have %v", what, tok)
	}
	*dst = (*dst)[:0]
	for dec.More() {
		n := len(*dst)
		if n >= max {
			return &capError{what: what, limit: int64(max), count: true}
		}
		var zero T
		*dst = append(*dst, zero)
		if err := dec.Decode(&(*dst)[n]); err != nil {
			return err
		}
		if each != nil {
			if err := each(n, &(*dst)[n]); err != nil {
				return err
			}
		}
	}
	return expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, have %v", want, tok)
	}
	return nil
}
