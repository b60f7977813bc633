package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/restore"
)

func TestPlanRestore(t *testing.T) {
	cutoff := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	now := cutoff.Add(time.Hour)
	keys := core.Capabilities{IdempotencyKeys: true, KeyRetention: 24 * time.Hour}
	shortKeys := core.Capabilities{IdempotencyKeys: true, KeyRetention: 30 * time.Minute}
	lookup := core.Capabilities{Lookup: true}
	cases := []struct {
		name     string
		status   core.Status
		caps     core.Capabilities
		want     string
		wantStat core.Status
	}{
		{"in flight, neither", core.StatusInFlight, core.Capabilities{}, restore.RestoreNeedsHuman, core.StatusNeedsHuman},
		{"in flight, keys: never resumed", core.StatusInFlight, keys, restore.RestoreNeedsHuman, core.StatusNeedsHuman},
		{"in flight, lookup", core.StatusInFlight, lookup, restore.RestoreReconcile, core.StatusUnknownOutcome},
		{"pending, keys within retention", core.StatusPending, keys, restore.RestoreKeptPending, core.StatusPending},
		{"pending, keys past retention", core.StatusPending, shortKeys, restore.RestoreNeedsHuman, core.StatusNeedsHuman},
		{"pending, lookup", core.StatusPending, lookup, restore.RestoreReconcile, core.StatusUnknownOutcome},
		{"pending, neither", core.StatusPending, core.Capabilities{}, restore.RestoreNeedsHuman, core.StatusNeedsHuman},
		{"retryable, neither", core.StatusRetryableFailure, core.Capabilities{}, restore.RestoreNeedsHuman, core.StatusNeedsHuman},
		{"needs-human stays", core.StatusNeedsHuman, lookup, restore.RestoreUnchanged, core.StatusNeedsHuman},
		{"succeeded stays", core.StatusSucceeded, core.Capabilities{}, restore.RestoreUnchanged, core.StatusSucceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := &core.Intent{ID: "it_x", Status: c.status, AttemptCount: 1, Attempts: []core.Attempt{{N: 1}}}
			if c.status == core.StatusPending {
				in.AttemptCount, in.Attempts = 0, nil
			}
			before := len(in.Attempts)
			got, err := restore.PlanRestore(in, cutoff, now, c.caps)
			if err != nil || got != c.want || in.Status != c.wantStat {
				t.Fatalf("got %s %s %v, want %s %s", got, in.Status, err, c.want, c.wantStat)
			}
			if got == restore.RestoreUnchanged {
				if len(in.Attempts) != before {
					t.Fatalf("history changed")
				}
			} else {
				if len(in.Attempts) != before+1 {
					t.Fatalf("the cutoff must be recorded as evidence")
				}
				// Every later send must treat the cutoff as a possible send.
				if !core.MayHaveTakenEffect(in) {
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
		in := &core.Intent{}
		for _, r := range c.results {
			in.Attempts = append(in.Attempts, core.Attempt{Result: core.AttemptResult(r)})
		}
		if got := core.MayHaveTakenEffect(in); got != c.want {
			t.Errorf("%v: got %v", c.results, got)
		}
	}
}

// Chaos seed 2766320928: a pending intent restored under a key still retained
// was delivered, rate limited, and retried after the key had expired — a
// second effect if the original system had sent it after the cutoff.
func TestRestoredPendingIsNotResentPastKeyRetention(t *testing.T) {
	r := core.NewRig(core.Capabilities{IdempotencyKeys: true, KeyRetention: 30 * time.Second},
		&core.RetryableError{Class: core.ClassRateLimited, RetryAfter: time.Minute, Err: errors.New("429")})
	r.D.Policy.Lease = time.Second
	in := r.Submit(t)
	cutoff := r.Clock.Now()
	if _, err := r.Store.Update(context.Background(), in.ID, func(i *core.Intent) error {
		out, err := restore.PlanRestore(i, cutoff, r.Clock.Now(), r.Prov.Caps())
		if err == nil && out != restore.RestoreKeptPending {
			t.Fatalf("plan %s", out)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	core.MustAttempt(t, r.D, in.ID) // within retention: sent (429)
	r.Drain(t)                      // the retry falls after retention
	got := r.Get(t, in.ID)
	if r.Prov.Sends() != 1 || got.Status != core.StatusNeedsHuman {
		t.Fatalf("sends=%d status=%s: a resend past the key's retention could duplicate a post-cutoff send", r.Prov.Sends(), got.Status)
	}
}
