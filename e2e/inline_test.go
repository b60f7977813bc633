package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/client"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/sandbox"
)

// Inline delivery (issue 26): POST /v1/intents with Prefer: wait.

func (e *env) submitWait(token, key, body string, wait int) response {
	e.t.Helper()
	return e.do("POST", "/v1/intents", token, map[string]string{"Idempotency-Key": key, "Prefer": fmt.Sprintf("wait=%d", wait)}, body)
}

// The happy path: 201 with the intent after its attempt (succeeded, the
// provider's id), Preference-Applied, exactly two DynamoDB writes (the put,
// already claimed, and the outcome) and one effect at the sandbox; nothing
// else (stream, queue, sweeper) touches it afterwards.
func TestInlineDeliveryAnswersTheOutcomeInTwoWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	acct := randName("acct-inline-")
	r := e.submitWait(botToken, "inline-1", intentBody(acct, "chan-1", "hello inline"), 5)
	var in core.Intent
	r.json(t, &in)
	if r.status != http.StatusCreated || in.Status != core.StatusSucceeded || in.ExternalID == "" {
		t.Fatalf("inline submit: %d %s", r.status, r.body)
	}
	if got := r.headers.Get("Preference-Applied"); got != "wait=5" {
		t.Fatalf("Preference-Applied %q, want wait=5", got)
	}
	if len(in.Attempts) != 1 || in.Attempts[0].Trigger != core.TriggerInline || in.Attempts[0].Checks == nil || in.AttemptCount != 1 {
		t.Fatalf("attempts: %s", trail(&in))
	}
	if n := e.writes.n.Load(); n != 2 {
		t.Fatalf("%d DynamoDB writes for an inline delivery, want 2", n)
	}
	e.assertEffectsStay(in.ID, 1, 500*time.Millisecond)
	if n := e.writes.n.Load(); n != 2 {
		t.Fatalf("%d DynamoDB writes after the stream and queue had their chance, want 2", n)
	}
	// A replay answers the stored outcome, as any replay.
	r = e.submitWait(botToken, "inline-1", intentBody(acct, "chan-1", "hello inline"), 5)
	var again core.Intent
	r.json(t, &again)
	if r.status != http.StatusOK || again.Status != core.StatusSucceeded || again.ExternalID != in.ExternalID {
		t.Fatalf("replay: %d %s", r.status, r.body)
	}

	// The Go client: SubmitAndWait.
	c := client.New(e.api.URL, botToken)
	payload, _ := json.Marshal(map[string]string{"text": "from the client"})
	sub, err := c.SubmitAndWait(context.Background(), client.IntentRequest{Kind: "reply", Provider: "sandbox", Account: acct,
		Action: testAction, Target: "chan-1", Payload: payload, Grant: client.GrantRef{ID: "g-1", Version: 1}},
		client.SubmitOptions{Key: "inline-client-1"}, client.AndWaitOptions{Wait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !sub.WaitApplied || sub.Intent.Status != "succeeded" || sub.Intent.ExternalID == "" {
		t.Fatalf("SubmitAndWait: inline=%v %s %q", sub.WaitApplied, sub.Intent.Status, sub.Intent.ExternalID)
	}
	if n := e.effectsFor(sub.Intent.ID); n != 1 {
		t.Fatalf("SubmitAndWait: %d effects", n)
	}
}

// A paused account, a raised backup barrier and a revalidation that blocks
// each make Prefer: wait fall back to the asynchronous road: 201 pending,
// no Preference-Applied, and then exactly what that road does. A revoked
// grant is refused at intake, wait or not.
func TestInlineFallsBackWhereAnAttemptCouldNotBeMadeNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	ctx := context.Background()
	fallback := func(t *testing.T, r response) core.Intent {
		t.Helper()
		var in core.Intent
		r.json(t, &in)
		if r.status != http.StatusCreated || in.Status != core.StatusPending || r.headers.Get("Preference-Applied") != "" {
			t.Fatalf("want 201 pending without Preference-Applied: %d %q %s", r.status, r.headers.Get("Preference-Applied"), r.body)
		}
		return in
	}

	t.Run("paused account", func(t *testing.T) {
		acct := randName("acct-paused-")
		// Long enough to outlast a slow machine's request (the pause is read
		// before the put); the asynchronous road sends once it is over.
		until := time.Now().Add(6 * time.Second)
		if err := e.st.App.Gate.Store.Pause(ctx, gate.GateKey("sandbox", acct), until); err != nil {
			t.Fatal(err)
		}
		in := fallback(t, e.submitWait(botToken, randName("paused-"), intentBody(acct, "chan-1", "after the pause"), 5))
		got := e.waitStatus(in.ID, 30*time.Second, core.StatusSucceeded)
		if n := e.effectsFor(in.ID); n != 1 {
			t.Fatalf("%d effects", n)
		}
		if last := got.Attempts[len(got.Attempts)-1]; last.StartedAt.Before(until) {
			t.Fatalf("sent at %v, inside the pause (until %v)", last.StartedAt, until)
		}
	})

	t.Run("raised barrier", func(t *testing.T) {
		if err := e.st.App.Store.RaiseBarrier(ctx, testBot2, "bk_inline", time.Now().UTC(), 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.st.App.Store.LiftBarrier(context.Background(), testBot2, "bk_inline") })
		in := fallback(t, e.submitWait(bot2Token, randName("frozen-"), intentBody("acct-frozen", "chan-1", "hold me"), 5))
		// The asynchronous road's claim is held by the barrier too: nothing sent.
		got := e.waitStatus(in.ID, 20*time.Second, core.StatusRetryableFailure)
		if last := got.Attempts[len(got.Attempts)-1]; last.Result != core.ResultHeldByBarrier {
			t.Fatalf("%s", trail(got))
		}
		if n := e.effectsFor(in.ID); n != 0 {
			t.Fatalf("%d effects behind a barrier", n)
		}
	})

	t.Run("source revised", func(t *testing.T) {
		src := randName("msg-")
		if st, _ := e.rvPutSource(botToken, src, `{"revision":5}`); st != http.StatusOK {
			t.Fatalf("put source: %d", st)
		}
		body := rvIntent("acct-rev-inline", "chan-1", "g-1", 1, fmt.Sprintf(`{"id":%q,"revision":3}`, src))
		in := fallback(t, e.submitWait(botToken, randName("revised-"), body, 5))
		e.waitStatus(in.ID, 20*time.Second, core.StatusSourceRevised)
		e.assertEffectsStay(in.ID, 0, 200*time.Millisecond)
	})

	t.Run("revoked grant", func(t *testing.T) {
		e.rvPutGrant("g-inline-rev", rvGrant(testBot, "acct-inline-rev", "*"), http.StatusCreated)
		if r := e.do("POST", "/v1/admin/grants/g-inline-rev/revoke", opToken, nil, `{"reason":"workspace gone"}`); r.status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
		before := e.itemCount()
		r := e.submitWait(botToken, randName("revoked-"), rvIntent("acct-inline-rev", "chan-1", "g-inline-rev", 1, ""), 5)
		if r.status != http.StatusForbidden || r.errorCode() != "grant_does_not_cover" {
			t.Fatalf("submit under a revoked grant with Prefer: wait: %d %s", r.status, r.body)
		}
		if n := e.itemCount(); n != before {
			t.Fatalf("items %d -> %d: a refusal wrote", before, n)
		}
	})
}

