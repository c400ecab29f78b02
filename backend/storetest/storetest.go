// Package storetest is the conformance suite every backend.Store
// implementation runs (as go-cloud's drivertest is for its drivers): a
// store is correct for wharf when Run passes.
//
// Run checks the Store contract of backend/store.go on objects the
// fixture seeds: exact ranged reads with the object's size and ETag,
// If-Match (ErrChanged), ranges outside the object (ErrInvalidRange),
// whole-object reads, Stat agreeing with reads, missing objects
// (ErrNotFound in a *backend.Error naming bucket and key), and listings in
// key order under a prefix. It then checks the optional capabilities: a
// store that must write (Fixture.Puts) has backend.AsPutter and its
// PutIfAbsent writes once and refuses the second write; a wrapper keeps
// each capability of the store it wraps (Fixture.Inner): it is a Restorer
// or Putter (by backend.AsRestorer / AsPutter) exactly when the inner
// store is, and a restore through it answers what the inner store answers.
//
// The package is for tests; it is never linked into the wharf binary
// (cmd/wharf/deps_test.go).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/backend"
)

// Fixture is one store under test.
type Fixture struct {
	// Store is the store under test.
	Store backend.Store
	// Bucket exists in the store and is empty.
	Bucket string
	// Put seeds an object so that Store reads it.
	Put func(t *testing.T, bucket, key string, data []byte)
	// Puts: the store must be able to write once (backend.Putter).
	Puts bool
	// Restores: the store must restore (backend.Restorer).
	Restores bool
	// Inner, for a wrapper, is the store it wraps: the wrapper must keep
	// each of its optional capabilities.
	Inner backend.Store
	// Archive, when set, makes bucket/key need a restore (a Glacier
	// model), so a restore through Store and through Inner can be compared.
	Archive func(bucket, key string)
}

// Run runs the suite; newFixture is called once per subtest and must give
// a fresh, empty bucket each time.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Fixture)
	}{
		{"ReadRange", testReadRange},
		{"ReadRangeIfMatch", testIfMatch},
		{"ReadRangeOutside", testOutside},
		{"GetStat", testGetStat},
		{"NotFound", testNotFound},
		{"List", testList},
		{"Capabilities", testCapabilities},
		{"PutIfAbsent", testPutIfAbsent},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newFixture(t)) })
	}
}

