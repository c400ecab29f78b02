package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wharf-s3/wharf/auth"
)

// TestLoginLimitPerSlash64: login attempts are limited per client as the
// S3 limits count it, an IPv6 address as its /64: one host holds a whole
// /64 and could otherwise guess secrets from as many addresses as it
// liked, each with a fresh burst. An IPv4-mapped address is its IPv4
// address.
func TestLoginLimitPerSlash64(t *testing.T) {
	v, err := auth.New(auth.Config{Keys: []auth.Key{{AccessKey: "AKIALIMIT", SecretKey: "right"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{Catalog: emptyCatalog{}, Verifier: v, Logins: true, LoginBurst: 1, LoginEvery: time.Hour})
	try := func(remote string) int {
		form := url.Values{"csrf": {"tok"}, "access_key": {"AKIALIMIT"}, "secret_key": {"wrong"}}
		r := httptest.NewRequest(http.MethodPost, "http://wharf.example/-/console/login", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://wharf.example")
		r.AddCookie(&http.Cookie{Name: loginCookie, Value: "tok"})
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		return w.Code
	}
	for _, tc := range []struct{ first, second string }{
		{"[2001:db8:1:2::1]:4000", "[2001:db8:1:2:ffff::9]:4001"},
		{"[2001:db8:5:6::1%eth0]:4000", "[2001:db8:5:6::2]:4000"},
		{"192.0.2.7:4000", "[::ffff:192.0.2.7]:4001"},
	} {
		if got := try(tc.first); got != http.StatusForbidden {
			t.Fatalf("first login from %s: %d, want 403 (wrong secret)", tc.first, got)
		}
		if got := try(tc.second); got != http.StatusTooManyRequests {
			t.Errorf("login from %s after one from %s: %d, want 429 (the same client)", tc.second, tc.first, got)
		}
	}
	if got := try("[2001:db8:1:3::1]:4000"); got != http.StatusForbidden {
		t.Errorf("login from another /64: %d, want 403", got)
	}
}
