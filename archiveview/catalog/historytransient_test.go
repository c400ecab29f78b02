package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
)

// TestDatasetHistoryTransientOpen: an older version that does not open
// for a reason that may not repeat (its open timed out, the index memory
// was in use until the deadline, a deadline passed, the store was
// unavailable) fails the build, the error wrapping backend.ErrUnavailable
// (503: the next request builds again), instead of ending the history
// there for as long as the version is served (its older versions then
// 404 NoSuchVersion although they exist). A version whose manifest is gone
// ends it cleanly, and one that does not open for another reason ends it,
// as before.
func TestDatasetHistoryTransientOpen(t *testing.T) {
	d := publishHistory(t)
	store := backend.NewFileStore(d.dir)
	ctx := context.Background()
	open := func(ctx context.Context, key string) (*archiveview.Archive, error) {
		return archiveview.Open(ctx, store, dsBucket, key, archiveview.Options{AllowKeyPrefixes: []string{dsPrefix + "/v/"}})
	}
	cur, err := open(ctx, d.mans[3])
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	cases := []struct {
		name  string
		err   error
		fails bool   // the build fails (retried), else the history ends at V2
		ended string // why it ends, when it does
	}{
		{"open timeout", fmt.Errorf("%w after 1s (--open-timeout): %w", ErrOpenTimeout, context.DeadlineExceeded), true, ""},
		{"index memory", fmt.Errorf("archive x: %w: waited: %w", ErrIndexMemory, context.DeadlineExceeded), true, ""},
		{"deadline", fmt.Errorf("GET manifest: %w", context.DeadlineExceeded), true, ""},
		{"unavailable", fmt.Errorf("GET manifest: %w", backend.ErrUnavailable), true, ""},
		{"pruned", fmt.Errorf("GET manifest: %w", backend.ErrNotFound), false, "its manifest is gone (pruned)"},
		{"corrupt", fmt.Errorf("manifest: %w", archiveview.ErrCorrupt), false, "did not open"},
	}
	for _, c := range cases {
		for _, ahead := range []int{1, 2} {
			h, err := BuildHistory(ctx, HistoryParams{
				Store: store, Ref: DatasetRef{Bucket: dsBucket, Prefix: dsPrefix}, Archive: cur, Previous: histIDs[2], Ahead: ahead,
				Current: HistoryVersion{ID: histIDs[3], ManifestKey: d.mans[3]},
				Open: func(ctx context.Context, v HistoryVersion) (*archiveview.Archive, error) {
					if v.ID == histIDs[1] {
						return nil, c.err
					}
					return open(ctx, v.ManifestKey)
				},
				Close: func(a *archiveview.Archive, _ bool) { a.Close() },
			})
			switch {
			case c.fails && (err == nil || !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), histIDs[1])):
				ended := ""
				if h != nil {
					ended = h.Ended()
				}
				t.Errorf("%s (ahead %d): %v (history ends: %q), want a failed build naming version %s wrapping ErrUnavailable", c.name, ahead, err, ended, histIDs[1])
			case !c.fails && err != nil:
				t.Errorf("%s (ahead %d): %v, want a history ending at %s", c.name, ahead, err, histIDs[1])
			case !c.fails && (len(h.Versions()) != 2 || !strings.Contains(h.Ended(), c.ended)):
				t.Errorf("%s (ahead %d): %d versions, ends %q, want 2 ending %q", c.name, ahead, len(h.Versions()), h.Ended(), c.ended)
			}
			if h != nil {
				h.Close()
			}
		}
	}
}

// slowOnce delays the first GET of one key past any deadline (until ctx
// ends).
type slowOnce struct {
	backend.Store
	key string

	mu   sync.Mutex
	done bool
}

func (s *slowOnce) Get(ctx context.Context, b, k string) (io.ReadCloser, backend.ObjectInfo, error) {
	s.mu.Lock()
	first := k == s.key && !s.done
	if first {
		s.done = true
	}
	s.mu.Unlock()
	if first {
		<-ctx.Done()
		return nil, backend.ObjectInfo{}, ctx.Err()
	}
	return s.Store.Get(ctx, b, k)
}

