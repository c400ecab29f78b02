package s3api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/wharf-s3/wharf/backend"
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

// TestHeadMixedRestoreNeedsRestore: a file one of whose chunks is being
// restored (restored outside wharf, or for another file sharing it) and
// another of which nobody asked to restore needs a RestoreObject, and
// HEAD and a listing with RestoreStatus say so as S3 says it of an object
// never asked for: no x-amz-restore, no RestoreStatus (a client polling
// for ongoing-request="false" would otherwise wait out the one restore
// and only then learn that it must restore). After the RestoreObject,
// which sends the missing chunks only, HEAD says ongoing. On the code
// before, HEAD said ongoing-request="true" from the start.
func TestHeadMixedRestoreNeedsRestore(t *testing.T) {
	f := newSplitArchivedFixture(t)
	ctx := context.Background()
	if _, err := f.store.Restore(ctx, "src", f.chunks[0], backend.RestoreRequest{Days: 1, Tier: backend.RetrievalBulk}); err != nil {
		t.Fatal(err)
	}
	c := noRetryClient(t, f.url)
	head := func() string {
		out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String("big.bin")})
		if err != nil {
			t.Fatal(err)
		}
		if out.StorageClass != types.StorageClassGlacier {
			t.Errorf("HEAD big.bin: class %q; want GLACIER", out.StorageClass)
		}
		return aws.ToString(out.Restore)
	}
	if r := head(); r != "" {
		t.Errorf("HEAD of big.bin, chunk 1 of %d restoring, the others never asked: x-amz-restore %q; want none (a restore is needed)", len(f.chunks), r)
	}
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket),
		OptionalObjectAttributes: []types.OptionalObjectAttributes{types.OptionalObjectAttributesRestoreStatus}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		if aws.ToString(o.Key) == "big.bin" && o.RestoreStatus != nil {
			t.Errorf("listing: big.bin's RestoreStatus %+v; want none (a restore is needed)", *o.RestoreStatus)
		}
	}
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("restore: %d %v; want 202", status, err)
	}
	if n := len(f.g.Started()); n != len(f.chunks) {
		t.Errorf("%d restores started in all; want one per chunk (%d)", n, len(f.chunks))
	}
	if r := head(); r != `ongoing-request="true"` {
		t.Errorf("HEAD after the restore: x-amz-restore %q; want ongoing", r)
	}
}

// TestRestoreStatusHeadsPerClient: the backend HEADs that refresh restore
// states for one client's HEADs and listings with RestoreStatus come out
// of an allowance per client (a burst of s3api.StatusHeadsBurst, refilled
// at s3api.StatusHeadsPerMinute), so a reading key sending request after
// request cannot make the archive's every archived chunk be HEADed once
// per --restore-status-ttl (a minute by default); past it the state known
// already is answered (as for the chunks past a request's 32), and
// another client has its own allowance. On the code before, only each
// request was bounded (32 HEADs): 20 HEADs of a file over 48 archived
// chunks cost 640 backend HEADs, and the restore budget, which charges
// RestoreObjects only, did not bound them.
func TestRestoreStatusHeadsPerClient(t *testing.T) {
	f := newCostFixture(t, s3api.Config{MaxRestoreBytesPerKey: 1 << 30})
	ctx := context.Background()
	head := func(c *s3.Client) int64 {
		before := f.store.stats.Load()
		out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String("big.bin")})
		if err != nil {
			t.Fatal(err)
		}
		if out.StorageClass != types.StorageClassGlacier {
			t.Fatalf("HEAD big.bin: class %q; want GLACIER", out.StorageClass)
		}
		return f.store.stats.Load() - before
	}
	c := noRetryClient(t, f.url)
	var total int64
	for range 20 {
		total += head(c)
	}
	// A few more than the burst: the allowance refills while the test runs.
	if limit := int64(s3api.StatusHeadsBurst + 8); total > limit {
		t.Fatalf("20 HEADs of a file over %d stale archived chunks made %d backend HEADs; want at most %d (the client's allowance)", f.chunks, total, limit)
	}
	if n := head(noRetryClientFor(t, f.url, otherAK)); n == 0 {
		t.Errorf("another key's HEAD made no backend HEAD; want its own allowance")
	}
}