// Concurrent replays with Prefer: wait while the first request is still
// sending: one effect, and every caller gets the same final answer.
func TestInlineConcurrentReplaysWaitForTheOneOutcome(t *testing.T) {
	t.Parallel()
	// A provider timeout of 8 s (the second "sandbox" member replaces the
	// harness's 1.5 s one), so the first send can be held 4 s at the
	// provider, then commit: the replays arrive while it is in flight, even
	// on a slow machine.
	sb, sbURL := sandbox.StartTest(t, time.Now)
	e := startEnv(t, options{Config: wire.Config{ProviderConfig: fmt.Sprintf(`"sandbox":{"baseUrl":%q,"timeoutMs":8000}`, sbURL)}}, sb, sbURL)
	acct := randName("acct-replays-")
	e.faults(fmt.Sprintf(`{"account":%q,"faults":[{"kind":"hang","delayMs":4000}]}`, acct))
	body := intentBody(acct, "chan-1", "once")
	const callers = 5
	answers := make([]response, callers)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); answers[0] = e.submitWait(botToken, "replays-1", body, 8) }()
	id := core.IntentID(testBot, "replays-1")
	e.eventually(5*time.Second, "the first request's attempt is in flight", func() bool {
		in, err := e.st.App.Store.Get(context.Background(), id)
		return err == nil && in.Status == core.StatusInFlight
	})
	for i := 1; i < callers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = e.submitWait(botToken, "replays-1", body, 8) }()
	}
	wg.Wait()
	var first core.Intent
	answers[0].json(t, &first)
	if answers[0].status != http.StatusCreated || first.Status != core.StatusSucceeded || first.ExternalID == "" {
		t.Fatalf("first: %d %s", answers[0].status, answers[0].body)
	}
	waited := 0
	for i := 1; i < callers; i++ {
		var got core.Intent
		answers[i].json(t, &got)
		if answers[i].status != http.StatusOK || answers[i].headers.Get("Idempotent-Replayed") != "true" ||
			got.Status != core.StatusSucceeded || got.ExternalID != first.ExternalID {
			t.Fatalf("replay %d: %d %v %s", i, answers[i].status, answers[i].headers, answers[i].body)
		}
		// A replay that found the attempt in flight waited for it; one that
		// arrived after the end (a slow machine) answers it as today.
		switch answers[i].headers.Get("Preference-Applied") {
		case "wait=8":
			waited++
		case "":
		default:
			t.Fatalf("replay %d: Preference-Applied %q", i, answers[i].headers.Get("Preference-Applied"))
		}
	}
	if waited == 0 {
		t.Fatal("no replay waited for the in-flight attempt (all arrived after its end?)")
	}
	e.assertEffectsStay(id, 1, 300*time.Millisecond)
}
