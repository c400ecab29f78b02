// Package peer lets the replicas of a wharf fleet share verified
// compressed frames, so that a fleet fetches each frame from the backend
// about once instead of once per replica. It is the HTTP side of
// chunkio's peer hook (chunkio.Peers, chunkio.FrameCache.PeerFrame):
// chunkio checks every byte; this package chooses owners, moves bytes,
// authenticates, keeps deadlines and counts.
//
// # Use
//
// One Group per replica (any number per process: the package holds no
// state of its own):
//
//	g, err := peer.New(peer.Config{Self: "http://10.0.0.1:7946",
//		Peers: []string{"http://10.0.0.1:7946", "http://10.0.0.2:7946"}, Secret: secret})
//	cache := chunkio.NewFrameCache(budget, chunkio.WithPeers(g))
//	srv := &http.Server{Handler: g.Handler(cache)} // on the peer listener, never the S3 one
//	go srv.Serve(peerListener)
//	g.Start(ctx) // resolves dns+ members in the background until ctx ends (static lists need nothing)
//	defer g.Close()
//
// # Contract
//
//   - Ownership. Each frame has one owner: the member with the highest
//     rendezvous (highest-random-weight) score for the frame's
//     chunkio.FrameID.OwnerKey (bucket, key, compressed offset and size).
//     Every replica with the same member list computes the same owner;
//     adding or removing one member moves only the frames it gains or
//     owned. A member that failed this replica (no connection, a deadline,
//     a refusal of its authentication, an answer that failed its check, a
//     status no wharf peer answers, a 404, 409, 502 or 503 that took over
//     half the first-byte deadline, or an answer, even a right one, that
//     took over half its deadline) is skipped for a back-off period (1 s,
//     doubling to 30 s while it keeps failing), so its frames go to their
//     next owner instead of waiting for it, or lying again.
//
//   - Asking (Fetch). One GET per frame to the owner's peer listener,
//     authenticated (below), with a first-byte deadline (FirstByte, default
//     2 s) and a minimum rate (MinRate, default 4 MiB/s: the whole answer
//     must arrive within FirstByte + size/MinRate), never past the caller's
//     context. At most MaxAsking asks (default 32) are in flight to one
//     owner at once; one beyond them is not sent (reason busy, no
//     back-off), so one busy replica never holds every answer slot or
//     connection an owner has. Any failure is an error and chunkio
//     reads the backend instead: a failed peer costs one fallback, never
//     a failed read.
//     Fallbacks are counted by reason (wharf_peer_fallbacks_total).
//
//   - Answering (Handler). A request without a valid MAC, with a date
//     outside MaxSkew, or malformed, is answered 403 (or 400) with no
//     body, before any lookup. A valid one gets the frame's verified
//     compressed bytes from chunkio.FrameCache.PeerFrame: only frames of
//     archives this replica has open; anything else is 404. At most
//     MaxServing answers are in progress at once (more get 503). The
//     owner waits for a frame's bytes no longer than its asker waits for
//     the answer (FirstByte + size/MinRate; then 503), and writes them
//     within a deadline as long again.
//
//   - Limits. Listener wraps the peer listener so that it holds at most
//     MaxConns connections (default 1,024; more are closed as soon as
//     accepted). Refused requests and refused connections are logged at
//     most once per 30 s, each line counting those since the last. The
//     asker takes at most 16 KiB of an answer's headers and reads a body
//     only of the frame's exact length. A ring holds at most MaxMembers
//     replicas besides this one; members that leave take their state and
//     their wharf_peer_verify_failures_total{peer} series with them.
//
//   - Authentication. Every request carries HMAC-SHA256, keyed by a key
//     derived from the shared secret, over the method, path and query (the
//     frame's identity), a Unix date and a random nonce, the asker's
//     advertised URL, and the ring name of the owner it is addressed to
//     (below): the secret never crosses the wire, a request cannot be
//     altered or aimed at another frame or another replica, and a replay
//     outside MaxSkew is refused. An owner takes only requests addressed
//     to its own name (Self): an authentic one addressed to another member
//     is refused (403) before anything is remembered or looked up, counted
//     in wharf_peer_misaddressed_total (and in
//     wharf_peer_requests_served_total{code="403"}, as every refusal) and
//     logged with both names ("request addressed to X, this replica is
//     Y"), so a request captured on its way to one replica is served by
//     that replica only. Inside MaxSkew, the owner remembers each
//     authenticated request's (sender, nonce) until its date leaves
//     MaxSkew, so a replay to the same owner is refused (403) too; the
//     memory is capped (MaxReplay, default 65,536 requests, about 5 MiB)
//     and, when full of requests still in their window, new requests get
//     503 (the asker reads the backend) rather than an entry being
//     forgotten. That memory dies with the process, so a request dated
//     before the owner's process started (which its previous process
//     may have served) is not served either: 503, the asker reads the
//     backend (an asker whose clock is behind the owner's, for as long
//     as it is behind). Every 200 answer carries a MAC over the request's nonce,
//     the body's length and the frame's sha256, which the asker checks
//     before it reads the body; the body itself is checked against the
//     frame's sha256 by chunkio. An answer failing either check counts in
//     wharf_peer_verify_failures_total{peer} and is logged naming the peer.
//
//   - Destination. A request names its owner by the one string both
//     sides already share: rendezvous hashing needs every replica to name
//     each member alike, so the asker's ring name for an owner (a static
//     --peers entry, or a dns+ member's address as resolved) is the name
//     the owner has in its own ring, its advertised URL. Both are written
//     by Member.String (ParseMember's lower-case host and canonical
//     address, an explicit port; a dns+ address through replicaURL), so
//     http, https, IPv6 and dns+ members give the same string on both
//     sides (TestPeerRingNamesAgree). A proxy or address translation
//     between replicas keeps working when the replica behind it
//     advertises (--peer-advertise) the URL the others list; a replica
//     the others know by another URL than it advertises (under dns+: a
//     host name where its pods resolve to addresses) is refused, and says
//     so. The name travels in X-Wharf-Peer-To, under the MAC, rather than
//     being MAC'd implicitly as the owner's own name: one header more, and
//     a request signed with the secret but addressed elsewhere is then
//     told apart from a wrong secret, with the name the asker used in the
//     owner's log, so a misconfigured advertised URL shows at once. A
//     replica of before this field and one of after refuse each other's
//     requests (403: a backend fallback, never a failed read) until the
//     whole fleet runs one version.
//
//   - Membership. Config.Peers lists every replica, self included:
//     http://HOST:PORT, https://HOST:PORT, or dns+http://NAME:PORT and
//     dns+https://NAME:PORT, whose addresses (a headless Service) are
//     resolved by Start in the background and again every ResolveEvery; a
//     failed resolution keeps the addresses it had. Self is always a
//     member.
//
//   - Memory. Every buffer of a peer fetch and the owner's compressed
//     frames are chunkio's, charged to the one read memory budget; this
//     package holds none.
package peer
