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

// TestTakeAtMost: a share of what the bucket holds, in whole tokens.
func TestTakeAtMost(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := New(10, 10, time.Minute, 1)
	for i, tc := range []struct {
		key  string
		at   time.Duration
		n    int
		want int
	}{
		{"a", 0, 4, 4},
		{"a", 0, 8, 6},
		{"a", 0, 1, 0},
		{"a", 9 * time.Second, 5, 1},  // 1.5 back
		{"a", 12 * time.Second, 5, 1}, // 0.5 + 0.5
		{"b", 0, 1, 0},                // untracked: a holds the one place
		{"a", 0, 0, 0},
	} {
		if got := b.TakeAtMost(tc.key, tc.n, t0.Add(tc.at)); got != tc.want {
			t.Fatalf("step %d: TakeAtMost(%s, %d) at +%v = %d; want %d", i, tc.key, tc.n, tc.at, got, tc.want)
		}
	}
}

// TestGiveForgetsFull: a bucket given back all it lacked is forgotten.
func TestGiveForgetsFull(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New(10, 1, time.Minute, 0)
	if got := b.TakeAtMost("a", 4, now); got != 4 {
		t.Fatalf("took %d; want 4", got)
	}
	b.Give("a", 3, now)
	if len(b.keys) != 1 {
		t.Fatalf("%d keys tracked with one not full; want 1", len(b.keys))
	}
	b.Give("a", 1, now)
	if len(b.keys) != 0 {
		t.Fatalf("%d keys tracked after the bucket filled; want 0", len(b.keys))
	}
}

// TestSweepBounded: with the keys at their bound, the walk forgetting full
// buckets runs at most once per token's refill time: a new key in
// between is refused although a bucket has filled since, and let in
// after. Before, every new key past the bound walked every key (a flood
// of new clients made each request cost the whole map under the lock).
func TestSweepBounded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := New(1, 1, time.Second, 2)
	for i, tc := range []struct {
		key  string
		at   time.Duration
		want bool
	}{
		{"a", 0, true},
		{"b", 500 * time.Millisecond, true},
		{"c", 600 * time.Millisecond, false},  // walks: a and b not full
		{"c", 1200 * time.Millisecond, false}, // a is full, but walked 0.6 s ago
		{"c", 1600 * time.Millisecond, true},  // walks again: a forgotten
	} {
		if ok, _ := b.Take(tc.key, 1, t0.Add(tc.at)); ok != tc.want {
			t.Fatalf("step %d: Take(%s) at +%v = %v; want %v", i, tc.key, tc.at, ok, tc.want)
		}
	}
}
