package peer

import "time"

// Page is the /-/peers page: the configured members, the ring and what
// this replica knows of each peer.
type Page struct {
	Self       string       `json:"self"`
	Configured []string     `json:"configured"`
	Resolved   time.Time    `json:"resolved,omitzero"`
	ResolveErr string       `json:"resolve_error,omitempty"`
	Ring       []MemberPage `json:"ring"`
}

// MemberPage is one replica of the ring.
type MemberPage struct {
	URL       string    `json:"url"`
	Self      bool      `json:"self,omitempty"`
	State     string    `json:"state"` // self, up, down (in its back-off), unknown (never asked)
	Failures  int       `json:"failures,omitempty"`
	DownUntil time.Time `json:"down_until,omitzero"`
	LastError string    `json:"last_error,omitempty"`
	LastOK    time.Time `json:"last_ok,omitzero"`
}

// Page returns the page's contents now.
func (g *Group) Page() Page {
	r := g.ring.Load()
	p := Page{Self: g.self}
	for _, m := range g.members {
		p.Configured = append(p.Configured, m.String())
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	p.Resolved, p.ResolveErr = g.resolved, g.resErr
	for i, u := range r.urls {
		mp := MemberPage{URL: u, State: "unknown"}
		if i == r.self {
			mp.Self, mp.State = true, "self"
		} else if st := g.states[u]; st != nil {
			mp.Failures, mp.LastError, mp.LastOK = st.failures, st.lastErr, st.lastOK
			mp.State = "up"
			if now.Before(st.downUntil) {
				mp.State, mp.DownUntil = "down", st.downUntil
			}
		}
		p.Ring = append(p.Ring, mp)
	}
	return p
}