// TestDatasetHistorySlowOpenRetried: wharf serve's history over a store
// where an older version's manifest is slower than --open-timeout once:
// the request gets a retry (ErrUnavailable), and the next request builds
// the whole history. The old code ended the history at that version for
// as long as the bucket served the current one.
func TestDatasetHistorySlowOpenRetried(t *testing.T) {
	d := publishHistory(t)
	store := &slowOnce{Store: backend.NewFileStore(d.dir), key: d.mans[1]}
	cm := NewManager(Config{Store: store, Aliases: []Alias{{Name: "ocean", Target: "s3://lake/ocean@current"}},
		WaitOpen: true, RetireGrace: time.Hour, OpenTimeout: 200 * time.Millisecond, OpenWait: 5 * time.Second})
	defer cm.CloseAll()
	ctx := context.Background()
	if err := cm.Scan(ctx, true); err != nil {
		t.Fatal(err)
	}
	a := bucketArchive(t, cm, "ocean")
	if _, _, err := cm.History(ctx, "ocean", a, true); err == nil || !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("a build whose open timed out: %v, want an error wrapping ErrUnavailable", err)
	}
	h, _, err := cm.History(ctx, "ocean", a, true)
	if err != nil {
		t.Fatal(err)
	}
	checkHistory(t, h, histWant{"a.txt": {"V4", "V2", "V1"}, "b.txt": {"V1"}, "d.txt": {"V4", "DM3", "V1"}, "e.txt": {"DM4", "V2"}})
}

// TestDatasetHistoryLookupTransientOpen: a versionId= read whose older
// version does not open for a reason that may not repeat (index memory in
// use, an open past its deadline) fails wrapping backend.ErrUnavailable
// (503 SlowDown: retry), not as an internal error (500); the next read
// opens it.
func TestDatasetHistoryLookupTransientOpen(t *testing.T) {
	d := publishHistory(t)
	store := backend.NewFileStore(d.dir)
	ctx := context.Background()
	open := func(ctx context.Context, key string) (*archiveview.Archive, error) {
		return archiveview.Open(ctx, store, dsBucket, key, archiveview.Options{AllowKeyPrefixes: []string{dsPrefix + "/v/"}})
	}
	cur, err := open(ctx, d.mans[3])
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	for _, cause := range []error{
		fmt.Errorf("archive x: %w: waited: %w", ErrIndexMemory, context.DeadlineExceeded),
		fmt.Errorf("%w after 1s (--open-timeout): %w", ErrOpenTimeout, context.DeadlineExceeded),
	} {
		var mu sync.Mutex
		failing := false
		h, err := BuildHistory(ctx, HistoryParams{
			Store: store, Ref: DatasetRef{Bucket: dsBucket, Prefix: dsPrefix}, Archive: cur, Previous: histIDs[2],
			Current: HistoryVersion{ID: histIDs[3], ManifestKey: d.mans[3]},
			Open: func(ctx context.Context, v HistoryVersion) (*archiveview.Archive, error) {
				mu.Lock()
				f := failing
				mu.Unlock()
				if f {
					return nil, cause
				}
				return open(ctx, v.ManifestKey)
			},
			Close: func(a *archiveview.Archive, _ bool) { a.Close() },
		})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		failing = true
		mu.Unlock()
		if _, _, err := h.Lookup(ctx, "a.txt", histIDs[0]); err == nil || !errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("%v: a.txt as of V1: %v, want an error wrapping ErrUnavailable", cause, err)
		}
		mu.Lock()
		failing = false
		mu.Unlock()
		if data, _, ok := readVersion(t, h, cur, "a.txt", histIDs[0]); !ok || string(data) != "a1" {
			t.Errorf("%v: a.txt as of V1 on retry: %q %v", cause, data, ok)
		}
		h.Close()
	}
}
