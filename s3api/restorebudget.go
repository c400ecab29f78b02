package s3api

// restorebudget.go: Config.MaxRestoreBytesPerKey, the bytes of archived
// objects one access key may ask wharf to restore per hour. Every
// RestoreObject costs money (per request and per GB retrieved), and a key
// with restore rights could otherwise restore a whole upload. A restore is
// charged before any RestoreObject is sent, for the archived objects of
// the file that have no restore yet (each at least minRestoreCharge, so
// that many small objects count by their requests too), in the file's
// order while the budget holds them (a file larger than the budget is
// restored over several requests, each spending at most the budget and
// one object), and refunded for those it then did not send; when not even
// the first fits it is answered 503 SlowDown
// with Retry-After (when enough of the budget is back), as S3 answers a
// throttle, and counted in wharf_restores_throttled_total.

import (
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api/internal/tokenbucket"
)

// minRestoreCharge is the least an archived object is charged against
// the budget, whatever its size.
const minRestoreCharge = 128 << 10

// restoreCharge is what restoring an object of size bytes is charged.
func restoreCharge(size int64) int64 { return max(size, minRestoreCharge) }

// objectCharge is what restoring o is charged: by the larger of the
// manifest's size and the store's (its listing or HEAD), since the store
// bills what it holds and the manifest is the uploader's word.
func objectCharge(o archiveview.StorageObject) int64 {
	return restoreCharge(max(o.Size, o.ObjectClass.Size))
}

// restoreBudget is a token bucket of bytes per access key
// (tokenbucket): full at perHour, refilled at perHour per hour. A restore
// is let through when the bucket holds its charge or is full (so a file
// larger than the whole budget can still be restored, once per hour's
// worth); it may then go below zero, and the key waits until it is back.
// Its keys are the configured access keys (bounded).
type restoreBudget struct {
	perHour   int64 // 0 = off
	throttled prometheus.Counter
	keys      *tokenbucket.Buckets
}

func newRestoreBudget(perHour int64, reg prometheus.Registerer) (*restoreBudget, error) {
	b := &restoreBudget{perHour: perHour, keys: tokenbucket.New(float64(perHour), float64(perHour), time.Hour, 0),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_restores_throttled_total",
			Help: "RestoreObject requests answered 503 SlowDown because their access key had used its --max-restore-bytes-per-key for the hour (nothing was sent to the store).",
		})}
	if reg != nil {
		if err := reg.Register(b.throttled); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// takeFor charges key at now for restoring st's archived objects that
// have no restore, in the file's order, while its budget holds them: the
// first also when it is larger than what the bucket holds, if the bucket
// is full (so that any object can be restored), none after the first
// that does not fit. It returns the objects to restore (those charged and
// those restored or being restored already, which send nothing) and the
// charge, and how many that need a restore it left for a later request.
// When none that needs a restore fits, ok is false and wait is how long
// until the first does. A request that is not valid for one of the
// objects, or needs nothing, is let through uncharged with every object
// (the restore then refuses it, or sends nothing).
func (b *restoreBudget) takeFor(key string, st archiveview.FileStorage, now time.Time, req backend.RestoreRequest) (objs []archiveview.StorageObject, charged int64, left int, ok bool, wait time.Duration) {
	if b.perHour <= 0 || restoreNeed(st, now, req) == 0 {
		return st.Objects, 0, 0, true, 0
	}
	objs = make([]archiveview.StorageObject, 0, len(st.Objects))
	stopped := false
	for _, o := range st.Objects {
		switch {
		case !o.Archived():
			continue
		case o.Restore.Ongoing || o.Restore.Done(now):
			objs = append(objs, o)
			continue
		case stopped:
			left++
			continue
		}
		c := objectCharge(o)
		took, w := b.keys.Take(key, float64(c), now)
		if !took {
			if charged == 0 {
				wait = w
			}
			stopped = true
			left++
			continue
		}
		charged += c
		objs = append(objs, o)
	}
	if charged == 0 {
		b.throttled.Inc()
		return nil, 0, left, false, wait
	}
	return objs, charged, left, true, 0
}

// give refunds n bytes charged to key (restores not sent after all).
func (b *restoreBudget) give(key string, n int64, now time.Time) {
	if b.perHour <= 0 || n <= 0 {
		return
	}
	b.keys.Give(key, float64(n), now)
}

// restoreNeed is the charge of restoring st's archived objects that have
// no restore (started or finished) at now: 0 when req is not valid for
// one of them (the restore is then refused as invalid, sending nothing,
// as S3 checks a request before any throttle).
func restoreNeed(st archiveview.FileStorage, now time.Time, req backend.RestoreRequest) int64 {
	var need int64
	for _, o := range st.Objects {
		if !o.Archived() {
			continue
		}
		if backend.CheckRestore(o.Class, o.Tier, req) != nil {
			return 0
		}
		if !o.Restore.Ongoing && !o.Restore.Done(now) {
			need += objectCharge(o)
		}
	}
	return need
}

// restoreSentCharge is the charge of the objects rep sent a RestoreObject
// for (billed whatever the outcome).
func restoreSentCharge(rep archiveview.RestoreReport) int64 {
	var n int64
	for _, o := range rep.Objects {
		if o.Sent {
			n += objectCharge(o.StorageObject)
		}
	}
	return n
}

// retryAfterSeconds is wait as a Retry-After value: whole seconds, at
// least 1.
func retryAfterSeconds(wait time.Duration) string {
	return fmt.Sprint(max(1, int64(math.Ceil(wait.Seconds()))))
}
