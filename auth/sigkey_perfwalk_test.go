package auth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// signedGet is a GET of /bkt/key signed with aws-sdk-go-v2 for ak/sk in
// region at t, shaped as Go's server hands it to a handler.
func signedGet(t *testing.T, ak, sk, region string, at time.Time) *http.Request {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://wharf.test/bkt/some/key.txt", nil)
	awsSign(t, req, ak, sk, region, emptyHash, at)
	return req
}

// TestSigV4SigningKeyReused: a verified request's signing key (derived
// from the secret, date, region and service: four HMACs) is kept, so the
// next request in the same scope costs one HMAC of its string to sign,
// not five per URI and Host candidate; measured in allocations per
// verification, which the derivation dominates.
func TestSigV4SigningKeyReused(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	req := signedGet(t, testAK, testSK, "us-east-1", now)
	if _, err := v.Authenticate(req); err != nil {
		t.Fatalf("first verification: %v", err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := v.Authenticate(req); err != nil {
			t.Fatalf("verification: %v", err)
		}
	})
	// The old code derived the key on every request: 63 allocations per
	// verification of this request (go1.26); with the kept key 34.
	if allocs > 45 {
		t.Errorf("%.0f allocations per SigV4 verification, want at most 45 (signing key derived again?)", allocs)
	}
}

// TestSigV4SigningKeyCache: what is kept never lets a wrong request in.
func TestSigV4SigningKeyCache(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	cfg := testConfig(false, func() time.Time { return now })
	for _, tc := range []struct {
		name string
		sign func(t *testing.T) *http.Request
		code string
	}{
		{"wrong secret, same scope", func(t *testing.T) *http.Request {
			return signedGet(t, testAK, testSK+"x", "us-east-1", now)
		}, "SignatureDoesNotMatch"},
		{"other key's secret", func(t *testing.T) *http.Request {
			return signedGet(t, testAK, grantSK, "us-east-1", now)
		}, "SignatureDoesNotMatch"},
		{"tampered path, same scope", func(t *testing.T) *http.Request {
			req := signedGet(t, testAK, testSK, "us-east-1", now)
			req.URL.Path = "/bkt/other"
			req.URL.RawPath = ""
			return req
		}, "SignatureDoesNotMatch"},
		{"right secret, other region", func(t *testing.T) *http.Request {
			return signedGet(t, testAK, testSK, "eu-west-1", now)
		}, ""},
		{"other key, right secret", func(t *testing.T) *http.Request {
			return signedGet(t, grantAK, grantSK, "us-east-1", now)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Warm the kept key of testAK's us-east-1 scope first.
			if _, err := v.Authenticate(signedGet(t, testAK, testSK, "us-east-1", now)); err != nil {
				t.Fatalf("warm-up: %v", err)
			}
			for round := 0; round < 2; round++ { // before and after anything it kept
				_, err := v.Authenticate(tc.sign(t))
				switch {
				case tc.code == "" && err != nil:
					t.Fatalf("round %d: %v", round, err)
				case tc.code != "":
					ae, ok := err.(*Error)
					if !ok || ae.Code != tc.code {
						t.Fatalf("round %d: got %v, want %s", round, err, tc.code)
					}
				}
			}
		})
	}
}

// TestSigV4SigningKeyCacheBounded: signed requests naming ever new regions
// never grow the kept keys past their bound.
func TestSigV4SigningKeyCacheBounded(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < maxSigningKeys+100; i++ {
		if _, err := v.Authenticate(signedGet(t, testAK, testSK, fmt.Sprintf("r-%d", i), now)); err != nil {
			t.Fatalf("region %d: %v", i, err)
		}
		if n := v.sigKeys.len(); n > maxSigningKeys {
			t.Fatalf("%d kept signing keys after %d regions, bound %d", n, i+1, maxSigningKeys)
		}
	}
}

// TestSigV4SigningKeyLongScopeNotKept: a signed request naming a region
// longer than maxKeptScopeField verifies but keeps nothing.
func TestSigV4SigningKeyLongScopeNotKept(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	v, err := New(testConfig(false, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("r", maxKeptScopeField+1)
	if _, err := v.Authenticate(signedGet(t, testAK, testSK, long, now)); err != nil {
		t.Fatalf("long region: %v", err)
	}
	if n := v.sigKeys.len(); n != 0 {
		t.Fatalf("%d signing keys kept for a %d-byte region, want 0", n, len(long))
	}
}
