package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Member is one entry of a member list: a replica (Scheme://Host:Port) or,
// with DNS, a name whose addresses are the replicas.
type Member struct {
	Scheme string // http or https
	Host   string // an address, a host name, or (DNS) the name to resolve
	Port   int
	DNS    bool // dns+http(s)://: Host is resolved, each address a replica
}

// String is the member as written for its kind (dns+ kept). For a
// replica (not DNS) it is its ring name: the one string every replica's
// ring knows it by, rendezvous-hashed, asked at, and MAC'd as a request's
// destination; a replica's own name (Group.Self) is this of its
// advertised URL, and a dns+ member's replicas are named through it too
// (replicaURL), so that both sides spell one replica the same way
// (lower-case host, canonical address, explicit port).
func (m Member) String() string {
	u := m.Scheme + "://" + net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
	if m.DNS {
		return "dns+" + u
	}
	return u
}

// replicaURL is the ring name of the replica at address host (canonical,
// as net.IP.String writes it) of member m: the String of that replica's
// plain member, which is what the replica's own --peer-advertise parses
// to (ParseMember).
func (m Member) replicaURL(host string) string {
	return Member{Scheme: m.Scheme, Host: host, Port: m.Port}.String()
}

// ParseMember reads one --peers entry: http://HOST:PORT, https://HOST:PORT,
// dns+http://NAME:PORT or dns+https://NAME:PORT. The port is required; a
// path (other than "/"), a query, a fragment or user information is an
// error, and so is anything that is not such a URL (a file path, a bare
// host), and the unspecified address (0.0.0.0 or ::, where no replica
// is reached). Host names are lower-cased, so equal members compare equal.
func ParseMember(v string) (Member, error) {
	fail := func(why string) (Member, error) {
		return Member{}, fmt.Errorf("peer %q: %s", v, why)
	}
	if v == "" {
		return fail("empty")
	}
	if !strings.Contains(v, "://") {
		if strings.HasPrefix(v, "/") || strings.HasPrefix(v, ".") {
			return fail("a path, not a URL: want http://HOST:PORT, https://HOST:PORT or dns+http://NAME:PORT")
		}
		return fail("want a URL: http://HOST:PORT, https://HOST:PORT or dns+http://NAME:PORT")
	}
	u, err := url.Parse(v)
	if err != nil {
		return fail(err.Error())
	}
	var m Member
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		m.Scheme = strings.ToLower(u.Scheme)
	case "dns+http", "dns+https":
		m.Scheme, m.DNS = strings.TrimPrefix(strings.ToLower(u.Scheme), "dns+"), true
	default:
		return fail("scheme " + u.Scheme + ": want http, https, dns+http or dns+https")
	}
	switch {
	case u.User != nil:
		return fail("user information is not allowed (peers authenticate with --peer-secret-file)")
	case u.Path != "" && u.Path != "/", u.Opaque != "":
		return fail("a path is not allowed: want SCHEME://HOST:PORT")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return fail("a query or fragment is not allowed")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return fail("no host")
	}
	if port == "" {
		return fail("no port: want SCHEME://HOST:PORT")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fail("port " + port + ": want 1 to 65535")
	}
	m.Host, m.Port = strings.ToLower(host), n
	if ip := net.ParseIP(m.Host); ip != nil {
		if m.DNS {
			return fail("dns+ wants a name to resolve, not an address")
		}
		if ip.IsUnspecified() {
			return fail("the unspecified address " + host + " is where a replica listens, not where the others reach it: give its own address (--peer-advertise http://$(POD_IP):PORT)")
		}
		m.Host = ip.String()
	} else if !validHostName(m.Host) {
		return fail("host " + host + " is not a valid host name")
	}
	return m, nil
}

// loopback reports whether m's host is a loopback address or localhost.
func (m Member) loopback() bool {
	if ip := net.ParseIP(m.Host); ip != nil {
		return ip.IsLoopback()
	}
	return m.Host == "localhost" || strings.HasSuffix(m.Host, ".localhost")
}

