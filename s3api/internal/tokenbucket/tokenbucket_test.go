package tokenbucket

import (
	"testing"
	"time"
)

// TestBuckets: the rule both users relied on before they shared it (the
// console's login limit, s3api's restore budget), step by step.
func TestBuckets(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		key  string
		at   time.Duration // after t0
		take float64       // 0: give back -give
		give float64
		ok   bool
		wait time.Duration
	}
	tests := []struct {
		name             string
		capacity, refill float64
		every            time.Duration
		maxKeys          int
		steps            []step
	}{
		{"login burst then one per interval", 2, 1, time.Second, 0, []step{
			{key: "a", take: 1, ok: true},
			{key: "a", take: 1, ok: true},
			{key: "a", take: 1, wait: time.Second},
			{key: "a", at: time.Second, take: 1, ok: true},
			{key: "a", at: time.Second, take: 1, wait: time.Second},
			{key: "a", at: 1500 * time.Millisecond, take: 1, wait: 500 * time.Millisecond},
			{key: "b", take: 1, ok: true},
		}},
		{"keys bounded, full ones forgotten", 2, 1, time.Second, 2, []step{
			{key: "a", take: 1, ok: true},
			{key: "b", take: 1, ok: true},
			{key: "c", take: 1}, // a and b are not full: no room
			{key: "c", at: 10 * time.Second, take: 1, ok: true},
		}},
		{"bytes per hour: more than the capacity when full, then a debt", 100, 100, time.Hour, 0, []step{
			{key: "k", take: 250, ok: true},
			{key: "k", take: 1, wait: time.Duration(151 * float64(time.Hour) / 100)},
			{key: "k", at: 2 * time.Hour, take: 60, wait: 6 * time.Minute}, // 50 back
			{key: "k", at: 2 * time.Hour, give: 200},
			{key: "k", at: 2 * time.Hour, take: 100, ok: true},
			{key: "k", at: 2 * time.Hour, take: 1, wait: 36 * time.Second},
		}},
		{"a refund never overfills", 100, 100, time.Hour, 0, []step{
			{key: "k", take: 10, ok: true},
			{key: "k", give: 1000},
			{key: "k", take: 101, ok: true},             // full: let through
			{key: "k", take: 1, wait: 72 * time.Second}, // from -1
		}},
		{"a clock that goes back refills nothing", 1, 1, time.Second, 0, []step{
			{key: "a", at: time.Second, take: 1, ok: true},
			{key: "a", take: 1, wait: time.Second},
		}},
		{"a refund to an untracked key tracks nothing", 1, 1, time.Second, 1, []step{
			{key: "a", give: 1},
			{key: "b", take: 1, ok: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.capacity, tc.refill, tc.every, tc.maxKeys)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				if s.give > 0 {
					b.Give(s.key, s.give, now)
					continue
				}
				ok, wait := b.Take(s.key, s.take, now)
				if ok != s.ok || wait != s.wait {
					t.Fatalf("step %d: Take(%s, %v) at +%v = %v, %v; want %v, %v", i, s.key, s.take, s.at, ok, wait, s.ok, s.wait)
				}
			}
		})
	}
}
