package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// FileStore is a Store over a local directory: the object bucket/key is the
// file DIR/<bucket>/<key>, with "/" in keys mapping to directories.
//
// Keys can never reach outside DIR/<bucket>: keys that are empty, absolute,
// contain NUL, or have an empty, "." or ".." segment are rejected (they
// cannot name an object in a file store, so the error wraps ErrNotFound),
// and every open goes through an os.Root, so a symlink that points outside
// DIR/<bucket> is refused (ErrAccessDenied). Symlinks inside the bucket
// directory are followed.
//
// Only regular files are objects: a named pipe, device or socket at a
// key is ErrNotFound, and is opened without blocking (a FIFO's plain open
// would wait for a writer forever).
//
// ETag: a file has no content hash to hand, and hashing on every Stat would
// read whole chunks. The ETag is therefore "<mtime-ns-hex>-<size-hex>",
// which changes whenever the file is rewritten (new mtime) or resized, and
// is stable otherwise. It is not an MD5 and must not be compared with one.
//
// FileStore holds no open descriptors between calls and is safe for
// concurrent use.
type FileStore struct {
	dir string
}

// NewFileStore returns a FileStore rooted at dir. The directory is not
// checked here; a missing directory makes every call fail with ErrNotFound.
func NewFileStore(dir string) *FileStore {
	return &FileStore{dir: dir}
}

// Dir returns the root directory.
func (s *FileStore) Dir() string { return s.dir }

// fileETag is the FileStore's ETag for a file: mtime and size, documented on
// FileStore.
func fileETag(fi fs.FileInfo) string {
	return strconv.FormatInt(fi.ModTime().UnixNano(), 16) + "-" + strconv.FormatInt(fi.Size(), 16)
}

func fileInfo(key string, fi fs.FileInfo) ObjectInfo {
	return ObjectInfo{Key: key, Size: fi.Size(), ETag: fileETag(fi), LastModified: fi.ModTime().UTC()}
}

// errBadName is the detail for keys and buckets a file store cannot hold.
var errBadName = errors.New("not a valid file store name")

func validBucketName(bucket string) error {
	if bucket == "" || bucket == "." || bucket == ".." || strings.ContainsAny(bucket, "/\x00") {
		return fmt.Errorf("%w: %w: bucket %q", ErrNotFound, errBadName, bucket)
	}
	return nil
}

func validFileKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsRune(key, 0) {
		return fmt.Errorf("%w: %w: key %q", ErrNotFound, errBadName, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %w: key %q", ErrNotFound, errBadName, key)
		}
	}
	return nil
}

// classifyFSErr maps a filesystem error to a sentinel, keeping the cause.
// The text keeps only what the filesystem said (the errno's words, not
// the path, which is the key again); a plain "no such file" says nothing
// the sentinel does not.
func classifyFSErr(err error) error {
	wrap := func(kind error) error {
		text := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			text = pe.Err.Error()
		}
		if errors.Is(err, fs.ErrNotExist) {
			text = ""
		}
		return &causeError{kind: kind, text: text, cause: err}
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, fs.ErrNotExist),
		errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP):
		return wrap(ErrNotFound)
	case errors.Is(err, fs.ErrPermission):
		return wrap(ErrAccessDenied)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		// EIO, EMFILE, ENFILE, EAGAIN...: the disk or process, not the key.
		return wrap(ErrUnavailable)
	}
	// os.Root refusing a path that escapes the root (via a symlink) is the
	// only non-errno failure of an open.
	return wrap(ErrAccessDenied)
}

// openBucket opens DIR/<bucket> as an os.Root, refusing a bucket directory
// that is a symlink leading outside DIR.
func (s *FileStore) openBucket(bucket string) (*os.Root, error) {
	if err := validBucketName(bucket); err != nil {
		return nil, err
	}
	top, err := os.OpenRoot(s.dir)
	if err != nil {
		return nil, classifyFSErr(err)
	}
	defer top.Close()
	r, err := top.OpenRoot(bucket)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &causeError{kind: ErrNotFound, also: ErrNoSuchBucket, text: fmt.Sprintf("no bucket directory %s", path.Join(s.dir, bucket)), cause: err}
	}
	if err != nil {
		return nil, classifyFSErr(err)
	}
	return r, nil
}

