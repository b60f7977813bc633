package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

// statuses returns the path an intent took, from its attempt history.
func trail(in *core.Intent) string {
	parts := []string{}
	for _, a := range in.Attempts {
		parts = append(parts, fmt.Sprintf("#%d %s/%s", a.N, a.Trigger, a.Result))
	}
	return strings.Join(parts, ", ") + " -> " + string(in.Status)
}

// The 004 scenario, per capability: the provider commits, the response is
// dropped, the worker process restarts.
func TestDroppedResponseThenRestart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		caps   string
		want   core.Status
		checks func(t *testing.T, in *core.Intent)
	}{
		{"idempotency keys", `{"idempotencyKeys":true,"keyRetentionSeconds":86400}`, core.StatusSucceeded, func(t *testing.T, in *core.Intent) {
			if len(in.Attempts) != 2 || in.Attempts[1].Evidence.Extra["replayed"] != "true" {
				t.Fatalf("want a second attempt answered by the provider's replay: %s", trail(in))
			}
		}},
		{"outcome lookup", `{"lookup":true}`, core.StatusSucceeded, func(t *testing.T, in *core.Intent) {
			last := in.Attempts[len(in.Attempts)-1]
			if last.Result != core.ResultLookupFound || last.ExternalID == "" || in.ExternalID != last.ExternalID || in.AttemptCount != 1 {
				t.Fatalf("want reconciliation through lookup, one attempt: %s", trail(in))
			}
		}},
		{"neither", `{"idempotencyKeys":false,"lookup":false}`, core.StatusNeedsHuman, func(t *testing.T, in *core.Intent) {
			if in.AttemptCount != 1 || in.Attempts[0].Result != core.ResultUnknownOutcome {
				t.Fatalf("want one attempt with unknown outcome: %s", trail(in))
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has its own table, workers and sandbox
			w1 := newEnv(t, options{})
			acct := "acct-" + strings.ReplaceAll(c.name, " ", "-")
			w1.faults(fmt.Sprintf(`{"account":%q,"capabilities":%s,"faults":[{"kind":"drop_after_commit"}]}`, acct, c.caps))
			id := w1.mustSubmit("k-"+acct, intentBody(acct, "chan-1", "book seat S12"))
			// The first worker makes the attempt and loses the response...
			w1.waitStatus(id, 10*time.Second, core.StatusRetryableFailure, core.StatusUnknownOutcome, core.StatusNeedsHuman)
			// ...and its process goes away. A new worker takes over the table and queues.
			w1.stop()
			w2 := w1.join(options{SweepInterval: 200 * time.Millisecond})
			in := w2.waitStatus(id, 15*time.Second, c.want)
			c.checks(t, in)
			// The sweeper keeps running; nothing else may go out.
			w2.assertEffectsStay(id, 1, 1500*time.Millisecond)
			if got := w2.intent(id); got.Status != c.want {
				t.Fatalf("status moved on to %s", got.Status)
			}
			t.Logf("%s: %s; effects=1", c.name, trail(in))
		})
	}
}

func TestTwoDispatchersRacingMakeOneEffect(t *testing.T) {
	t.Parallel()
	w1 := newEnv(t, options{})
	w2 := w1.join(options{})
	// A slow provider widens the window in which both could think they own it.
	w1.faults(`{"account":"acct-race","faults":[{"kind":"hang","delayMs":300}]}`)
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = w1.mustSubmit(fmt.Sprintf("race-%d", i), intentBody("acct-race", "chan-1", fmt.Sprint("refund ", i)))
	}
	// Both workers also try every intent directly, concurrently.
	var wg sync.WaitGroup
	for _, w := range []*env{w1, w2, w1, w2} {
		for _, id := range ids {
			wg.Add(1)
			go func(w *env, id string) {
				defer wg.Done()
				_, _ = w.st.App.Dispatcher.Attempt(context.Background(), core.AttemptRequest{ID: id, Trigger: "race"})
			}(w, id)
		}
	}
	wg.Wait()
	for _, id := range ids {
		w1.waitStatus(id, 10*time.Second, core.StatusSucceeded, core.StatusNeedsHuman, core.StatusRetryableFailure)
	}
	for _, id := range ids {
		w1.assertEffectsStay(id, 1, 500*time.Millisecond)
	}
}

