package core

import (
	"testing"
	"time"
)

func TestNeedsHumanSince(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := &Intent{CreatedAt: t0}
	if got := NeedsHumanSince(in); !got.Equal(t0) {
		t.Fatalf("no attempts: %v", got)
	}
	in.Attempts = []Attempt{{EndedAt: t0.Add(time.Minute)}}
	if got := NeedsHumanSince(in); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after attempt: %v", got)
	}
	in.Resolutions = []Resolution{{At: t0.Add(5 * time.Minute), Recommend: true}}
	if got := NeedsHumanSince(in); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("a recommendation must not restart the wait: %v", got)
	}
	in.Resolutions = append(in.Resolutions, Resolution{At: t0.Add(7 * time.Minute)})
	if got := NeedsHumanSince(in); !got.Equal(t0.Add(7 * time.Minute)) {
		t.Fatalf("after a decision: %v", got)
	}
}

func TestBreakerEvent(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC)
	n := BreakerEvent(EventBreakerOpened, "sandbox", "a1", at, "3 failures")
	if n.ID != "gate.sandbox/a1.breaker.opened.1767225600000000005" || n.Type != EventBreakerOpened || n.Reason != "3 failures" || n.Provider != "sandbox" || n.Account != "a1" || !n.At.Equal(at) {
		t.Fatalf("%+v", n)
	}
	if BreakerEvent(EventBreakerOpened, "sandbox", "a1", at, "other words").ID != n.ID {
		t.Fatal("the id must be stable for the same gate event")
	}
	if BreakerEvent(EventBreakerClosed, "sandbox", "a1", at, "3 failures").ID == n.ID {
		t.Fatal("closing is another event")
	}
}
