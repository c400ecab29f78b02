package console

// Sessions, logins, CSRF tokens and the login rate limit.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/backend"
	"github.com/wharf-s3/wharf/s3api"
	"github.com/wharf-s3/wharf/s3api/internal/tokenbucket"
)

const (
	sessionCookie = "wharf_console"
	loginCookie   = "wharf_console_login"
	// maxSessions bounds the session store; the sessions closest to
	// their expiry make room for new ones.
	maxSessions = 10000
	// maxLimited bounds the client addresses the login limiter tracks.
	maxLimited = 10000
	// emptySHA256 is the SHA-256 of an empty payload.
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// session is one logged-in visitor. The secret stays in memory on the
// server (it signs share links and restores) and never reaches a cookie.
type session struct {
	id        string
	accessKey string
	secretKey string
	identity  auth.Identity
	expires   time.Time
}

// visitor is who is looking at a page.
type visitor struct {
	id   auth.Identity
	sess *session // nil: anonymous
	csrf string   // the token this visitor's forms carry
}

// sessionStore maps session ids to sessions.
type sessionStore struct {
	mu  sync.Mutex
	max int
	m   map[string]*session
}

func newSessionStore(max int) *sessionStore {
	return &sessionStore{max: max, m: map[string]*session{}}
}

func (s *sessionStore) put(se *session, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		for id, o := range s.m {
			if !o.expires.After(now) {
				delete(s.m, id)
			}
		}
	}
	for len(s.m) >= s.max {
		var oldest *session
		for _, o := range s.m {
			if oldest == nil || o.expires.Before(oldest.expires) {
				oldest = o
			}
		}
		delete(s.m, oldest.id)
	}
	s.m[se.id] = se
}

func (s *sessionStore) get(id string, now time.Time) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[id]
	if se == nil {
		return nil
	}
	if !se.expires.After(now) {
		delete(s.m, id)
		return nil
	}
	return se
}

func (s *sessionStore) drop(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// mac is the console's HMAC of the parts, base64url.
func (c *Console) mac(parts ...string) string {
	h := hmac.New(sha256.New, c.secret)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("console: crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// sessionValue is the cookie for se: id, expiry and their MAC.
func (c *Console) sessionValue(se *session) string {
	exp := strconv.FormatInt(se.expires.Unix(), 10)
	return se.id + "." + exp + "." + c.mac("session", se.id, exp)
}

// session returns the live session r's cookie names, if any.
func (c *Console) session(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 3 || !hmac.Equal([]byte(parts[2]), []byte(c.mac("session", parts[0], parts[1]))) {
		return nil
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	now := c.cfg.Now()
	if err != nil || now.Unix() >= exp {
		return nil
	}
	return c.sessions.get(parts[0], now)
}

// visitor resolves who r comes from: a session, else anonymous when
// anonymous access is on; ok is false when the visitor must log in.
func (c *Console) visitor(r *http.Request) (visitor, bool) {
	if se := c.session(r); se != nil {
		return visitor{id: se.identity, sess: se, csrf: c.mac("csrf", se.id)}, true
	}
	if c.cfg.Verifier != nil && c.cfg.Verifier.AllowsAnonymous() {
		return visitor{}, true
	}
	return visitor{}, false
}

// checkCSRF verifies a state-changing form of v.
func (c *Console) checkCSRF(r *http.Request, v visitor) bool {
	return v.csrf != "" && hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(v.csrf))
}

func (c *Console) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

// needLogin sends a visitor without access to the login form.
func (c *Console) needLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
		return
	}
	c.fail(w, r, nil, http.StatusForbidden, "Log in first.")
}

// login serves the form (GET) and checks a login (POST). The form's
// CSRF token is a random value also set in a SameSite=Strict cookie;
// the POST must carry both, equal.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.cfg.Logins || c.cfg.Verifier == nil {
		c.fail(w, r, nil, http.StatusNotFound, "This server has no access keys: there is nothing to log in with.")
		return
	}
	show := func(status int, msg string) {
		tok := randomToken()
		http.SetCookie(w, c.cookie(r, loginCookie, tok, 600))
		c.render(w, r, status, "login", pageData{Title: "Log in", Error: msg, Login: tok})
	}
	if r.Method != http.MethodPost {
		show(http.StatusOK, "")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	ck, err := r.Cookie(loginCookie)
	if err != nil || ck.Value == "" || !hmac.Equal([]byte(ck.Value), []byte(r.PostFormValue("csrf"))) {
		show(http.StatusForbidden, "The login form expired or came from another page; try again.")
		return
	}
	if !c.logins.allow(loginClient(r), c.cfg.Now()) {
		w.Header().Set("Retry-After", strconv.Itoa(int(c.cfg.LoginEvery/time.Second)+1))
		show(http.StatusTooManyRequests, "Too many login attempts from your address; wait a little and try again.")
		return
	}
	ak, sk := strings.TrimSpace(r.PostFormValue("access_key")), r.PostFormValue("secret_key")
	id, err := c.verifyKey(r.Context(), r.Host, ak, sk)
	if err != nil {
		// ak is whatever the form held (up to its 16 KiB), maybe the
		// secret key typed into the wrong field: it is logged only when
		// it is a configured key (a wrong secret for it), else by its
		// length. One rule for outside text in a log: cut and escaped.
		ev := c.cfg.Logger.Info().Str("console", "login")
		if knownKey(err) {
			ev = ev.Str("access_key", backend.PrintableText(ak, s3api.MaxLoggedField))
		} else {
			ev = ev.Int("access_key_bytes", len(ak))
		}
		ev.Str("remote", r.RemoteAddr).Str("error", backend.PrintableText(err.Error(), s3api.MaxLoggedError)).Msg("console login refused")
		show(http.StatusForbidden, loginMessage(err))
		return
	}
	se := &session{id: randomToken(), accessKey: ak, secretKey: sk, identity: id, expires: c.cfg.Now().Add(c.cfg.SessionTTL)}
	c.sessions.put(se, c.cfg.Now())
	http.SetCookie(w, c.cookie(r, sessionCookie, c.sessionValue(se), int(c.cfg.SessionTTL/time.Second)))
	http.SetCookie(w, c.cookie(r, loginCookie, "", -1))
	c.cfg.Logger.Info().Str("console", "login").Str("access_key", ak).Str("remote", r.RemoteAddr).Msg("console login")
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// knownKey reports whether a refused login's access key is a configured
// one: only a wrong secret for it (SignatureDoesNotMatch) says so.
func knownKey(err error) bool {
	var ae *auth.Error
	return errors.As(err, &ae) && ae.Code == "SignatureDoesNotMatch"
}

// loginMessage says why a login failed.
func loginMessage(err error) string {
	var ae *auth.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case "InvalidAccessKeyId":
			return "Unknown access key."
		case "SignatureDoesNotMatch":
			return "Wrong secret key for this access key."
		}
	}
	return "Login failed: " + err.Error()
}

