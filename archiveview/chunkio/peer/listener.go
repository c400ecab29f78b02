package peer

import (
	"net"
	"sync"
	"time"
)

// DefaultMaxConns is how many connections the peer listener holds at once
// (Config.MaxConns): a fleet of 32 replicas each keeping its 32 idle
// connections to this one. Each costs a goroutine and its buffers, outside
// the read memory budget, and a file descriptor the S3 port and the
// backend need too.
const DefaultMaxConns = 1024

// Listener wraps the peer listener ln so that it holds at most MaxConns
// connections at once. A connection beyond that is closed as soon as it
// is accepted (counted in wharf_peer_connections_refused_total, logged at
// most once per refusalLogEvery): anyone who can reach the peer port can
// open connections before any authentication, and must not take the
// process's descriptors and memory; a replica refused that way reads the
// backend instead (its ask is a connection failure, with a back-off).
// Together with the server's header and idle timeouts, a connection
// that sends nothing gives its slot back within those timeouts.
func (g *Group) Listener(ln net.Listener) net.Listener {
	return &capListener{Listener: ln, g: g, slots: make(chan struct{}, g.cfg.MaxConns)}
}

type capListener struct {
	net.Listener
	g     *Group
	slots chan struct{}

	mu      sync.Mutex
	lastLog time.Time
	pending int
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &capConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			c.Close()
			l.refused(c.RemoteAddr())
		}
	}
}

// refused counts a connection closed for want of a slot and logs the
// first of each refusalLogEvery.
func (l *capListener) refused(remote net.Addr) {
	l.g.m.connsRefused.Inc()
	now := l.g.now()
	l.mu.Lock()
	l.pending++
	if !l.lastLog.IsZero() && now.Sub(l.lastLog) < refusalLogEvery {
		l.mu.Unlock()
		return
	}
	n := l.pending
	l.lastLog, l.pending = now, 0
	l.mu.Unlock()
	l.g.log.Warn().Stringer("remote", remote).Int("refused", n).Int("max", cap(l.slots)).
		Msg("peer listener: connection closed, it holds its most connections at once (at most one line per period; this one counts the refusals since the last)")
}

// capConn gives its slot back once, when closed.
type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
