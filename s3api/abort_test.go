package s3api_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wharf-s3/wharf/backend/faults"
)

// TestBytesAbortCounted: a response aborted after its headers because the
// read failed (a backend reset past the first part) is counted in
// wharf_aborted_responses_total{cause="read"}, and one the client left in
// {cause="client"}; wharf_requests_total alone counts both as 200s. The
// access line names the archive and the key.
func TestBytesAbortCounted(t *testing.T) {
	files := byFiles()
	sh := byShapes()[0]
	dir, mk := byPack(t, sh, files)
	e := byServe(t, sh, dir, mk, files, func(r faults.Request) faults.Fault {
		if r.Op == "range" && !strings.Contains(r.Key, "manifest") && r.Off > 1<<20 {
			return faults.Fault{Kind: faults.FaultReset, After: 1000}
		}
		return faults.Fault{}
	})
	for _, h2 := range []bool{false, true} {
		out, why := byGet(t, e, h2, "big.bin", byRequests[0], false)
		if out != byAborted {
			t.Fatalf("h2 %v: %v %s, want an aborted body", h2, out, why)
		}
	}
	counter := func(cause string) float64 {
		return testutil.ToFloat64(abortedSeries(t, e.reg, "GetObject", cause))
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s; logs:\n%s", what, e.logs.String())
			}
		}
	}
	waitFor("2 read aborts not counted", func() bool { return counter("read") == 2 })
	logs := e.logs.String()
	if !strings.Contains(logs, `"aborted":true`) || !strings.Contains(logs, "archive "+testBucket+": key big.bin") {
		t.Errorf("the access line of the aborted response does not name the archive and key:\n%s", logs)
	}
	// A client that leaves mid-body: cause "client", not "read".
	e.faulty.SetHook(func(faults.Request) faults.Fault { return faults.Fault{Bandwidth: 256 << 10} })
	resp, err := e.h1.Client().Get(e.h1.URL + "/" + testBucket + "/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	e.h1.CloseClientConnections()
	waitFor("the client's abort not counted", func() bool { return counter("client") == 1 })
	if got := counter("read"); got != 2 {
		t.Errorf("read aborts %v after a client left, want 2", got)
	}
}

// abortedSeries finds wharf_aborted_responses_total{op, cause} on reg
// (a test failure when the series is not registered).
func abortedSeries(t testing.TB, reg *prometheus.Registry, op, cause string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "wharf_aborted_responses_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["op"] == op && l["cause"] == cause {
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, func() float64 { return m.GetCounter().GetValue() })
			}
		}
	}
	t.Fatalf("no wharf_aborted_responses_total{op=%q,cause=%q} registered", op, cause)
	return nil
}
