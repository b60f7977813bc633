package core

import (
	"testing"
	"time"
)

func TestBackoffGrowsCapsAndStops(t *testing.T) {
	p := BackoffPolicy{Base: time.Second, Cap: 10 * time.Second, MaxAttempts: 6, MaxAge: time.Hour}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want := []time.Duration{1, 2, 4, 8, 10}
	for i, w := range want {
		d, ok := p.Next(i+1, t0, t0, 0)
		if !ok || d != w*time.Second {
			t.Fatalf("attempt %d: got %v %v, want %v", i+1, d, ok, w*time.Second)
		}
	}
	if _, ok := p.Next(6, t0, t0, 0); ok {
		t.Fatal("policy allowed a 7th attempt past MaxAttempts=6")
	}
	if _, ok := p.Next(2, t0, t0.Add(59*time.Minute+59*time.Second), 0); ok {
		t.Fatal("policy allowed a retry past MaxAge")
	}
}

func TestBackoffJitterIsInjectedAndBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range []float64{0, 0.5, 0.999} {
		p := BackoffPolicy{Base: time.Second, Cap: time.Minute, MaxAttempts: 10, Rand: func() float64 { return r }}
		d, ok := p.Next(3, t0, t0, 0)
		ceiling := 4 * time.Second
		if !ok || d < ceiling/10 || d > ceiling {
			t.Fatalf("rand=%v: delay %v outside [%v,%v]", r, d, ceiling/10, ceiling)
		}
		d2, _ := p.Next(3, t0, t0, 0)
		if d != d2 {
			t.Fatalf("same injected randomness gave %v then %v", d, d2)
		}
	}
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	p := BackoffPolicy{Base: time.Second, Cap: time.Minute, MaxAttempts: 10, MaxAge: time.Hour}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if d, ok := p.Next(1, t0, t0, 30*time.Second); !ok || d != 30*time.Second {
		t.Fatalf("Retry-After 30s gave %v %v", d, ok)
	}
	if _, ok := p.Next(1, t0, t0, 2*time.Hour); ok {
		t.Fatal("a Retry-After past MaxAge must exhaust the policy")
	}
}
