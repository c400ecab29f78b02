package peer

import (
	"context"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
	"github.com/wharf-s3/wharf/backend"
)

// Handler is the answering side, for the peer listener (never the S3
// one): GET /wharf-peer/v1/frame with a valid MAC gets the frame's
// verified compressed bytes from cache (chunkio.FrameCache.PeerFrame, so
// only frames of archives open here). A request that fails authentication
// gets 403 with no body before anything is looked up; see the package
// doc for the rest.
func (g *Group) Handler(cache *chunkio.FrameCache) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.serve(w, r, cache)
	})
}

// refuse answers code with no body.
func (g *Group) refuse(w http.ResponseWriter, code int) {
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(code)
	g.m.served.WithLabelValues(itoa(code)).Inc()
}

func itoa(n int) string {
	var b [8]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// refusalLogEvery is the least time between two log lines about refused
// peer requests: anyone who reaches the peer port can send them, and must
// not be able to flood the log (each line says how many were refused
// since the last one; wharf_peer_requests_served_total{code="403"} counts
// them all).
const refusalLogEvery = 30 * time.Second

// refusalLog is the state of one kind of refusal log line (under its mu).
type refusalLog struct {
	mu      sync.Mutex
	last    time.Time
	pending int // refusals since the last line
}

// due counts one refusal at now and reports whether a line is due (none
// written in the last refusalLogEvery) and, if so, how many refusals it
// counts.
func (l *refusalLog) due(now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending++
	if !l.last.IsZero() && now.Sub(l.last) < refusalLogEvery {
		return 0, false
	}
	n := l.pending
	l.last, l.pending = now, 0
	return n, true
}

// logRefusal logs a refused request: at once when no line was written in
// the last refusalLogEvery, else it is counted in the next line.
func (g *Group) logRefusal(r *http.Request, err error) {
	n, ok := g.refusals.due(g.now())
	if !ok {
		return
	}
	g.log.Warn().Str("remote", r.RemoteAddr).Err(err).Int("refused", n).Dur("every", refusalLogEvery).
		Msg("peer requests refused (403): wrong secret, clock off by more than the skew, a replay, or not a replica (at most one line per period; this one counts the refusals since the last)")
}

// errMisaddressed: an authentic request addressed to another ring name
// than this replica's own.
type errMisaddressed struct{ to, self string }

func (e *errMisaddressed) Error() string {
	return "request addressed to " + e.to + ", this replica is " + e.self
}

// logMisaddressed logs a refused authentic request addressed to another
// replica, rate-limited like logRefusal but on its own period (so that
// a misconfigured advertised URL is said at once, whatever else is
// refused).
func (g *Group) logMisaddressed(r *http.Request, from string, e *errMisaddressed) {
	n, ok := g.misaddressed.due(g.now())
	if !ok {
		return
	}
	g.log.Warn().Str("remote", r.RemoteAddr).Str("peer", from).Str("to", e.to).Str("self", e.self).Err(e).Int("refused", n).Dur("every", refusalLogEvery).
		Msg("peer requests refused (403): signed with the secret but addressed to another replica. If peer (the asker) knows this replica as to, this replica's advertised URL (--peer-advertise) is not the one the others list or resolve; else a request captured on its way to another replica was replayed here (at most one line per period; this one counts those since the last)")
}

// authenticate checks a request's date, nonce, sender, destination and
// MAC, then that it is addressed to this replica (*errMisaddressed) and
// no replay (the replay cache: errReplay, or errReplayFull when there is
// no room to remember it).
func (g *Group) authenticate(r *http.Request) (from, nonce string, err error) {
	date, nonce, from, to := r.Header.Get(hdrDate), r.Header.Get(hdrNonce), r.Header.Get(hdrFrom), r.Header.Get(hdrTo)
	now := g.now()
	dated, err := checkDate(date, now, g.cfg.MaxSkew)
	if err != nil {
		return "", "", err
	}
	if !validNonce(nonce) {
		return "", "", errors.New("no valid nonce")
	}
	if from == "" || len(from) > maxFromLen || hasControl(from) {
		return "", "", errors.New("no valid sender")
	}
	if to == "" || len(to) > maxFromLen || hasControl(to) {
		return "", "", errors.New("no valid destination")
	}
	mac, ok := macFromHeader(r.Header.Get(hdrAuth))
	if !ok {
		return "", "", errors.New("no MAC")
	}
	if !hmac.Equal(mac, g.keys.requestMAC(r.Method, r.URL.Path, r.URL.RawQuery, date, nonce, from, to)) {
		return "", "", errors.New("MAC mismatch")
	}
	// Authentic, so to is the name the asker's ring gave the owner it
	// meant; another replica's request is refused before it could be
	// remembered or served (each replica's replay cache is its own).
	if to != g.self {
		return from, nonce, &errMisaddressed{to: to, self: g.self}
	}
	if dated.Unix() < g.started {
		return from, nonce, errBeforeStart
	}
	if err := g.replay.admit(nonce, from, dated, g.cfg.MaxSkew, now); err != nil {
		return from, nonce, err // authentic, but not to be served
	}
	return from, nonce, nil
}

func (g *Group) serve(w http.ResponseWriter, r *http.Request, cache *chunkio.FrameCache) {
	from, nonce, err := g.authenticate(r)
	var mis *errMisaddressed
	switch {
	case errors.As(err, &mis):
		g.m.misaddressed.Inc()
		g.logMisaddressed(r, from, mis)
		g.refuse(w, http.StatusForbidden)
		return
	case errors.Is(err, errReplayFull):
		// Not remembered, so not served: refusing keeps replays out
		// where forgetting an entry would let one in (the asker reads
		// the backend; 503 puts no back-off on this replica).
		if !g.replayFull.Swap(true) {
			g.log.Warn().Str("peer", from).Int("max", g.cfg.MaxReplay).Msg("peer requests refused (503): the replay cache is full of requests still in their window, so they are read from the backend (logged once until there is room again)")
		}
		g.refuse(w, http.StatusServiceUnavailable)
		return
	case errors.Is(err, errBeforeStart):
		if n, ok := g.refusals.due(g.now()); ok {
			g.log.Info().Str("remote", r.RemoteAddr).Str("peer", from).Err(err).Int("refused", n).Dur("every", refusalLogEvery).
				Msg("peer request refused (503, the asker reads the backend): dated before this replica started, so it cannot be told from a replay of a request its previous process served; askers whose clocks are behind this replica's are refused so until they catch up (at most one line per period)")
		}
		g.refuse(w, http.StatusServiceUnavailable)
		return
	case errors.Is(err, errReplay):
		g.m.replays.Inc()
		g.logRefusal(r, err)
		g.refuse(w, http.StatusForbidden)
		return
	case err != nil:
		g.logRefusal(r, err)
		g.refuse(w, http.StatusForbidden)
		return
	}
	if g.replayFull.Load() {
		g.replayFull.Store(false)
	}
	if r.Method != http.MethodGet || r.URL.Path != framePath {
		g.refuse(w, http.StatusNotFound)
		return
	}
	id, err := parseFrameQuery(r.URL.RawQuery, g.cfg.MaxFrame)
	if err != nil {
		g.refuse(w, http.StatusBadRequest)
		return
	}
	select {
	case g.serving <- struct{}{}:
		defer func() { <-g.serving }()
	default:
		g.refuse(w, http.StatusServiceUnavailable)
		return
	}
	// The asker waits FirstByte + size/MinRate for the answer (Fetch);
	// the owner waits no longer for the bytes, whatever the connection
	// does (an asker or proxy keeping it open, or a pipelined byte, after
	// which net/http does not cancel the request's context).
	ctx, cancel := context.WithTimeout(chunkio.WithClient(r.Context(), "peer "+from), g.answerLimit(id.Size))
	defer cancel()
	buf, held, err := cache.PeerFrame(ctx, id)
	if err != nil {
		code := http.StatusBadGateway
		switch {
		case ctx.Err() != nil:
			code = http.StatusServiceUnavailable // the deadline, or the asker left: not the frame's fault
		case errors.Is(err, chunkio.ErrNotShared), errors.Is(err, backend.ErrArchived):
			code = http.StatusNotFound // an archived object's bytes are not served here either
		case errors.Is(err, backend.ErrChanged):
			code = http.StatusConflict
		case errors.Is(err, backend.ErrUnavailable):
			code = http.StatusServiceUnavailable
		default:
			g.log.Warn().Str("peer", from).Str("frame", id.String()).Err(err).Msg("peer request: frame could not be read")
		}
		g.refuse(w, code)
		return
	}
	defer buf.Release()
	if !held {
		g.m.misses.Inc()
	}
	b := buf.Bytes()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(g.answerLimit(int64(len(b)))))
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", itoa(len(b)))
	h.Set(hdrAnswer, authPre+hex.EncodeToString(g.keys.answerMAC(nonce, int64(len(b)), id.Sum)))
	w.WriteHeader(http.StatusOK)
	g.m.served.WithLabelValues("200").Inc()
	n, _ := w.Write(b)
	g.m.bytesOut.Add(float64(n))
}