// open opens bucket/key as a regular file and stats it.
func (s *FileStore) open(ctx context.Context, op, bucket, key string) (*os.File, fs.FileInfo, error) {
	fail := func(err error) (*os.File, fs.FileInfo, error) {
		return nil, nil, &Error{Op: op, Bucket: bucket, Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := validFileKey(key); err != nil {
		return fail(err)
	}
	root, err := s.openBucket(bucket)
	if err != nil {
		return fail(err)
	}
	defer root.Close()
	// O_NONBLOCK: opening a named pipe plainly would wait for a writer,
	// forever and deaf to ctx; with it the open returns at once and the
	// file is refused below as not regular.
	// Reads of a regular file ignore the flag.
	f, err := root.OpenFile(key, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fail(classifyFSErr(err))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fail(classifyFSErr(err))
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return fail(fmt.Errorf("%w: not a regular file", ErrNotFound))
	}
	return f, fi, nil
}

// ReadRange implements Store. off+length beyond the file's size is
// ErrInvalidRange; a file that shrinks while being read yields ErrBadResponse.
func (s *FileStore) ReadRange(ctx context.Context, bucket, key string, off, length int64, ifMatch string) (io.ReadCloser, ObjectInfo, error) {
	if off < 0 || length <= 0 {
		return nil, ObjectInfo{}, &Error{Op: "range", Bucket: bucket, Key: key,
			Err: fmt.Errorf("%w: offset %d length %d", ErrInvalidRange, off, length)}
	}
	f, fi, err := s.open(ctx, "range", bucket, key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	info := fileInfo(key, fi)
	if ifMatch != "" && trimETag(ifMatch) != info.ETag {
		f.Close()
		return nil, info, &Error{Op: "range", Bucket: bucket, Key: key,
			Err: fmt.Errorf("%w: etag %q, expected %q", ErrChanged, info.ETag, trimETag(ifMatch))}
	}
	if off > info.Size || length > info.Size-off {
		f.Close()
		return nil, info, &Error{Op: "range", Bucket: bucket, Key: key,
			Err: fmt.Errorf("%w: bytes %d-%d of a %d-byte object", ErrInvalidRange, off, off+length-1, info.Size)}
	}
	body := &sectionCloser{SectionReader: io.NewSectionReader(f, off, length), f: f, ctx: ctx}
	return newExactReader(body, "range", bucket, key, length, classifyFSErr), info, nil
}

// Get implements Store.
func (s *FileStore) Get(ctx context.Context, bucket, key string) (io.ReadCloser, ObjectInfo, error) {
	f, fi, err := s.open(ctx, "get", bucket, key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	info := fileInfo(key, fi)
	body := &sectionCloser{SectionReader: io.NewSectionReader(f, 0, info.Size), f: f, ctx: ctx}
	return newExactReader(body, "get", bucket, key, info.Size, classifyFSErr), info, nil
}

// Stat implements Store.
func (s *FileStore) Stat(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	f, fi, err := s.open(ctx, "stat", bucket, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	f.Close()
	return fileInfo(key, fi), nil
}

// List implements Store. It walks DIR/<bucket> depth first, visiting each
// directory's entries sorted so that keys come out in byte order (a
// directory "a" sorts as "a/", so "a-b" comes before "a/c" exactly as in
// S3), and descends only into directories that can hold keys with prefix.
// Symlinks to regular files inside the bucket are listed; symlinks to
// directories are not followed (no cycles). Only regular files are objects.
func (s *FileStore) List(ctx context.Context, bucket, prefix string, fn func(ObjectInfo) error) error {
	fail := func(err error) error { return &Error{Op: "list", Bucket: bucket, Key: prefix, Err: err} }
	root, err := s.openBucket(bucket)
	if err != nil {
		return fail(err)
	}
	defer root.Close()
	fsys := root.FS()
	var walk func(dir, keyPrefix string) error
	walk = func(dir, keyPrefix string) error {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		entries, err := fs.ReadDir(fsys, dir)
		if err != nil {
			return fail(classifyFSErr(err))
		}
		type item struct {
			sortKey string
			name    string
			isDir   bool
		}
		items := make([]item, 0, len(entries))
		for _, e := range entries {
			name := e.Name()
			mode := e.Type()
			isDir := mode.IsDir()
			if mode&fs.ModeSymlink != 0 {
				fi, err := root.Stat(path.Join(dir, name))
				if err != nil || !fi.Mode().IsRegular() {
					continue // dangling, escaping or a directory link
				}
			} else if !isDir && !mode.IsRegular() {
				continue
			}
			sk := keyPrefix + name
			if isDir {
				sk += "/"
			}
			// Prune: the entry's keys all start with sk. It can match only
			// if sk and prefix agree on their common length.
			n := min(len(sk), len(prefix))
			if sk[:n] != prefix[:n] {
				continue
			}
			if !isDir && !strings.HasPrefix(sk, prefix) {
				continue
			}
			items = append(items, item{sortKey: sk, name: name, isDir: isDir})
		}
		sort.Slice(items, func(i, j int) bool { return items[i].sortKey < items[j].sortKey })
		for _, it := range items {
			p := path.Join(dir, it.name)
			if it.isDir {
				if err := walk(p, it.sortKey); err != nil {
					return err
				}
				continue
			}
			fi, err := root.Stat(p)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed while walking
				}
				return fail(classifyFSErr(err))
			}
			if err := fn(fileInfo(it.sortKey, fi)); err != nil {
				return err
			}
		}
		return nil
	}
	// Start at the deepest directory the prefix names whole ("a/b/" of
	// "a/b/c"), so a listing of one upload's prefix reads only its own
	// directories, not every sibling's (S3 answers a prefix without
	// scanning the bucket either). Every level must be a real directory:
	// the walk never follows a directory link, and a missing level holds
	// no key.
	dir, keyPrefix := ".", ""
	if i := strings.LastIndexByte(prefix, '/'); i > 0 {
		for _, seg := range strings.Split(prefix[:i], "/") {
			if seg == "" || seg == "." || seg == ".." {
				dir, keyPrefix = ".", "" // not a plain path: walk it all
				break
			}
			next := path.Join(dir, seg)
			fi, err := root.Lstat(next)
			if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
				return nil
			}
			if err != nil {
				return fail(classifyFSErr(err))
			}
			dir, keyPrefix = next, keyPrefix+seg+"/"
		}
	}
	return walk(dir, keyPrefix)
}

// sectionCloser reads a section of an open file, closing the file on Close
// and stopping when ctx is cancelled.
type sectionCloser struct {
	*io.SectionReader
	f   *os.File
	ctx context.Context
}

func (s *sectionCloser) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	return s.SectionReader.Read(p)
}

func (s *sectionCloser) Close() error { return s.f.Close() }
