package s3api_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/wharf-s3/wharf/s3api"
)

// TestRestoreLogOutsideText: the restore line's key is an uploader's (a
// manifest may name a key with a C1 control or a bidi override: only
// ASCII controls are refused), and was logged as is, where every other
// line takes outside text through backend.PrintableText.
func TestRestoreLogOutsideText(t *testing.T) {
	const key = "big\u009b2J\u202e.bin"
	f := newCostFixtureNamed(t, s3api.Config{}, 0, key)
	c := noRetryClient(t, f.url)
	if status, err := restoreStatus(t, c, key, 1, types.TierBulk); status != 202 {
		t.Fatalf("restore: %d %v; want 202", status, err)
	}
	for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		if !strings.Contains(l, `"message":"restore"`) {
			continue
		}
		if r := firstUnprintable(l); r >= 0 {
			t.Fatalf("the restore line holds the unprintable %U of the uploader's key:\n%q", r, l)
		}
		return
	}
	t.Fatalf("no restore line in:\n%s", f.logs.String())
}