func TestCrashAfterClaimBeforeSendGoesToHumanNotRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	id := e.mustSubmit("crash-1", intentBody("acct-crash", "chan-1", "hi"))
	// A worker claims it and dies before calling the provider.
	leaseEnd := time.Now().UTC().Add(500 * time.Millisecond)
	_, err := e.st.App.Store.Claim(context.Background(), id, func(in *core.Intent) error {
		now := time.Now().UTC()
		in.Status, in.AttemptCount, in.FirstAttemptAt = core.StatusInFlight, 1, &now
		in.Lease = &core.Lease{Owner: "crashed-worker", Since: now, Until: leaseEnd}
		// A real claim leaves the repair entry alone because the lease it
		// takes always ends before the entry is due (lease + grace after
		// intake); this hand-made short lease moves the entry with it.
		in.RepairAt = leaseEnd
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.waitUntil(leaseEnd.Add(200 * time.Millisecond))
	for i := 0; i < 5; i++ {
		e.sweep()
	}
	in := e.waitStatus(id, 5*time.Second, core.StatusNeedsHuman)
	if len(in.Attempts) != 1 || in.Attempts[0].Result != core.ResultLeaseExpired {
		t.Fatalf("want the lease expiry recorded as evidence: %s", trail(in))
	}
	e.assertEffectsStay(id, 0, 300*time.Millisecond)
}

func TestKeyPastRetentionIsNotRetried(t *testing.T) {
	t.Parallel()
	// The provider forgets keys after 1s; the first retry could only come after that.
	e := newEnv(t, options{SweepInterval: 200 * time.Millisecond})
	e.faults(`{"account":"acct-k7","capabilities":{"idempotencyKeys":true,"keyRetentionSeconds":1},"faults":[{"kind":"drop_after_commit"}]}`)
	id := e.mustSubmit("K7", intentBody("acct-k7", "chan-1", "order O7"))
	in := e.waitStatus(id, 10*time.Second, core.StatusNeedsHuman)
	if !strings.Contains(in.StatusReason, "retention") {
		t.Fatalf("reason %q should name the key retention", in.StatusReason)
	}
	e.assertEffectsStay(id, 1, 1500*time.Millisecond)
}

func TestDeadlinePassedBeforeFirstAttemptExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	deadlineAt := time.Now().UTC().Add(1500 * time.Millisecond)
	deadline := deadlineAt.Format(time.RFC3339Nano)
	body := strings.Replace(intentBody("acct-late", "chan-1", "call back"), `"grant"`, `"deadline":"`+deadline+`","grant"`, 1)
	id := e.mustSubmit("late-1", body)
	e.waitUntil(deadlineAt.Add(500 * time.Millisecond))
	e.sweep()
	in := e.waitStatus(id, 5*time.Second, core.StatusExpired)
	if in.AttemptCount != 0 {
		t.Fatalf("an expired intent made %d attempts", in.AttemptCount)
	}
	e.assertEffectsStay(id, 0, 200*time.Millisecond)
}

// needsHuman drives a fresh intent to needs-human: one effect at a provider
// with neither capability, whose response was dropped.
func needsHuman(t *testing.T, e *env, acct, key string) string {
	t.Helper()
	e.faults(fmt.Sprintf(`{"account":%q,"capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}]}`, acct))
	id := e.mustSubmit(key, intentBody(acct, "chan-1", "pay invoice "+key))
	e.waitStatus(id, 10*time.Second, core.StatusNeedsHuman)
	return id
}

