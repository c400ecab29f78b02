package auth

import (
	"fmt"
	"testing"
	"time"
)

// TestSigV4SigningKeyNotKeptOnMismatch: a signing key is kept only once it
// made a signature match. Requests naming a real access key but signed
// without its secret (any client that knows an access key id, which is
// not secret) keep nothing: with mutant S01 (kept on a mismatch too) each
// made-up scope of theirs took an entry, evicting the keys of the
// clients that do sign (the kept keys start again empty when full).
func TestSigV4SigningKeyNotKeptOnMismatch(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		req := signedGet(t, testAK, testSK+"-wrong", fmt.Sprintf("r-%d", i), now)
		if _, err := v.Authenticate(req); err == nil {
			t.Fatalf("request %d signed with a wrong secret verified", i)
		}
	}
	if n := v.sigKeys.len(); n != 0 {
		t.Fatalf("%d signing keys kept after 20 requests whose signatures did not match, want 0", n)
	}
}
