package gate

import (
	"testing"
	"time"
)

func TestMostInWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		var ts []time.Time
		for _, m := range ms {
			ts = append(ts, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return ts
	}
	for _, c := range []struct {
		name  string
		times []time.Time
		want  int
	}{
		{"none", nil, 0},
		{"one", at(5), 1},
		{"exactly one window apart: two windows", at(0, 1000), 1},
		{"just inside one window", at(0, 999), 2},
		{"unsorted", at(2100, 0, 1500, 600, 1200), 3},
		{"a burst", at(0, 1, 2, 3, 1000, 2000), 4},
	} {
		if got := MostInWindow(c.times, time.Second); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
