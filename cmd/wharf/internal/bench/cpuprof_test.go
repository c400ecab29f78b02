package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"runtime/pprof"
	"testing"
	"time"
)

// TestCPUByLabel: the CPU workload's reading of its own profile finds the
// CPU of goroutines under a pprof label (and of the goroutines they
// start) under that label's value, and the rest under "".
func TestCPUByLabel(t *testing.T) {
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		t.Fatalf("CPU profile in use (run without -cpuprofile): %v", err)
	}
	// Each spin is an amount of work, not of time: the profile samples
	// CPU time, and on a loaded machine a wall-clock spin got a fraction
	// of it (60 ms of the 600 ms spun under -race at load 15, which
	// failed the test). 4,800 sha256s of 64 KiB (300 MiB) take about
	// 300 ms of CPU at 1 GB/s.
	const unit = 4800 // about 300 ms
	spin := func(n int) {
		b := make([]byte, 64<<10)
		for range n {
			s := sha256.Sum256(b)
			b[0] = s[0]
		}
	}
	pprof.Do(context.Background(), pprof.Labels("side", "wharf"), func(context.Context) {
		done := make(chan struct{})
		go func() { spin(unit); close(done) }() // inherits the label
		spin(unit)
		<-done
	})
	spin(unit / 3)
	pprof.StopCPUProfile()
	by, err := cpuByLabel(prof.Bytes(), "side")
	if err != nil {
		t.Fatal(err)
	}
	w, rest := by["wharf"], by[""]
	t.Logf("wharf %v, unlabelled %v", w, rest)
	if w < 100*time.Millisecond {
		t.Errorf("labelled CPU %v, want most of the two spins (about 600 ms of CPU) under the label", w)
	}
	if w < 2*rest {
		t.Errorf("labelled CPU %v against %v unlabelled: want at least twice (six times the work spun under it)", w, rest)
	}
	if _, err := cpuByLabel([]byte("not a profile"), "side"); err == nil {
		t.Error("garbage accepted as a profile")
	}
}

// TestCPUPerGBTiny runs the CPU workload at CI size over the HTTP model:
// the floor is measured, each of the four reads (sub-frames and a giant
// frame, one GET and five concurrent ranges) checks its bytes and reports
// wharf's CPU per GB, and the workload sets issue 24's four targets.
func TestCPUPerGBTiny(t *testing.T) {
	cfg, e := tinyShapesEnv(t, ModelHTTP)
	cfg.LargeSize = 16 << 20
	rep := &Report{}
	if err := cpuPerGB(context.Background(), cfg, e, rep); err != nil {
		t.Fatal(err)
	}
	var floor, wharf int
	for _, r := range rep.Rows {
		if r.Metric != "CPU s per GB" {
			continue
		}
		switch r.System {
		case "floor":
			floor++
			if r.Value <= 0 {
				t.Errorf("floor %v CPU s per GB", r.Value)
			}
		case "wharf":
			wharf++
			if r.Value <= 0 {
				t.Errorf("%s: wharf %v CPU s per GB: no CPU found under its label", r.Variant, r.Value)
			}
		}
	}
	if floor != 1 || wharf != 4 {
		t.Errorf("%d floor rows and %d wharf rows, want 1 and 4", floor, wharf)
	}
	if len(rep.Targets) != 4 {
		t.Errorf("%d targets, want 4", len(rep.Targets))
	}
}
