package cargopack

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// File is one regular file to pack.
//
// Rel is the path relative to the source root, "/"-separated and without a
// leading slash. Size must be the exact number of bytes Open yields; Write
// fails (naming the file) if the content turns out shorter or longer. Open
// is called once per pass over the file (hashing for dedup, the compression
// sniff, archiving, each split part), so it must return the same bytes each
// time.
type File struct {
	Rel     string
	Size    int64
	ModTime time.Time
	Mode    fs.FileMode // permission bits (plus setuid/setgid/sticky); 0 means 0644
	Open    func() (io.ReadCloser, error)

	// info is the real os.FileInfo when the file came from FromDir, so tar
	// headers carry uid/gid/uname/gname exactly like CargoShip's
	// tar.FileInfoHeader(info, "").
	info fs.FileInfo
}

// FromDir lists the regular files under dir in filepath.Walk order (lexical
// within each directory), like CargoShip's scanner: directories, symlinks,
// FIFOs, sockets and devices are skipped. Rel is "/"-separated. Files are
// opened lazily.
func FromDir(dir string) ([]File, error) {
	var files []File
	err := filepath.Walk(dir, func(p string, info fs.FileInfo, err error) error {
		if err != nil {
			return fmt.Errorf("cargopack: walk %s: %w", p, err)
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return fmt.Errorf("cargopack: walk %s: %w", p, err)
		}
		full := p
		files = append(files, File{
			Rel:     filepath.ToSlash(rel),
			Size:    info.Size(),
			ModTime: info.ModTime(),
			Mode:    info.Mode(),
			Open:    func() (io.ReadCloser, error) { return os.Open(full) },
			info:    info,
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// FromMap is a test convenience: one file per map entry with mode 0644 and
// the given mtime, sorted by Rel (byte order).
func FromMap(m map[string][]byte, mtime time.Time) []File {
	files := make([]File, 0, len(m))
	for rel, data := range m {
		data := data
		files = append(files, File{
			Rel:     rel,
			Size:    int64(len(data)),
			ModTime: mtime,
			Mode:    0o644,
			Open:    func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Rel < files[j].Rel })
	return files
}

// fileInfo adapts a File to fs.FileInfo for tar.FileInfoHeader.
type fileInfo struct {
	name string
	f    *File
}

func (fi fileInfo) Name() string { return fi.name }
func (fi fileInfo) Size() int64  { return fi.f.Size }
func (fi fileInfo) Mode() fs.FileMode {
	m := fi.f.Mode
	if m&fs.ModePerm == 0 && m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) == 0 {
		m |= 0o644
	}
	return m &^ fs.ModeType // always a regular file
}
func (fi fileInfo) ModTime() time.Time { return fi.f.ModTime }
func (fi fileInfo) IsDir() bool        { return false }
func (fi fileInfo) Sys() any {
	if fi.f.info != nil {
		return fi.f.info.Sys()
	}
	return nil
}
