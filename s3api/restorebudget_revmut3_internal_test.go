package s3api

import (
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
)

// TestRestoreBudgetTakeFor: the budget's charge, object by object: an
// object restored already (or being restored) is passed on free, those
// needing a restore are charged in the file's order while they fit, and
// none after the first that does not (a later smaller one is left for a
// later request too, so that a file is restored from its start).
func TestRestoreBudgetTakeFor(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	obj := func(key string, size int64, rs backend.RestoreStatus) archiveview.StorageObject {
		return archiveview.StorageObject{ObjectClass: chunkio.ObjectClass{Key: key, Class: backend.ClassGlacier, Restore: rs, RestoreKnown: true}, Size: size}
	}
	none := backend.RestoreStatus{}
	done := backend.RestoreStatus{Requested: true, Expiry: now.Add(time.Hour)}
	req := backend.RestoreRequest{Days: 1, Tier: backend.RetrievalBulk}
	for _, c := range []struct {
		name        string
		objs        []archiveview.StorageObject
		wantKeys    []string
		wantCharged int64
		wantLeft    int
	}{
		{"restored ones free", []archiveview.StorageObject{obj("done", 1<<20, done), obj("a", 128<<10, none), obj("b", 128<<10, none)},
			[]string{"done", "a", "b"}, 256 << 10, 0},
		{"none after the first that does not fit", []archiveview.StorageObject{obj("a", 128<<10, none), obj("big", 512<<10, none), obj("c", 128<<10, none)},
			[]string{"a"}, 128 << 10, 2},
	} {
		b, err := newRestoreBudget(256<<10, nil)
		if err != nil {
			t.Fatal(err)
		}
		objs, charged, left, ok, _ := b.takeFor("key", archiveview.FileStorage{Objects: c.objs}, now, req)
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		if !ok || charged != c.wantCharged || left != c.wantLeft || len(keys) != len(c.wantKeys) {
			t.Errorf("%s: objects %v, charged %d, left %d, ok %v; want %v, %d, %d, true", c.name, keys, charged, left, ok, c.wantKeys, c.wantCharged, c.wantLeft)
			continue
		}
		for i := range keys {
			if keys[i] != c.wantKeys[i] {
				t.Errorf("%s: objects %v; want %v", c.name, keys, c.wantKeys)
				break
			}
		}
	}
}

// TestRestoreSentCharge: the charge a restore keeps is that of the
// objects it sent a RestoreObject for (billed whatever the answer); the
// others (restored or being restored already, or not reached after a
// failure) are refunded.
func TestRestoreSentCharge(t *testing.T) {
	o := func(size int64, sent bool) archiveview.ObjectRestore {
		return archiveview.ObjectRestore{StorageObject: archiveview.StorageObject{ObjectClass: chunkio.ObjectClass{Class: backend.ClassGlacier}, Size: size}, Sent: sent}
	}
	rep := archiveview.RestoreReport{Objects: []archiveview.ObjectRestore{o(1<<20, true), o(4<<20, false), o(1, true), o(8<<20, false)}}
	if got, want := restoreSentCharge(rep), int64(1<<20+minRestoreCharge); got != want {
		t.Errorf("charge of the objects sent: %d; want %d (1 MiB and one least charge)", got, want)
	}
}
