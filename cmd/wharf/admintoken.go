package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// The admin token (--admin-token-file): with it, every admin endpoint but
// the probes (/healthz, /readyz) answers only a request carrying
// "Authorization: Bearer TOKEN" (what Prometheus sends with
// authorization.credentials_file); any other gets 401 before it takes a
// turn of an admin gate or any work. The file follows the secret-file
// rule (readSecretFile: local, not readable by other users, trailing
// newline dropped), holds at least minAdminToken bytes, each one a header
// can carry unchanged (printable ASCII, no space). A rotation of the file
// (a Kubernetes Secret updated in place) is taken within
// adminTokenRecheck; a rotated file that breaks the rule is logged and
// the token before it kept.
const (
	minAdminToken     = 16
	adminTokenRecheck = time.Second
	adminTokenFlag    = "--admin-token-file"
)

// readAdminToken reads and checks the token file at path.
func readAdminToken(path string) ([]byte, error) {
	tok, err := readSecretFile(adminTokenFlag, path, minAdminToken)
	if err != nil {
		return nil, err
	}
	for i, c := range tok {
		if c <= ' ' || c > '~' {
			return nil, fmt.Errorf("%s %s: byte %d (%#x) is not printable ASCII: an Authorization header cannot carry it as it is (create one with: openssl rand -hex 32 > FILE)", adminTokenFlag, path, i, c)
		}
	}
	return tok, nil
}

// adminToken holds the sha256 of the current token. Requests compare
// against it without a lock; one of them at a time, at most once per
// adminTokenRecheck, reads the file for a rotation. The file is read and
// its token compared, not its size and modification time: a rotation
// keeping both (a token of the same length written within the file
// system's timestamp tick, cp -p, a restored backup) would otherwise
// leave the revoked token in force.
type adminToken struct {
	path   string
	log    zerolog.Logger
	now    func() time.Time
	denied prometheus.Counter

	sum     atomic.Pointer[[32]byte]
	refresh sync.Mutex // held by the one request reading the file
	// Under refresh: when the file was last read, and the error of the
	// last read when it was refused ("" when taken): a broken file is
	// warned about once, not at every recheck.
	checked time.Time
	refused string
}

// newAdminToken reads the token file (checked at start already) and
// registers wharf_admin_unauthorized_total.
func newAdminToken(path string, log zerolog.Logger, reg prometheus.Registerer) (*adminToken, error) {
	t := &adminToken{path: path, log: log, now: time.Now,
		denied: prometheus.NewCounter(prometheus.CounterOpts{Name: "wharf_admin_unauthorized_total",
			Help: "Admin requests refused (401) for a missing or wrong bearer token (--admin-token-file)."})}
	if err := reg.Register(t.denied); err != nil {
		return nil, fmt.Errorf("register admin token metric: %w", err)
	}
	sum, err := readAdminTokenSum(path)
	if err != nil {
		return nil, err
	}
	t.sum.Store(&sum)
	t.checked = t.now()
	return t, nil
}

// readAdminTokenSum is the sha256 of the token file's token
// (readAdminToken), the form requests are compared in.
func readAdminTokenSum(path string) ([32]byte, error) {
	tok, err := readAdminToken(path)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(tok), nil
}

// recheck takes a rotated file, when one request may look and the last
// look is adminTokenRecheck old; the others go on with the current token.
func (t *adminToken) recheck() {
	if !t.refresh.TryLock() {
		return
	}
	defer t.refresh.Unlock()
	now := t.now()
	if now.Sub(t.checked) < adminTokenRecheck {
		return
	}
	t.checked = now
	sum, err := readAdminTokenSum(t.path)
	if err != nil {
		if msg := err.Error(); msg != t.refused {
			t.refused = msg
			t.log.Warn().Err(err).Msg("admin token file: the rotated file is refused; the token before it is kept")
		}
		return
	}
	t.refused = ""
	if sum == *t.sum.Load() {
		return
	}
	t.sum.Store(&sum)
	t.log.Info().Str("file", t.path).Msg("admin token file: rotated token taken")
}

// allowed reports whether r carries the current token.
func (t *adminToken) allowed(r *http.Request) bool {
	t.recheck()
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimLeft(tok, " ")))
	want := t.sum.Load()
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// guard serves h to requests with the token, and the probes to anyone.
func (t *adminToken) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || t.allowed(r) {
			h.ServeHTTP(w, r)
			return
		}
		t.denied.Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="wharf admin"`)
		http.Error(w, "admin endpoints need Authorization: Bearer with the token of --admin-token-file", http.StatusUnauthorized)
	})
}