// verifyKey checks an access key and secret the way every S3 request is
// checked: it signs a request with them and has the Verifier verify it.
func (c *Console) verifyKey(ctx context.Context, host, ak, sk string) (auth.Identity, error) {
	if ak == "" || sk == "" {
		return auth.Identity{}, errors.New("give both an access key and a secret key")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/", nil)
	if err != nil {
		return auth.Identity{}, err
	}
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	if err := c.sign(ctx, req, ak, sk, emptySHA256); err != nil {
		return auth.Identity{}, err
	}
	q, err := auth.ParseQuery(req.URL.RawQuery)
	if err != nil {
		return auth.Identity{}, err
	}
	return c.cfg.Verifier.AuthenticateQuery(req, q)
}

// sign signs req with SigV4 (header form).
func (c *Console) sign(ctx context.Context, req *http.Request, ak, sk, payload string) error {
	return v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, req, payload, "s3", c.cfg.Region, c.cfg.Now())
}

// logout ends the session (POST with its CSRF token).
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	se := c.session(r)
	if r.Method != http.MethodPost || se == nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	v := visitor{id: se.identity, sess: se, csrf: c.mac("csrf", se.id)}
	if !c.checkCSRF(r, v) {
		c.fail(w, r, &v, http.StatusForbidden, "The logout form expired or came from another page.")
		return
	}
	c.sessions.drop(se.id)
	http.SetCookie(w, c.cookie(r, sessionCookie, "", -1))
	c.cfg.Logger.Info().Str("console", "logout").Str("access_key", se.accessKey).Str("remote", r.RemoteAddr).Msg("console logout")
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// loginLimiter is the login attempts of each client address: a token
// bucket each (tokenbucket), burst at once, then one per every; at most max
// addresses are tracked.
type loginLimiter struct{ b *tokenbucket.Buckets }

func newLoginLimiter(burst int, every time.Duration, max int) *loginLimiter {
	return &loginLimiter{b: tokenbucket.New(float64(burst), 1, every, max)}
}

// allow takes one token for addr, false when none is left (or addr cannot
// be tracked).
func (l *loginLimiter) allow(addr string, now time.Time) bool {
	ok, _ := l.b.Take(addr, 1, now)
	return ok
}
