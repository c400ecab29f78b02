// Package console is wharf's read-only web console, served at /-/console/
// on the S3 listener (wharf serve --console) for people without an S3
// client: the buckets a visitor may read, a folder view by delimiter with
// pagination from the index, a page per file (size, ETag, sha256 and how
// the bytes are verified, storage class and restore state, versions,
// client snippets), previews, downloads, share links and restores.
//
// The contract:
//
//   - Every page comes from the same interfaces the S3 handlers use: the
//     s3api.Catalog for buckets, archiveview.Archive's List, Stat,
//     Versions, StorageClass and FileStorage for what is shown, and
//     Archive.Open (the verified read path) for previews and downloads.
//     Access is decided by auth.Identity.CanRead / CanRestore, exactly as
//     for a signed S3 request. A restore is sent as a signed RestoreObject
//     through the S3 handler itself (Config.API), so it passes the same
//     --allow-restore switch, grant check, log line and metrics.
//   - Who sees what: with anonymous access (auth) every bucket; with keys,
//     a login with an access key and its secret, verified by signing a
//     request with them and having the auth.Verifier check it; the
//     session is a server-side record named by a random id in an HMAC-
//     signed, HttpOnly, SameSite=Strict cookie (Secure over TLS) that
//     expires and that logout invalidates. The signing secret is random per
//     Console (or given). Login attempts are rate-limited per client
//     address.
//   - Hostile content: names and bytes come from archives wharf does not
//     own. Pages are html/template output; every response carries a
//     Content-Security-Policy without any script source (the console has
//     no script at all), no other origin, no framing; X-Content-Type-Options:
//     nosniff. Previews are rendered as escaped text (an .html or .svg file
//     is text); only PNG, JPEG, GIF and WebP, recognised by their bytes,
//     are served inline, with their own image type and a sandboxing CSP.
//     Downloads are application/octet-stream with Content-Disposition:
//     attachment. Login, logout and restore are POSTs that carry a CSRF
//     token (and a foreign Origin is refused).
//   - Bounded: a preview reads at most 64 KiB; a listing page at most
//     pageSize entries; breadcrumbs at most maxCrumbs levels; sessions and
//     rate-limit records are capped.
//   - A visitor is the client its S3 requests are (s3api.ClientKey): each
//     page takes one of its --max-inflight-per-key slots (s3api.Admit),
//     its reads are charged to its read-memory share (chunkio.WithClient),
//     and logins are limited per that client address.
//   - Errors name the bucket and key and what failed; the store's own
//     text (backing bucket, manifest and chunk keys) goes to the log only.
//     Bidi controls in names are shown as [U+XXXX].
//
// The console holds no package-level mutable state: everything lives in
// the *Console that New returns.
package console

import (
	"bytes"
	"crypto/rand"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/s3api"
)

// Prefix is where the console is served.
const Prefix = "/-/console/"

// Config configures a Console.
type Config struct {
	// Catalog is the S3 handler's catalog. Required.
	Catalog s3api.Catalog
	// Verifier authenticates: AllowsAnonymous says whether visitors
	// without a session see every bucket; logins are verified through it.
	// nil = nobody gets in.
	Verifier s3api.Authenticator
	// API is the S3 handler: restores are sent to it as signed
	// RestoreObject requests. nil = no restore button.
	API http.Handler
	// Logins: keys are configured, so the login form is offered.
	Logins bool
	// AllowRestore mirrors s3api.Config.AllowRestore.
	AllowRestore bool
	// Region is used to sign share links and restores ("" = us-east-1).
	Region string
	// History, when set, gives some buckets a version history of their
	// own (published datasets: catalog's Manager.History, the same hook as
	// s3api.Config.History); other buckets' versions are their archive's
	// chain.
	History s3api.HistoryFunc
	// VersionIDForm mirrors s3api.Config.VersionIDForm: a version id of
	// the wrong form is refused (400) before any history is built.
	VersionIDForm func(bucket, id string) error
	// Kind, when set, names what a bucket serves (catalog.Manager.Kind:
	// "archive", "alias", "dataset", "pinned version", "discovered
	// archive", "discovered dataset"). nil or "" = "archive".
	Kind func(bucket string) string
	// Secret signs session cookies and CSRF tokens. nil = 32 random bytes
	// drawn by New (sessions then end with the process).
	Secret []byte
	// SessionTTL bounds a session. 0 = 12 hours.
	SessionTTL time.Duration
	// LoginBurst and LoginEvery rate-limit login attempts per client
	// address: LoginBurst at once, then one per LoginEvery. 0 = 5 and 10s.
	LoginBurst int
	LoginEvery time.Duration
	// MaxStreams bounds the downloads (and inline images) one visitor
	// (access key, else client address) streams at once; more get 503
	// with Retry-After. 0 = 8.
	MaxStreams int
	Logger     zerolog.Logger
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// Console is the console's http.Handler.
type Console struct {
	cfg      Config
	secret   []byte
	sessions *sessionStore
	logins   *loginLimiter
	shares   *shareCache
	bufs     sync.Pool
	favicon  []byte
	streams  streamLimit
}

// streamLimit counts the streams in flight per visitor.
type streamLimit struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes a stream slot for who; false when who has max already.
func (l *streamLimit) acquire(who string, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	if l.n[who] >= max {
		return false
	}
	l.n[who]++
	return true
}

func (l *streamLimit) release(who string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[who]--; l.n[who] <= 0 {
		delete(l.n, who)
	}
}

// New returns the console for cfg. It panics if cfg.Catalog is nil.
func New(cfg Config) *Console {
	if cfg.Catalog == nil {
		panic("console: Config.Catalog is nil")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.LoginBurst <= 0 {
		cfg.LoginBurst = 5
	}
	if cfg.LoginEvery <= 0 {
		cfg.LoginEvery = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 8
	}
	secret := cfg.Secret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			panic("console: crypto/rand: " + err.Error())
		}
	}
	c := &Console{cfg: cfg, secret: secret,
		sessions: newSessionStore(maxSessions),
		logins:   newLoginLimiter(cfg.LoginBurst, cfg.LoginEvery, maxLimited),
		shares:   newShareCache(),
	}
	c.favicon = favicon()
	c.bufs.New = func() any { b := make([]byte, 64<<10); return &b }
	return c
}

