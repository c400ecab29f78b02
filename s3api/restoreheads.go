package s3api

// restoreheads.go: each client's allowance of the backend HEADs that
// refresh restore states for what a reading key asks (HEAD and GET of a
// file, listings with RestoreStatus). One request sends at most
// archiveview.MaxFreshHeads; over many requests a client could still have
// every archived chunk of an archive HEADed once per --restore-status-ttl
// (a minute by default): N HEADs a minute for N chunks, billed per
// request, from a key that may only read (the restore budget charges
// RestoreObjects only). The HEADs come out of a token bucket per client
// (limitKey: the access key, or the address of an anonymous or presigned
// caller; the console's visitor is the same client, FreshHeads); past it
// a request is answered from the state known already, as for the chunks
// past a request's cap. Restores, reads of archived bytes
// and wharf restore are not charged: they refresh what they need.

import (
	"net/http"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/s3api/internal/tokenbucket"
)

const (
	// StatusHeadsBurst is the HEADs refreshing restore states one client
	// may cause at once (eight requests' worth).
	StatusHeadsBurst = 8 * archiveview.MaxFreshHeads
	// StatusHeadsPerMinute is the rate its allowance refills at.
	StatusHeadsPerMinute = 4 * archiveview.MaxFreshHeads
	// maxStatusClients bounds the clients whose allowance is tracked (a
	// full allowance is forgotten to make room); a new client past it
	// sends no HEAD until one is.
	maxStatusClients = 10000
)

func newStatusHeads() *tokenbucket.Buckets {
	return tokenbucket.New(StatusHeadsBurst, StatusHeadsPerMinute, time.Minute, maxStatusClients)
}

// freshHeads takes the HEADs req may send to refresh restore states: at
// most archiveview.MaxFreshHeads, as many as its client has left.
func (s *server) freshHeads(req *request) int { return s.takeHeads(req.client) }

// headsSpent gives back to req's client what it took (took) and did not
// send (sent).
func (s *server) headsSpent(req *request, took, sent int) { s.giveHeads(req.client, took, sent) }

// takeHeads takes client's HEADs for one request (freshHeads).
func (s *server) takeHeads(client string) int {
	return s.statusHeads.TakeAtMost(client, archiveview.MaxFreshHeads, s.now())
}

// giveHeads gives back to client what it took and did not send.
func (s *server) giveHeads(client string, took, sent int) {
	if sent < took {
		s.statusHeads.Give(client, float64(took-sent), s.now())
	}
}

// FreshHeads takes, for a page served beside the S3 handlers (the
// console's file page), the HEADs refreshing restore states that client
// (ClientKey) may send now, out of the allowance its S3 requests share:
// at most archiveview.MaxFreshHeads. spent must then be called once with
// how many were sent, to give back the rest. A handler New did not return
// allows archiveview.MaxFreshHeads.
func FreshHeads(h http.Handler, client string) (heads int, spent func(sent int)) {
	s, ok := h.(*server)
	if !ok {
		return archiveview.MaxFreshHeads, func(int) {}
	}
	took := s.takeHeads(client)
	return took, func(sent int) { s.giveHeads(client, took, sent) }
}