// TestRestoreBudgetFileLargerThanBudget: one restore of a file larger
// than the key's whole budget spends at most the budget and one chunk: its
// chunks are charged in the file's order while the budget holds (the first
// also when it is larger than the whole budget, so that any file can be
// restored); it answers 202 for those, HEAD shows no x-amz-restore while
// chunks remain to be asked for, and the key's next restore is 503
// SlowDown until its budget is back. On the code before, the budget let
// through the whole file when it was full: big.bin's 48 chunks (6 MiB of
// charge) against a budget of 1 MiB an hour, 6 times the budget in one
// request, as a key with restore rights could restore a whole upload of
// any size in one request once per refill.
func TestRestoreBudgetFileLargerThanBudget(t *testing.T) {
	f := newCostFixture(t, s3api.Config{MaxRestoreBytesPerKey: 1 << 20})
	c := noRetryClient(t, f.url)
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("restore of a file larger than the budget, budget full: %d %v; want 202", status, err)
	}
	// Each chunk is charged 128 KiB (minRestoreCharge): 8 fit in 1 MiB.
	if n := len(f.g.Started()); n != 8 {
		t.Fatalf("one restore sent %d RestoreObjects for %d chunks against a budget of 8 chunks' charge; want 8", n, f.chunks)
	}
	out, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String("big.bin")})
	if err != nil {
		t.Fatal(err)
	}
	if r := aws.ToString(out.Restore); r != "" {
		t.Errorf("HEAD with chunks still to restore: x-amz-restore %q; want none", r)
	}
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 503 || apiCode(err) != "SlowDown" {
		t.Fatalf("second restore, budget spent: %d %v; want 503 SlowDown", status, err)
	}
	if n := len(f.g.Started()); n != 8 {
		t.Errorf("the throttled restore sent %d RestoreObjects more", n-8)
	}
}

// TestRestoreBudgetInProgressFree: a restore that sends nothing (every
// chunk being restored) is 409 and costs the key nothing. Guard test (the
// budget's rule before and after charging in the file's order).
func TestRestoreBudgetInProgressFree(t *testing.T) {
	f := newCostFixture(t, s3api.Config{MaxRestoreBytesPerKey: 8 << 20})
	c := noRetryClient(t, f.url)
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 202 || len(f.g.Started()) != f.chunks {
		t.Fatalf("restore within the budget: %d %v, %d sent; want 202, %d", status, err, len(f.g.Started()), f.chunks)
	}
	for range 3 {
		if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 409 {
			t.Fatalf("repeated restore: %d %v; want 409 RestoreAlreadyInProgress", status, err)
		}
	}
	// 6 MiB of 8 spent: other.bin's chunks fit only if the 409s cost nothing.
	if status, err := restoreStatus(t, c, "other.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("restore after the 409s: %d %v; want 202 (they cost nothing)", status, err)
	}
}

// TestRestoreBudgetChargesStoreSize: the budget charges an object by the
// larger of the manifest's size and the store's (its listing or HEAD):
// the store bills what it holds, and the manifest is an uploader's word.
// Here the store holds each chunk 4 MiB larger than the manifest says,
// against a budget of 1 MiB: one restore sends one RestoreObject (the
// first, the budget being full). On the code before, each chunk was
// charged by the manifest (128 KiB, the least), and 8 were sent: 32 MiB
// of retrieval billed against a budget of 1.
func TestRestoreBudgetChargesStoreSize(t *testing.T) {
	f := newCostFixtureInflated(t, s3api.Config{MaxRestoreBytesPerKey: 1 << 20}, 4<<20)
	c := noRetryClient(t, f.url)
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("restore: %d %v; want 202", status, err)
	}
	if n := len(f.g.Started()); n != 1 {
		t.Fatalf("one restore sent %d RestoreObjects of 4 MiB chunks against a budget of 1 MiB; want 1", n)
	}
}

// TestRestoreBytesStoreSize: wharf_restore_bytes_total and the restore's
// log line count an object's stored bytes by the larger of the manifest's
// size and the store's, as the budget charges it. On the code before they
// counted the manifest's, so a manifest understating its chunks hid what
// the store bills.
func TestRestoreBytesStoreSize(t *testing.T) {
	f := newCostFixtureInflated(t, s3api.Config{}, 4<<20)
	c := noRetryClient(t, f.url)
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("restore: %d %v; want 202", status, err)
	}
	if v := counterValue(t, f.reg, "wharf_restore_bytes_total", "Bulk"); v < float64(f.chunks)*(4<<20) {
		t.Errorf("wharf_restore_bytes_total = %v for %d chunks of over 4 MiB in the store", v, f.chunks)
	}
	if !strings.Contains(f.logs.String(), `"size":419`) {
		t.Errorf("the restore's log line does not give the stored size (4 MiB and more) of its objects:\n%.600s", f.logs.String())
	}
}

// TestRestoreBudgetLeftLogged: a restore the budget cut short says so in
// its log line (objects_left_for_budget: the archived objects it did not
// ask for), since its 202 cannot: the operator sees why a file is still
// not restored. On the code before, the line listed what was sent only.
func TestRestoreBudgetLeftLogged(t *testing.T) {
	f := newCostFixture(t, s3api.Config{MaxRestoreBytesPerKey: 1 << 20})
	c := noRetryClient(t, f.url)
	if status, err := restoreStatus(t, c, "big.bin", 1, types.TierBulk); status != 202 {
		t.Fatalf("restore: %d %v; want 202", status, err)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err == nil && m["message"] == "restore" {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no restore line in:\n%s", f.logs.String())
	}
	if got, want := line["objects_left_for_budget"], float64(f.chunks-8); got != want {
		t.Errorf("restore line: objects_left_for_budget %v; want %v (of %d chunks, 8 fit the budget)", got, want, f.chunks)
	}
}