// validHostName checks a DNS host name: labels of letters, digits and
// hyphens (and underscores, as some service names have), 1-63 bytes each,
// 253 at most.
func validHostName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// ParseMembers reads a member list and checks it against self (the
// advertised URL, which must be a plain http(s)://HOST:PORT member): no
// entry twice, one scheme throughout, loopback addresses throughout or
// nowhere (self included), and self among the entries, or, with DNS
// entries, a DNS entry of self's scheme and port (its addresses are known
// only once resolved). It returns the members and self.
func ParseMembers(self string, list []string) ([]Member, Member, error) {
	me, err := ParseMember(self)
	if err != nil {
		return nil, Member{}, fmt.Errorf("advertised URL: %w", err)
	}
	if me.DNS {
		return nil, Member{}, fmt.Errorf("advertised URL %q: a replica's own URL, not a dns+ name", self)
	}
	if len(list) == 0 {
		return nil, Member{}, errors.New("no peers: list every replica, this one included")
	}
	if len(list) > MaxMembers+1 {
		return nil, Member{}, fmt.Errorf("%d peers listed: a ring holds at most %d besides this replica", len(list), MaxMembers)
	}
	var ms []Member
	seen := map[string]bool{}
	found := false
	for _, v := range list {
		m, err := ParseMember(strings.TrimSpace(v))
		if err != nil {
			return nil, Member{}, err
		}
		if seen[m.String()] {
			return nil, Member{}, fmt.Errorf("peer %q listed twice", v)
		}
		seen[m.String()] = true
		if m.Scheme != me.Scheme {
			return nil, Member{}, fmt.Errorf("peer %q is %s but this replica advertises %s: one scheme for the whole fleet", v, m.Scheme, self)
		}
		if m == me || (m.DNS && m.Port == me.Port) {
			found = true
		}
		ms = append(ms, m)
	}
	// A loopback member is reached only from its own host, where any
	// other replica reaches itself instead: loopback and remote members
	// together are never one fleet (each replica's ring would name the
	// loopback one differently).
	var loop, remote string
	for _, m := range append([]Member{me}, ms...) {
		switch {
		case m.DNS:
		case m.loopback():
			loop = m.String()
		default:
			remote = m.String()
		}
	}
	if loop != "" && remote != "" {
		return nil, Member{}, fmt.Errorf("peer %s is a loopback address but %s is not: a loopback URL reaches only its own host; give each replica's address that the others reach (a fleet on one host may use loopback throughout)", loop, remote)
	}
	if !found {
		return nil, Member{}, fmt.Errorf("this replica's advertised URL %s is not among the peers %s (list every replica, this one included; or set the advertised URL to this replica's entry)",
			me, strings.Join(list, ","))
	}
	return ms, me, nil
}

// Resolver looks up the addresses of a name (net.Resolver has this
// method); tests inject their own.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// MaxMembers caps the replicas in a ring. A DNS answer of more addresses
// (a misconfigured Service, or a resolver an attacker answers) would
// otherwise size every per-peer structure: the ring, the peers' states and
// the wharf_peer_verify_failures_total{peer} series. Beyond it, the
// lowest MaxMembers URLs in sorted order are kept (the same on every
// replica with the same answer), and self.
const MaxMembers = 256

// resolve returns the replica URLs of members: static ones as they are,
// DNS ones as the addresses r returns now (prev: the last addresses of
// each DNS member, kept when a lookup fails). errs names the lookups that
// failed. Self is always included. The result is sorted and holds at most
// MaxMembers URLs besides self; dropped is how many more there were.
func resolve(ctx context.Context, r Resolver, members []Member, self string, prev map[string][]string) (urls []string, next map[string][]string, errs []error, dropped int) {
	next = make(map[string][]string, len(prev))
	set := map[string]bool{self: true}
	for _, m := range members {
		if !m.DNS {
			set[m.String()] = true
			continue
		}
		addrs, err := r.LookupHost(ctx, m.Host)
		if err == nil && len(addrs) == 0 {
			err = errors.New("no addresses")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("resolve %s: %w", m, err))
			addrs = prev[m.String()]
		}
		var kept, ips []string
		for _, a := range addrs {
			ip := net.ParseIP(a)
			if ip == nil || ip.IsUnspecified() {
				continue // a resolver answering names, or no replica's address
			}
			kept = append(kept, m.replicaURL(ip.String()))
			ips = append(ips, ip.String())
		}
		slices.Sort(ips)
		if len(ips) > 4*MaxMembers {
			ips = ips[:4*MaxMembers] // what is kept for a failed lookup is bounded too
		}
		next[m.String()] = ips
		for _, u := range kept {
			set[u] = true
		}
	}
	for u := range set {
		if u != self {
			urls = append(urls, u)
		}
	}
	slices.Sort(urls)
	if len(urls) > MaxMembers {
		dropped = len(urls) - MaxMembers
		urls = urls[:MaxMembers]
	}
	urls = append(urls, self)
	slices.Sort(urls)
	return urls, next, errs, dropped
}