func attemptsJSON(t *testing.T, in *core.Intent) string {
	b, err := json.Marshal(in.Attempts)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (e *env) resolve(token, id, key, body string) response {
	h := map[string]string{}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return e.do("POST", "/v1/admin/intents/"+id+"/resolution", token, h, body)
}

func TestHumanDecisionsEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})

	t.Run("accept-success", func(t *testing.T) {
		id := needsHuman(t, e, "acct-h1", "h1")
		before := attemptsJSON(t, e.intent(id))
		r := e.resolve(opToken, id, "dec-1", `{"decision":"accept-success","reason":"customer confirmed receipt","externalId":"sbx_manual"}`)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		in := e.intent(id)
		if in.Status != core.StatusSucceeded || in.ExternalID != "sbx_manual" || attemptsJSON(t, in) != before {
			t.Fatalf("got %s %q; history changed: %v", in.Status, in.ExternalID, attemptsJSON(t, in) != before)
		}
		res := in.Resolutions[len(in.Resolutions)-1]
		if res.By != "op-ann" || res.Decision != "accept-success" || res.Reason == "" {
			t.Fatalf("resolution record %+v", res)
		}
		// The same request again returns the first result; a new one is a conflict.
		if again := e.resolve(opToken, id, "dec-1", `{"decision":"accept-success","reason":"customer confirmed receipt","externalId":"sbx_manual"}`); again.status != 200 {
			t.Fatalf("repeat with the same key: %d %s", again.status, again.body)
		}
		if other := e.resolve(opToken, id, "dec-2", `{"decision":"abandon","reason":"changed my mind"}`); other.status != 409 || other.errorCode() != "not_needs_human" {
			t.Fatalf("decision on a decided intent: %d %s", other.status, other.body)
		}
		e.assertEffectsStay(id, 1, 0)
	})

	t.Run("abandon", func(t *testing.T) {
		id := needsHuman(t, e, "acct-h2", "h2")
		before := attemptsJSON(t, e.intent(id))
		if r := e.resolve(opToken, id, "", `{"decision":"abandon","reason":"duplicate of a manual send"}`); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		in := e.intent(id)
		if in.Status != core.StatusAbandoned || attemptsJSON(t, in) != before {
			t.Fatalf("got %s", in.Status)
		}
		e.assertEffectsStay(id, 1, 500*time.Millisecond)
	})

	t.Run("retry deliberately", func(t *testing.T) {
		id := needsHuman(t, e, "acct-h3", "h3")
		before := attemptsJSON(t, e.intent(id))
		// Neither keys nor lookup: a retry may duplicate the effect, so it is
		// refused unless the risk is accepted explicitly; left out is not a
		// deliberate choice (issue 50), and neither is false.
		for _, body := range []string{
			`{"decision":"retry","reason":"provider confirmed nothing was sent"}`,
			`{"decision":"retry","reason":"provider confirmed nothing was sent","acceptDuplicateRisk":false}`,
		} {
			if r := e.resolve(opToken, id, "risk-1", body); r.status != http.StatusConflict || r.errorCode() != "duplicate_risk_not_accepted" || !strings.Contains(string(r.body), "acceptDuplicateRisk") {
				t.Fatalf("retry without accepting the risk (%s): %d %s", body, r.status, r.body)
			}
		}
		e.assertEffectsStay(id, 1, 300*time.Millisecond)
		if in := e.intent(id); in.Status != core.StatusNeedsHuman || attemptsJSON(t, in) != before || len(in.Resolutions) != 0 {
			t.Fatalf("a refused retry changed the intent: %s", trail(in))
		}
		if r := e.resolve(opToken, id, "risk-1", `{"decision":"retry","reason":"provider confirmed nothing was sent","acceptDuplicateRisk":true}`); r.status != 200 || !strings.Contains(string(r.body), `"duplicateRiskAccepted":true`) {
			t.Fatalf("%d %s", r.status, r.body)
		}
		in := e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
		if !strings.HasPrefix(attemptsJSON(t, in), strings.TrimSuffix(before, "]")) || len(in.Attempts) != 2 {
			t.Fatalf("history was rewritten or not appended: %s", trail(in))
		}
		res := in.Resolutions[len(in.Resolutions)-1]
		if !res.DuplicateRiskAccepted || res.By != "op-ann" {
			t.Fatalf("a retry at a provider without keys must record the accepted duplicate risk: %+v", res)
		}
		// The human authorised a second side effect; that is the only way to get one.
		e.assertEffectsStay(id, 2, 300*time.Millisecond)
	})

	t.Run("retry at a keyed provider within retention needs no flag", func(t *testing.T) {
		// The first send commits and its answer is lost; the retry under the
		// key is rejected, which cannot prove the first did nothing: a human
		// decides. The key still covers a retry, so no risk needs accepting,
		// and the sandbox answers it from the key: still one effect.
		e.faults(`{"account":"acct-hk","capabilities":{"idempotencyKeys":true,"keyRetentionSeconds":86400,"lookup":false},"faults":[{"kind":"drop_after_commit"},{"kind":"reject"}]}`)
		id := e.mustSubmit("hk", intentBody("acct-hk", "chan-1", "pay invoice hk"))
		e.waitStatus(id, 15*time.Second, core.StatusNeedsHuman)
		if r := e.resolve(opToken, id, "", `{"decision":"retry","reason":"the key covers it"}`); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		in := e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
		if res := in.Resolutions[len(in.Resolutions)-1]; res.DuplicateRiskAccepted {
			t.Fatalf("a retry the key covers records no accepted risk: %+v", res)
		}
		e.assertEffectsStay(id, 1, 300*time.Millisecond)
	})

	t.Run("reconcile", func(t *testing.T) {
		id := needsHuman(t, e, "acct-h4", "h4")
		// The provider has since gained an outcome lookup.
		e.faults(`{"account":"acct-h4","capabilities":{"lookup":true}}`)
		r := e.resolve(opToken, id, "", `{"decision":"reconcile","reason":"lookup is available now"}`)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		in := e.waitStatus(id, 5*time.Second, core.StatusSucceeded)
		if in.ExternalID == "" || in.AttemptCount != 1 {
			t.Fatalf("reconcile: %s ext=%q", trail(in), in.ExternalID)
		}
		e.assertEffectsStay(id, 1, 300*time.Millisecond)
	})

	t.Run("orchestrator recommends but cannot decide; bots are refused", func(t *testing.T) {
		id := needsHuman(t, e, "acct-h5", "h5")
		if r := e.resolve(orchToken, id, "", `{"decision":"accept-success","reason":"looks delivered"}`); r.status != 403 {
			t.Fatalf("orchestrator resolution: %d %s", r.status, r.body)
		}
		r := e.do("POST", "/v1/admin/intents/"+id+"/recommendation", orchToken, nil, `{"decision":"accept-success","summary":"the channel shows the message"}`)
		if r.status != 200 {
			t.Fatalf("recommendation: %d %s", r.status, r.body)
		}
		if in := e.intent(id); in.Status != core.StatusNeedsHuman {
			t.Fatalf("a recommendation changed the status to %s", in.Status)
		}
		for _, path := range []string{"/v1/admin/intents?status=needs-human", "/v1/admin/intents/" + id} {
			if r := e.do("GET", path, botToken, nil, ""); r.status != 403 {
				t.Fatalf("bot on %s: %d", path, r.status)
			}
		}
		if r := e.resolve(botToken, id, "", `{"decision":"abandon","reason":"x"}`); r.status != 403 {
			t.Fatalf("bot resolution: %d", r.status)
		}
		// Operators see it in the list, with the recommendation and the evidence summary.
		var list struct {
			Items []struct {
				ID          string        `json:"id"`
				Recommended string        `json:"recommended"`
				LastAttempt *core.Attempt `json:"lastAttempt"`
			} `json:"items"`
			NextCursor string `json:"nextCursor"`
		}
		r = e.do("GET", "/v1/admin/intents?status=needs-human&limit=100", opToken, nil, "")
		r.json(t, &list)
		found := false
		for _, it := range list.Items {
			if it.ID == id {
				found = it.Recommended == "accept-success" && it.LastAttempt != nil
			}
		}
		if r.status != 200 || !found {
			t.Fatalf("needs-human list: %d %s", r.status, r.body)
		}
		e.assertEffectsStay(id, 1, 0)
	})
}

func TestAdminListPaginates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	for i := 0; i < 3; i++ {
		needsHuman(t, e, fmt.Sprintf("acct-p%d", i), fmt.Sprintf("p%d", i))
	}
	seen := map[string]bool{}
	cursor := ""
	for page := 0; page < 5; page++ {
		path := "/v1/admin/intents?status=needs-human&limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := e.do("GET", path, opToken, nil, "")
		if r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var list struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
			NextCursor string `json:"nextCursor"`
		}
		r.json(t, &list)
		for _, it := range list.Items {
			if seen[it.ID] {
				t.Fatalf("%s listed twice", it.ID)
			}
			seen[it.ID] = true
		}
		if cursor = list.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 3 {
		t.Fatalf("listed %d intents, want 3", len(seen))
	}
	if r := e.do("GET", "/v1/admin/intents?cursor=garbage", opToken, nil, ""); r.status != 400 {
		t.Fatalf("bad cursor: %d", r.status)
	}
}
