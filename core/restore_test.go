package core

import (
	"testing"
	"time"
)

func TestPlanRestore(t *testing.T) {
	cutoff := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	now := cutoff.Add(time.Hour)
	keys := Capabilities{IdempotencyKeys: true, KeyRetention: 24 * time.Hour}
	shortKeys := Capabilities{IdempotencyKeys: true, KeyRetention: 30 * time.Minute}
	lookup := Capabilities{Lookup: true}
	cases := []struct {
		name     string
		status   Status
		caps     Capabilities
		want     string
		wantStat Status
	}{
		{"in flight, neither", StatusInFlight, Capabilities{}, RestoreNeedsHuman, StatusNeedsHuman},
		{"in flight, keys: never resumed", StatusInFlight, keys, RestoreNeedsHuman, StatusNeedsHuman},
		{"in flight, lookup", StatusInFlight, lookup, RestoreReconcile, StatusUnknownOutcome},
		{"pending, keys within retention", StatusPending, keys, RestoreKeptPending, StatusPending},
		{"pending, keys past retention", StatusPending, shortKeys, RestoreNeedsHuman, StatusNeedsHuman},
		{"pending, lookup", StatusPending, lookup, RestoreReconcile, StatusUnknownOutcome},
		{"pending, neither", StatusPending, Capabilities{}, RestoreNeedsHuman, StatusNeedsHuman},
		{"retryable, neither", StatusRetryableFailure, Capabilities{}, RestoreNeedsHuman, StatusNeedsHuman},
		{"needs-human stays", StatusNeedsHuman, lookup, RestoreUnchanged, StatusNeedsHuman},
		{"succeeded stays", StatusSucceeded, Capabilities{}, RestoreUnchanged, StatusSucceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := &Intent{ID: "it_x", Status: c.status, AttemptCount: 1, Attempts: []Attempt{{N: 1}}}
			if c.status == StatusPending {
				in.AttemptCount, in.Attempts = 0, nil
			}
			before := len(in.Attempts)
			got, err := PlanRestore(in, cutoff, now, c.caps)
			if err != nil || got != c.want || in.Status != c.wantStat {
				t.Fatalf("got %s %s %v, want %s %s", got, in.Status, err, c.want, c.wantStat)
			}
			if got == RestoreReconcile || got == RestoreNeedsHuman {
				if len(in.Attempts) != before+1 {
					t.Fatalf("the cutoff must be recorded as evidence")
				}
			} else if len(in.Attempts) != before {
				t.Fatalf("history changed")
			}
		})
	}
}

func TestMayHaveTakenEffect(t *testing.T) {
	cases := []struct {
		results []string
		want    bool
	}{
		{nil, false},
		{[]string{"transient"}, false},
		{[]string{"unknown-outcome"}, true},
		{[]string{"unknown-outcome", "lookup-absent"}, false},
		{[]string{"unknown-outcome", "lookup-absent", "lease-expired"}, true},
		{[]string{"in-flight-at-cutoff"}, true},
	}
	for _, c := range cases {
		in := &Intent{}
		for _, r := range c.results {
			in.Attempts = append(in.Attempts, Attempt{Result: r})
		}
		if got := MayHaveTakenEffect(in); got != c.want {
			t.Errorf("%v: got %v", c.results, got)
		}
	}
}