// data returns n deterministic bytes for seed.
func data(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func readRange(f Fixture, key string, off, n int64, ifMatch string) ([]byte, backend.ObjectInfo, error) {
	rc, info, err := f.Store.ReadRange(context.Background(), f.Bucket, key, off, n, ifMatch)
	if err != nil {
		return nil, info, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return b, info, err
}

// wantStoreErr checks that err wraps kind inside a *backend.Error naming
// bucket and key.
func wantStoreErr(t *testing.T, what string, err, kind error, bucket, key string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: error %v, want one wrapping %q", what, err, kind)
	}
	var be *backend.Error
	if !errors.As(err, &be) || be.Bucket != bucket || be.Key != key {
		t.Fatalf("%s: error %v does not name %s/%s in a *backend.Error", what, err, bucket, key)
	}
}

func testReadRange(t *testing.T, f Fixture) {
	src := data(1, 100_000)
	f.Put(t, f.Bucket, "dir/obj", src)
	for _, r := range [][2]int64{{0, 1}, {0, 100_000}, {99_999, 1}, {12_345, 50_000}, {65_536, 34_464}} {
		got, info, err := readRange(f, "dir/obj", r[0], r[1], "")
		if err != nil {
			t.Fatalf("ReadRange(%d, %d): %v", r[0], r[1], err)
		}
		if !bytes.Equal(got, src[r[0]:r[0]+r[1]]) {
			t.Fatalf("ReadRange(%d, %d): %d bytes, not the object's", r[0], r[1], len(got))
		}
		if info.Size != int64(len(src)) || info.ETag == "" || strings.Contains(info.ETag, `"`) {
			t.Fatalf("ReadRange(%d, %d): info size %d etag %q, want the object's size and an unquoted ETag", r[0], r[1], info.Size, info.ETag)
		}
	}
}

func testIfMatch(t *testing.T, f Fixture) {
	src := data(2, 5000)
	f.Put(t, f.Bucket, "k", src)
	st, err := f.Store.Stat(context.Background(), f.Bucket, "k")
	if err != nil {
		t.Fatal(err)
	}
	got, info, err := readRange(f, "k", 10, 100, st.ETag)
	if err != nil || !bytes.Equal(got, src[10:110]) || info.ETag != st.ETag {
		t.Fatalf("ReadRange with the current ETag: %v (etag %q, Stat's %q)", err, info.ETag, st.ETag)
	}
	_, _, err = readRange(f, "k", 10, 100, "0123456789abcdef0123456789abcdef")
	wantStoreErr(t, "ReadRange with another ETag", err, backend.ErrChanged, f.Bucket, "k")
}

func testOutside(t *testing.T, f Fixture) {
	f.Put(t, f.Bucket, "k", data(3, 5000))
	for _, r := range [][2]int64{{5000, 1}, {4990, 11}, {0, 0}, {-1, 5}} {
		_, _, err := readRange(f, "k", r[0], r[1], "")
		wantStoreErr(t, fmt.Sprintf("ReadRange(%d, %d) of a 5000-byte object", r[0], r[1]), err, backend.ErrInvalidRange, f.Bucket, "k")
	}
}

func testGetStat(t *testing.T, f Fixture) {
	ctx := context.Background()
	src := data(4, 70_000)
	f.Put(t, f.Bucket, "a/b/c.bin", src)
	rc, info, err := f.Store.Get(ctx, f.Bucket, "a/b/c.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, src) || info.Size != int64(len(src)) {
		t.Fatalf("Get: %v, %d bytes, size %d", err, len(got), info.Size)
	}
	st, err := f.Store.Stat(ctx, f.Bucket, "a/b/c.bin")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != info.Size || st.ETag != info.ETag || st.Key != "a/b/c.bin" {
		t.Fatalf("Stat %+v disagrees with Get %+v", st, info)
	}
	empty := []byte{}
	f.Put(t, f.Bucket, "empty", empty)
	rc, info, err = f.Store.Get(ctx, f.Bucket, "empty")
	if err != nil {
		t.Fatalf("Get of an empty object: %v", err)
	}
	got, err = io.ReadAll(rc)
	rc.Close()
	if err != nil || len(got) != 0 || info.Size != 0 {
		t.Fatalf("Get of an empty object: %v, %d bytes, size %d", err, len(got), info.Size)
	}
}

func testNotFound(t *testing.T, f Fixture) {
	ctx := context.Background()
	_, _, err := f.Store.Get(ctx, f.Bucket, "missing")
	wantStoreErr(t, "Get", err, backend.ErrNotFound, f.Bucket, "missing")
	_, err = f.Store.Stat(ctx, f.Bucket, "missing")
	wantStoreErr(t, "Stat", err, backend.ErrNotFound, f.Bucket, "missing")
	_, _, err = f.Store.ReadRange(ctx, f.Bucket, "missing", 0, 10, "")
	wantStoreErr(t, "ReadRange", err, backend.ErrNotFound, f.Bucket, "missing")
	_, _, err = f.Store.Get(ctx, "no-such-bucket-storetest", "k")
	wantStoreErr(t, "Get in a missing bucket", err, backend.ErrNotFound, "no-such-bucket-storetest", "k")
	if backend.IsRetryable(err) {
		t.Fatalf("a missing object is retryable: %v", err)
	}
}

func testList(t *testing.T, f Fixture) {
	keys := []string{"p/a", "p/b/c", "p/b/d", "p/z", "q/x"}
	for i, k := range keys {
		f.Put(t, f.Bucket, k, data(byte(10+i), 10+i))
	}
	var got []string
	err := f.Store.List(context.Background(), f.Bucket, "p/", func(info backend.ObjectInfo) error {
		got = append(got, info.Key)
		want := int64(10 + indexOf(keys, info.Key))
		if info.Size != want || info.ETag == "" {
			return fmt.Errorf("%s: size %d etag %q, want size %d and an ETag", info.Key, info.Size, info.ETag, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "p/a p/b/c p/b/d p/z" {
		t.Fatalf("List(p/) = %q, want the four p/ keys in order", got)
	}
	stop := errors.New("stop")
	n := 0
	err = f.Store.List(context.Background(), f.Bucket, "", func(backend.ObjectInfo) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("List: fn's error not returned at once (%v after %d calls)", err, n)
	}
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

func testCapabilities(t *testing.T, f Fixture) {
	_, restores := backend.AsRestorer(f.Store)
	_, puts := backend.AsPutter(f.Store)
	if f.Restores && !restores {
		t.Errorf("the store must restore but backend.AsRestorer says it cannot")
	}
	if f.Puts && !puts {
		t.Errorf("the store must write but backend.AsPutter says it cannot")
	}
	if f.Inner == nil {
		return
	}
	ir, innerRestores := backend.AsRestorer(f.Inner)
	_, innerPuts := backend.AsPutter(f.Inner)
	if restores != innerRestores {
		t.Errorf("the wrapper restores: %v, the store it wraps: %v (an optional capability dropped or invented)", restores, innerRestores)
	}
	if puts != innerPuts {
		t.Errorf("the wrapper writes: %v, the store it wraps: %v (an optional capability dropped or invented)", puts, innerPuts)
	}
	if _, mp := backend.AsMatchPutter(f.Store); mp {
		if _, innerMP := backend.AsMatchPutter(f.Inner); !innerMP {
			t.Errorf("the wrapper replaces conditionally but the store it wraps cannot (a capability invented)")
		}
	}
	if !restores || !innerRestores {
		return
	}
	// The same restore through both answers the same.
	ctx := context.Background()
	f.Put(t, f.Bucket, "cold", data(5, 100))
	f.Put(t, f.Bucket, "warm", data(6, 100))
	if f.Archive != nil {
		f.Archive(f.Bucket, "cold")
	}
	wr, _ := backend.AsRestorer(f.Store)
	req := backend.RestoreRequest{Days: 1}
	for _, key := range []string{"warm", "cold"} {
		gotRes, gotErr := wr.Restore(ctx, f.Bucket, key, req)
		if key == "cold" {
			// The second restore of an archived object is "in progress".
			gotRes, gotErr = wr.Restore(ctx, f.Bucket, key, req)
		}
		wantRes, wantErr := ir.Restore(ctx, f.Bucket, key, req)
		if gotRes != wantRes || kind(gotErr) != kind(wantErr) {
			t.Errorf("Restore(%s) through the wrapper: %v %v; through the store it wraps: %v %v", key, gotRes, gotErr, wantRes, wantErr)
		}
	}
}

// kind is the sentinel an error wraps, for comparing two errors' meaning.
func kind(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range []error{backend.ErrNotArchived, backend.ErrInvalidRestore, backend.ErrArchived, backend.ErrNotImplemented,
		backend.ErrNotFound, backend.ErrAccessDenied, backend.ErrChanged, backend.ErrInvalidRange, backend.ErrUnavailable,
		backend.ErrRefused, backend.ErrBadResponse} {
		if errors.Is(err, k) {
			return k
		}
	}
	return err
}

func testPutIfAbsent(t *testing.T, f Fixture) {
	p, ok := backend.AsPutter(f.Store)
	if !ok {
		if f.Puts {
			t.Fatal("the store must write but is no backend.Putter")
		}
		return
	}
	ctx := context.Background()
	first, second := data(7, 3000), data(8, 3000)
	wrote, err := p.PutIfAbsent(ctx, f.Bucket, "idx/one", bytes.NewReader(first), int64(len(first)))
	if err != nil || !wrote {
		t.Fatalf("first PutIfAbsent: %v, %v", wrote, err)
	}
	wrote, err = p.PutIfAbsent(ctx, f.Bucket, "idx/one", bytes.NewReader(second), int64(len(second)))
	if err != nil || wrote {
		t.Fatalf("second PutIfAbsent: wrote %v, %v; want false, nil (the first writer wins)", wrote, err)
	}
	rc, _, err := f.Store.Get(ctx, f.Bucket, "idx/one")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("after two PutIfAbsent: %v, %d bytes; want the first writer's bytes", err, len(got))
	}
}
