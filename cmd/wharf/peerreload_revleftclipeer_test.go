package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// TestPeerCertReloadChecksAsAtStart: a reload of the peer listener's
// certificate (SIGHUP, or the poll) makes the checks the start makes: a
// new pair that does not cover the advertised host, or that --peer-tls-ca
// does not verify, is refused and the previous one kept (every other
// replica would refuse it: no frame shared until the next rotation). A
// right one is served. Before, the start refused such a pair but a reload
// served it.
func TestPeerCertReloadChecksAsAtStart(t *testing.T) {
	now := time.Now()
	pki, other := newTestPKI(t), newTestPKI(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pki.ca.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		ca      *testPKI
		hosts   []string
		wantErr string // "" = served
	}{
		{"another host", pki, []string{"other.example"}, "does not cover 127.0.0.1"},
		{"another CA", other, []string{"127.0.0.1"}, "is not verified by --peer-tls-ca"},
		{"a right one", pki, []string{"127.0.0.1", "localhost"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert, key := pki.pair(t, "peer-"+strings.ReplaceAll(tc.name, " ", "-"), validNow)
			pc := &peerConfig{PeerListen: "127.0.0.1:7946", PeerAdvertise: "https://127.0.0.1:7946",
				PeerTLSCert: cert, PeerTLSKey: key, PeerTLSCA: caFile}
			m, err := newTLSMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			var logs lockedBuffer
			r, err := newCertReloader(pc.certSource(), zerolog.New(&logs), m, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			was := r.cur.Load().leaf.SerialNumber.Text(16)
			certPEM, keyPEM, err := tc.ca.ca.issue(tc.hosts, now.Add(-time.Hour), now.Add(90*24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			writeAtomic(t, cert, certPEM)
			writeAtomic(t, key, keyPEM)
			r.check(true, "SIGHUP")
			served := r.cur.Load().leaf.SerialNumber.Text(16)
			if tc.wantErr == "" {
				if served == was {
					t.Errorf("a right certificate was not served after the reload: %s", logs.String())
				}
				return
			}
			if served != was {
				t.Errorf("the reload served a certificate the other replicas refuse (%v): serial %s, was %s", tc.hosts, served, was)
			}
			if !strings.Contains(logs.String(), tc.wantErr) {
				t.Errorf("reload log does not say %q: %s", tc.wantErr, logs.String())
			}
		})
	}
}
