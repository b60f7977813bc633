package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/sandbox"
)

// The hosts' lease, sweep grace and sweep interval in the inline crash tests.
const (
	inlineCrashLease    = 5 * time.Second
	inlineCrashGrace    = 2 * time.Second
	inlineCrashInterval = 2 * time.Second
)

// TestHostKilledDuringAnInlineSend (issue 26): a host killed (SIGKILL)
// while the intake's inline attempt is at the provider leaves the intent in
// flight under the lease its put wrote; the restarted host's sweeper takes
// it down the unknown-outcome path as for a crashed dispatcher. The
// provider offers neither idempotency keys nor lookup, so it ends with a
// human, and the provider performed the effect exactly once (its held
// request commits after the kill; nothing sends it again).
func TestHostKilledDuringAnInlineSend(t *testing.T) {
	t.Parallel()
	id, inFlight, effects, restart := killDuringInlineSend(t, "acct-inline-crash", `{"idempotencyKeys":false,"lookup":false}`)
	ctx := context.Background()
	store := restart()
	var swept *core.Intent
	waitFor(t, inlineCrashLease+inlineCrashGrace+inlineCrashInterval+15*time.Second, "the restarted host sweeps the crashed inline attempt", func() bool {
		in, err := store.Get(ctx, id)
		if err == nil && in.Status != core.StatusInFlight && in.Status != core.StatusUnknownOutcome {
			swept = in
			return true
		}
		return false
	})
	last := swept.Attempts[len(swept.Attempts)-1]
	if swept.Status != core.StatusNeedsHuman || last.Result != core.ResultLeaseExpired || !last.StartedAt.Equal(inFlight.Lease.Since) {
		t.Fatalf("swept to %s (%s), last attempt %s started %v; want needs-human, lease-expired, started at the inline put %v",
			swept.Status, swept.StatusReason, last.Result, last.StartedAt, inFlight.Lease.Since)
	}
	waitFor(t, 10*time.Second, "the held request commits at the provider", func() bool { return effects(id) == 1 })
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if n := effects(id); n != 1 {
			t.Fatalf("%d effects, want exactly 1", n)
		}
	}
}

// killDuringInlineSend starts a host, submits with Prefer: wait for account
// (whose sandbox account declares caps and holds each request 3 s, then
// commits), SIGKILLs the host while the inline attempt is at the provider
// and returns the intent's id, its in-flight state as the put wrote it, the
// sandbox's effect count for an id, and a restart of the host on the same
// table (returning the store).
func killDuringInlineSend(t *testing.T, account, caps string) (string, *core.Intent, func(string) int, func() *dynamo.Store) {
	t.Helper()
	requireEmulators(t)
	const (
		lease    = inlineCrashLease
		grace    = inlineCrashGrace
		interval = inlineCrashInterval
	)
	ctx := context.Background()
	bin := hostBinary(t)
	// The provider outlives the host. Its account holds the request 3 s,
	// then commits: the send is in flight when the host dies, and the
	// effect lands after.
	sb, sbURL := sandbox.StartTest(t, time.Now)
	post(t, sbURL+"/_sandbox/faults", "", fmt.Sprintf(`{"account":%q,"capabilities":%s,"faults":[{"kind":"hang","delayMs":3000}]}`, account, caps), http.StatusOK)

	start, store := hostLauncher(t, bin, "icrash_", sbURL, lease, grace, interval)
	effects := func(id string) int {
		resp, err := http.Get(sbURL + "/_sandbox/effects?intentId=" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var er sandbox.EffectsResponse
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&er) != nil || er.Count != len(er.Effects) {
			t.Fatalf("sandbox effects: status %d", resp.StatusCode)
		}
		return er.Count
	}

	host, addr := start()
	body := fmt.Sprintf(`{"kind":"reply","provider":"sandbox","account":%q,"action":"send_message","target":"chan-1","payload":{"text":"inline crash"},"grant":{"id":"dev-grant","version":1}}`, account)
	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/intents", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer dev-bot-token")
		req.Header.Set("Idempotency-Key", "inline-crash-"+account)
		req.Header.Set("Prefer", "wait=10")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %d before the kill", resp.StatusCode)
		}
		answered <- err
	}()
	id := core.IntentID("dev-bot", "inline-crash-"+account)
	var inFlight *core.Intent
	waitFor(t, 30*time.Second, "the inline attempt is in flight", func() bool {
		in, err := store.Get(ctx, id)
		if err == nil && in.Status == core.StatusInFlight {
			inFlight = in
			return true
		}
		return false
	})
	if inFlight.AttemptCount != 1 || inFlight.Lease == nil || inFlight.RepairAt.IsZero() || inFlight.Version != 1 {
		t.Fatalf("the inline put: attempt %d lease %v repair entry %v version %d; want attempt 1 under a lease, filed for repair, written once",
			inFlight.AttemptCount, inFlight.Lease, inFlight.RepairAt, inFlight.Version)
	}
	// At the provider, not only written in flight: a host killed between
	// its put and its send sends nothing, which is not this case.
	waitFor(t, 10*time.Second, "the sandbox holds the inline send", func() bool { return sb.Held(account) == 1 })
	if err := host.Process.Kill(); err != nil { // SIGKILL: no shutdown path runs
		t.Fatal(err)
	}
	_ = host.Wait()
	if err := <-answered; err != nil && strings.Contains(err.Error(), "before the kill") {
		t.Fatal(err)
	}

	return id, inFlight, effects, func() *dynamo.Store { start(); return store }
}

// TestHostKilledDuringAnInlineSendEndsByLookupOrKey (issue 26): the same
// kill for an account whose provider offers lookup, or idempotency keys:
// the restarted host's sweeper takes the lost inline attempt to unknown
// outcome, and the intent ends succeeded, by the lookup finding the
// committed effect or by a retry under the same key that the provider
// answers with it, with exactly one provider effect either way.
func TestHostKilledDuringAnInlineSendEndsByLookupOrKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, account, caps string }{
		{"lookup", "acct-inline-crash-lookup", `{"idempotencyKeys":false,"lookup":true}`},
		{"keys", "acct-inline-crash-keys", `{"idempotencyKeys":true,"lookup":false}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Each case has its own sandbox, table and host: they run side
			// by side (most of a case is the lease and the sweeper's clock).
			t.Parallel()
			id, inFlight, effects, restart := killDuringInlineSend(t, c.account, c.caps)
			ctx := context.Background()
			store := restart()
			var done *core.Intent
			waitFor(t, inlineCrashLease+inlineCrashGrace+inlineCrashInterval+30*time.Second, "the restarted host ends the crashed inline attempt", func() bool {
				in, err := store.Get(ctx, id)
				if err == nil && in.Status.Terminal() || err == nil && in.Status == core.StatusNeedsHuman {
					done = in
					return true
				}
				return false
			})
			if done.Status != core.StatusSucceeded || done.ExternalID == "" {
				t.Fatalf("ended %s (%s) external %q; want succeeded with the provider's id", done.Status, done.StatusReason, done.ExternalID)
			}
			lost := false
			for _, a := range done.Attempts {
				if a.N == inFlight.AttemptCount && a.Result == core.ResultLeaseExpired && a.StartedAt.Equal(inFlight.Lease.Since) {
					lost = true
				}
			}
			if !lost {
				t.Fatalf("no lease-expired entry for the inline attempt: %+v", done.Attempts)
			}
			if n := effects(id); n != 1 {
				t.Fatalf("%d effects, want exactly 1", n)
			}
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if n := effects(id); n != 1 {
					t.Fatalf("%d effects, want exactly 1", n)
				}
			}
		})
	}
}
