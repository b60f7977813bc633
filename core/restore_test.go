package core

import (
	"context"
	"errors"
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
			if got == RestoreUnchanged {
				if len(in.Attempts) != before {
					t.Fatalf("history changed")
				}
			} else {
				if len(in.Attempts) != before+1 {
					t.Fatalf("the cutoff must be recorded as evidence")
				}
				// Every later send must treat the cutoff as a possible send.
				if !MayHaveTakenEffect(in) {
					t.Fatalf("restored intent does not count as possibly sent")
				}
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
			in.Attempts = append(in.Attempts, Attempt{Result: AttemptResult(r)})
		}
		if got := MayHaveTakenEffect(in); got != c.want {
			t.Errorf("%v: got %v", c.results, got)
		}
	}
}

// Chaos seed 2766320928: a pending intent restored under a key still retained
// was delivered, rate limited, and retried after the key had expired — a
// second effect if the original system had sent it after the cutoff.
func TestRestoredPendingIsNotResentPastKeyRetention(t *testing.T) {
	r := newRig(Capabilities{IdempotencyKeys: true, KeyRetention: 30 * time.Second},
		&RetryableError{Class: ClassRateLimited, RetryAfter: time.Minute, Err: errors.New("429")})
	r.d.Lease = time.Second
	in := r.submit(t)
	cutoff := r.clock.Now()
	if _, err := r.store.Update(context.Background(), in.ID, func(i *Intent) error {
		out, err := PlanRestore(i, cutoff, r.clock.Now(), r.prov.caps)
		if err == nil && out != RestoreKeptPending {
			t.Fatalf("plan %s", out)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mustAttempt(t, r.d, in.ID) // within retention: sent (429)
	r.drain(t)                 // the retry falls after retention
	got := r.get(t, in.ID)
	if r.prov.sends != 1 || got.Status != StatusNeedsHuman {
		t.Fatalf("sends=%d status=%s: a resend past the key's retention could duplicate a post-cutoff send", r.prov.sends, got.Status)
	}
}
