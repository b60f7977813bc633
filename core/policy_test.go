package core

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/core/gate"
)

// TestAttemptPolicyResolve: a field left zero takes the default (a zero
// Backoff, Reconcile or Breaker as a whole), a field set is kept, and every
// bound out of range is an error naming it.
func TestAttemptPolicyResolve(t *testing.T) {
	def := DefaultAttemptPolicy
	same := func(a, b AttemptPolicy) bool {
		a.Backoff.Rand, b.Backoff.Rand = nil, nil
		return reflect.DeepEqual(a, b)
	}
	ok := []struct {
		name string
		in   AttemptPolicy
		want func() AttemptPolicy
	}{
		{"zero: the default", AttemptPolicy{}, func() AttemptPolicy { return def }},
		{"the default resolves to itself", def, func() AttemptPolicy { return def }},
		{"a lease alone: the rest default", AttemptPolicy{Lease: 5 * time.Second}, func() AttemptPolicy {
			p := def
			p.Lease = 5 * time.Second
			return p
		}},
		{"a backoff is taken whole", AttemptPolicy{Backoff: BackoffPolicy{Base: time.Second, Cap: time.Second, MaxAttempts: 2, MaxAge: time.Hour}}, func() AttemptPolicy {
			p := def
			p.Backoff = BackoffPolicy{Base: time.Second, Cap: time.Second, MaxAttempts: 2, MaxAge: time.Hour}
			return p
		}},
		{"failures 0 with other fields: the breaker is off", AttemptPolicy{Breaker: gate.BreakerPolicy{Cooldown: time.Second}}, func() AttemptPolicy {
			p := def
			p.Breaker = gate.BreakerPolicy{Cooldown: time.Second}
			return p
		}},
	}
	for _, c := range ok {
		got, err := c.in.Resolve()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if want := c.want(); !same(got, want) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, want)
		}
	}
	if got, _ := (AttemptPolicy{}).Resolve(); got.Backoff.Rand == nil {
		t.Error("the default backoff does not jitter")
	}

	bad := []struct {
		name, says string
		in         AttemptPolicy
	}{
		{"cap below base", "backoff: base", AttemptPolicy{Backoff: BackoffPolicy{Base: time.Minute, Cap: time.Second, MaxAttempts: 2, MaxAge: time.Hour}}},
		{"no attempts", "maxAttempts 0", AttemptPolicy{Backoff: BackoffPolicy{Base: time.Second, Cap: time.Second, MaxAge: time.Hour}}},
		{"no max age", "maxAge 0s", AttemptPolicy{Backoff: BackoffPolicy{Base: time.Second, Cap: time.Second, MaxAttempts: 2}}},
		{"window below delay", "reconcile: delay", AttemptPolicy{Reconcile: ReconcilePolicy{Delay: time.Minute, Window: time.Second, Settle: time.Second}}},
		{"settle past the window", "reconcile: settle", AttemptPolicy{Reconcile: ReconcilePolicy{Delay: time.Second, Window: time.Minute, Settle: time.Hour}}},
		{"no settle", "reconcile: settle", AttemptPolicy{Reconcile: ReconcilePolicy{Delay: time.Second, Window: time.Minute}}},
		{"negative lease", "lease -1s", AttemptPolicy{Lease: -time.Second}},
		{"negative grace", "sweepGrace -1s", AttemptPolicy{SweepGrace: -time.Second}},
		{"negative retry-after", "defaultRetryAfter -1s", AttemptPolicy{DefaultRetryAfter: -time.Second}},
		{"negative recheck", "barrierRecheck -1s", AttemptPolicy{BarrierRecheck: -time.Second}},
		{"negative failures", "breaker: failures -1", AttemptPolicy{Breaker: gate.BreakerPolicy{Failures: -1}}},
		{"breaker without cooldown", "breaker: failures 3", AttemptPolicy{Breaker: gate.BreakerPolicy{Failures: 3, MaxCooldown: time.Minute, ProbeLease: time.Second}}},
		{"max cooldown below cooldown", "maxCooldown 1s", AttemptPolicy{Breaker: gate.BreakerPolicy{Failures: 3, Cooldown: time.Minute, MaxCooldown: time.Second, ProbeLease: time.Second}}},
		{"breaker without probe lease", "probeLease 0s", AttemptPolicy{Breaker: gate.BreakerPolicy{Failures: 3, Cooldown: time.Second, MaxCooldown: time.Minute}}},
	}
	for _, c := range bad {
		_, err := c.in.Resolve()
		if err == nil || !strings.HasPrefix(err.Error(), "attempt policy: ") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.says)
		}
	}
	// Every field out of bounds is named at once.
	_, err := AttemptPolicy{Lease: -1, BarrierRecheck: -1}.Resolve()
	if err == nil || !strings.Contains(err.Error(), "lease") || !strings.Contains(err.Error(), "barrierRecheck") {
		t.Errorf("two bad fields: %v", err)
	}
}
