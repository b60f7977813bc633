package intake

import (
	"testing"
	"time"
)

func TestPreferWait(t *testing.T) {
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"wait=10", 10 * time.Second},
		{"WAIT=3", 3 * time.Second},
		{"respond-async, wait=5", 5 * time.Second},
		{"return=minimal; foo=bar, wait = 7", 7 * time.Second},
		{`wait="4"`, 4 * time.Second},
		{"wait=0", 0},
		{"wait=-1", 0},
		{"wait=abc", 0},
		{"wait=1.5", 0},
		{"waiting=5", 0},
		{"wait", 0},
		{"wait=99999999", time.Hour}, // bounded before the configured cap applies
		{"wait=2, wait=9", 2 * time.Second},
	} {
		if got := PreferWait(c.header); got != c.want {
			t.Errorf("PreferWait(%q) = %v, want %v", c.header, got, c.want)
		}
	}
}