// cspPage is the policy of every console page: nothing but this origin's
// stylesheet and images, no script of any kind, no framing, forms only to
// this origin.
const cspPage = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// cspRaw is the policy of inline image bytes: a document that somehow
// rendered them could do nothing.
const cspRaw = "default-src 'none'; img-src 'self'; sandbox; frame-ancestors 'none'"

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", cspPage)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer a browser sends
	// "Origin: null" on form POSTs, which sameOrigin must refuse.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")

	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	route, arg, _ := strings.Cut(rest, "/")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if route != "login" && route != "logout" && route != "restore" {
			c.fail(w, r, nil, http.StatusMethodNotAllowed, "This page takes no form.")
			return
		}
		if !sameOrigin(r) {
			c.fail(w, r, nil, http.StatusForbidden, "A form from another site was refused.")
			return
		}
	default:
		h.Set("Allow", "GET, HEAD, POST")
		c.fail(w, r, nil, http.StatusMethodNotAllowed, "Method not allowed.")
		return
	}
	switch route {
	case "style.css":
		h.Set("Content-Type", "text/css; charset=utf-8")
		h.Set("Cache-Control", "max-age=3600")
		_, _ = w.Write([]byte(styleCSS))
		return
	case "favicon.png":
		h.Set("Content-Type", "image/png")
		h.Set("Cache-Control", "max-age=86400")
		_, _ = w.Write(c.favicon)
		return
	case "login":
		c.login(w, r)
		return
	case "logout":
		c.logout(w, r)
		return
	}
	v, ok := c.visitor(r)
	if !ok {
		c.needLogin(w, r)
		return
	}
	// A page takes one of the visitor's --max-inflight-per-key slots, and
	// every read of it (previews, downloads) is charged to the visitor's
	// share of the read limits, as its S3 requests are.
	client := s3api.ClientKey(v.id, r)
	release, ok := s3api.Admit(c.cfg.API, client)
	if !ok {
		h.Set("Retry-After", "1")
		c.fail(w, r, &v, http.StatusServiceUnavailable, "You have too many requests running at once; wait for one to finish.")
		return
	}
	defer release()
	r = r.WithContext(chunkio.WithClient(r.Context(), client))
	switch {
	case route == "" && arg == "":
		c.buckets(w, r, v)
	case route == "b" && arg != "":
		c.browse(w, r, v, arg)
	case route == "f" && arg != "":
		c.file(w, r, v, arg)
	case route == "dl" && arg != "":
		c.download(w, r, v, arg, false)
	case route == "raw" && arg != "":
		c.download(w, r, v, arg, true)
	case route == "restore" && arg != "" && r.Method == http.MethodPost:
		c.restore(w, r, v, arg)
	default:
		c.fail(w, r, &v, http.StatusNotFound, "No such console page.")
	}
}

// sameOrigin reports whether a form POST comes from this origin: an
// Origin header, when the browser sends one, must name this host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return r.Header.Get("Sec-Fetch-Site") == "" || r.Header.Get("Sec-Fetch-Site") == "same-origin"
	}
	return o == scheme(r)+"://"+r.Host
}

// scheme is the request's scheme as the client used it.
func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// loginClient is who a login attempt counts as for the rate limit: the
// client address as the S3 limits count it (s3api.ClientKey of an
// anonymous request: an IPv6 address as its /64).
func loginClient(r *http.Request) string { return s3api.ClientKey(auth.Identity{}, r) }

// favicon draws the console's icon: a dark disc on the page colour.
func favicon() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for y := 0; y < 16; y++ {
		for x := 0; x < 16; x++ {
			c := color.RGBA{0xf7, 0xf8, 0xfa, 0xff}
			if (x-8)*(x-8)+(y-8)*(y-8) < 40 {
				c = color.RGBA{0x16, 0x32, 0x4f, 0xff}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img) // cannot fail on an in-memory RGBA
	return b.Bytes()
}
