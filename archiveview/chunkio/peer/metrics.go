package peer

import "github.com/prometheus/client_golang/prometheus"

// Fallback reasons (wharf_peer_fallbacks_total{reason}). A peer in its
// back-off has none: Owner skips it, and its frames go to their next owner
// (this replica too, which then reads the backend as for its own frames).
const (
	reasonConnect = "connect" // no connection, or it broke
	reasonTimeout = "timeout" // the first-byte deadline or the minimum rate
	reasonRefused = "refused" // 403: the owner refused our authentication
	reasonMissing = "missing" // 404: the owner has no open archive with the frame
	reasonBusy    = "busy"    // 503: the owner had no room; or MaxAsking asks in flight to it already
	reasonError   = "error"   // any other status
	reasonVerify  = "verify"  // the answer failed its MAC or the frame's sha256
)

var fallbackReasons = []string{reasonConnect, reasonTimeout, reasonRefused, reasonMissing, reasonBusy, reasonError, reasonVerify}

// metrics are a Group's Prometheus series.
type metrics struct {
	hits, misses, bytesIn, bytesOut prometheus.Counter
	replays, connsRefused           prometheus.Counter
	misaddressed                    prometheus.Counter
	served                          *prometheus.CounterVec
	fallbacks                       *prometheus.CounterVec
	verifyFailures                  *prometheus.CounterVec
	members                         prometheus.GaugeFunc
}

func newMetrics(reg prometheus.Registerer, members func() float64) *metrics {
	m := &metrics{
		hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_peer_hits_total",
			Help: "Frames this replica asked of their owner and received, their sha256 checked (no backend fetch here).",
		}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_peer_misses_total",
			Help: "Frames other replicas asked of this one that it did not hold and fetched from the backend for them.",
		}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_peer_bytes_in_total",
			Help: "Compressed frame bytes received from peers (verified or not).",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_peer_bytes_out_total",
			Help: "Compressed frame bytes sent to peers.",
		}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_peer_replays_total",
			Help: "Authenticated peer requests refused (403) because the same request (sender and nonce) was served already: a replay.",
		}),
		misaddressed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_peer_misaddressed_total",
			Help: "Authenticated peer requests refused (403) because they were addressed to another replica's ring name than this one's (its --peer-advertise): askers that know this replica under another URL, or a request to another replica replayed here.",
		}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wharf_peer_connections_refused_total",
			Help: "Connections to the peer listener closed as soon as accepted because it held its most connections at once.",
		}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wharf_peer_requests_served_total",
			Help: "Peer requests this replica answered, by status code.",
		}, []string{"code"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wharf_peer_fallbacks_total",
			Help: "Frames owned by another replica that were fetched from the backend instead, by why the owner did not serve them.",
		}, []string{"reason"}),
		verifyFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wharf_peer_verify_failures_total",
			Help: "Peer answers that failed their MAC or the frame's sha256 (never used), by peer.",
		}, []string{"peer"}),
	}
	for _, r := range fallbackReasons {
		m.fallbacks.WithLabelValues(r)
	}
	for _, c := range []string{"200", "400", "403", "404", "409", "502", "503"} {
		m.served.WithLabelValues(c)
	}
	m.members = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "wharf_peer_members",
		Help: "Replicas in this replica's ring, itself included.",
	}, members)
	if reg != nil {
		reg.MustRegister(m.hits, m.misses, m.replays, m.misaddressed, m.connsRefused, m.bytesIn, m.bytesOut, m.served, m.fallbacks, m.verifyFailures, m.members)
	}
	return m
}
