package s3api_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/wharf-s3/wharf/s3api"
)

// TestRestoreBudgetStorageOnce: a restore under --max-restore-bytes-per-key
// works out the file's storage once, as one without a budget does: with
// every state stale at once (a TTL of 1 ns), the budget adds no HEAD. On
// the code before, the budget's look and the restore's own each refreshed
// every chunk (the second pass costs CPU, or HEADs once the TTL is short).
func TestRestoreBudgetStorageOnce(t *testing.T) {
	heads := func(cfg s3api.Config) int64 {
		f := newCostFixture(t, cfg)
		before := f.store.stats.Load()
		if status, err := restoreStatus(t, noRetryClient(t, f.url), "big.bin", 1, types.TierBulk); status != 202 {
			t.Fatalf("restore: %d %v; want 202", status, err)
		}
		return f.store.stats.Load() - before
	}
	plain := heads(s3api.Config{})
	budgeted := heads(s3api.Config{MaxRestoreBytesPerKey: 1 << 30})
	if budgeted != plain {
		t.Fatalf("a budgeted restore made %d backend HEADs, one without a budget %d; want the same", budgeted, plain)
	}
}
