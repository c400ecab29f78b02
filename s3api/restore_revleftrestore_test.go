package s3api_test

import (
	"encoding/json"
	"fmt"
	"strings"
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

// budgetAccessLines returns the access lines ("message":"request") of logs
// whose status is status.
func budgetAccessLines(t *testing.T, logs string, status int) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["message"] == "request" && m["status"] == float64(status) {
			out = append(out, m)
		}
	}
	return out
}

// TestRestoreBudgetThrottleLoggedInfo: a restore refused 503 SlowDown by
// the key's restore budget is the client's own doing, logged at info like
// a request over --max-inflight-per-key (one client asking again and again
// must not flood the warnings), with the budget named in its error. On the
// code before, only the per-key limiter's 503 was marked (req.throttled):
// the budget's was a warning.
func TestRestoreBudgetThrottleLoggedInfo(t *testing.T) {
	f := newCostFixture(t, s3api.Config{MaxRestoreBytesPerKey: 1 << 20})
	c := noRetryClient(t, f.url)
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("first restore: %d %v; want 202", status, err)
	}
	if status, err := restoreStatus(t, c, "other.bin", 1, types.TierBulk); status != 503 || apiCode(err) != "SlowDown" {
		t.Fatalf("restore past the budget: %d %v; want 503 SlowDown", status, err)
	}
	lines := budgetAccessLines(t, f.logs.String(), 503)
	if len(lines) != 1 {
		t.Fatalf("%d access lines with status 503; want 1:\n%s", len(lines), f.logs.String())
	}
	if l := lines[0]; l["level"] != "info" || !strings.Contains(fmt.Sprint(l["error"]), "restore budget") {
		t.Errorf("the budget's 503 logged as %v; want level info, its error naming the restore budget", l)
	}
}
