package s3api

import (
	"testing"
	"time"

	"github.com/wharf-s3/wharf/archiveview"
)

// TestStatusHeadsGivenBack: a request gives back to its client's
// allowance exactly the HEADs it took and did not send: a HEAD of a file
// whose states were fresh costs nothing, and one that sent HEADs keeps
// them spent (so a client's HEADs stay bounded over many requests).
func TestStatusHeadsGivenBack(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := &server{statusHeads: newStatusHeads(), now: func() time.Time { return now }}
	req := &request{client: "ak"}
	// A burst of requests that each send every HEAD they take.
	spent := 0
	for range StatusHeadsBurst/archiveview.MaxFreshHeads + 1 {
		took := s.freshHeads(req)
		s.headsSpent(req, took, took)
		spent += took
	}
	if spent != StatusHeadsBurst {
		t.Fatalf("requests sending every HEAD they took sent %d in all at one instant; want the burst, %d", spent, StatusHeadsBurst)
	}
	// A minute later: 4 requests' worth back. Two that send nothing give
	// it all back; two that send 5 each keep 10 spent.
	now = now.Add(time.Minute)
	for range 2 {
		took := s.freshHeads(req)
		s.headsSpent(req, took, 0)
	}
	for range 2 {
		took := s.freshHeads(req)
		s.headsSpent(req, took, min(took, 5))
	}
	if got, want := s.statusHeads.TakeAtMost(req.client, StatusHeadsBurst, now), StatusHeadsPerMinute-10; got != want {
		t.Errorf("allowance left after requests sending 0, 0, 5 and 5 HEADs: %d; want %d", got, want)
	}
}
