package overview

import (
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

func TestIntentFilterMatches(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	in := &core.Intent{Provider: "sandbox", Account: "a1", Bot: "b1", Status: core.StatusNeedsHuman, CreatedAt: now.Add(-time.Hour),
		Attempts: []core.Attempt{{EndedAt: now.Add(-10 * time.Minute)}}}
	cases := []struct {
		name string
		f    IntentFilter
		want bool
	}{
		{"empty filter matches", IntentFilter{}, true},
		{"provider", IntentFilter{Provider: "sandbox"}, true},
		{"other provider", IntentFilter{Provider: "slack"}, false},
		{"account", IntentFilter{Account: "a1"}, true},
		{"other account", IntentFilter{Account: "a2"}, false},
		{"bot", IntentFilter{Bot: "b1"}, true},
		{"other bot", IntentFilter{Bot: "b2"}, false},
		{"waited long enough", IntentFilter{MinWaiting: 10 * time.Minute}, true},
		{"not waited long enough", IntentFilter{MinWaiting: 11 * time.Minute}, false},
		{"all fields", IntentFilter{Provider: "sandbox", Account: "a1", Bot: "b1", MinWaiting: time.Minute}, true},
	}
	for _, c := range cases {
		if got := c.f.Matches(in, now); got != c.want {
			t.Errorf("%s: got %v want %v", c.name, got, c.want)
		}
	}
}
