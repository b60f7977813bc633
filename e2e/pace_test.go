package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/core/gate/pacing"
	"github.com/botharness/outbox/sandbox"
)

// requests reads the sandbox's request log for an account over HTTP.
func (e *env) requests(account string) []sandbox.RequestRecord {
	e.t.Helper()
	var rr sandbox.RequestsResponse
	e.sandboxGet("/_sandbox/requests?account="+account, &rr)
	if rr.Count != len(rr.Requests) {
		e.t.Fatalf("requests: count %d, %d listed", rr.Count, len(rr.Requests))
	}
	return rr.Requests
}

// submitMany submits n intents to account, spread over the given workers' APIs.
func submitMany(t *testing.T, workers []*env, account string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w := workers[i%len(workers)]
			r := w.submit(botToken, fmt.Sprintf("%s-%d", account, i), intentBody(account, fmt.Sprintf("chat-%d", i%3), "hello"))
			if r.status != http.StatusCreated {
				t.Errorf("submit %d: %d %s", i, r.status, r.body)
				return
			}
			var in core.Intent
			r.json(t, &in)
			ids[i] = in.ID
		}(i)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return ids
}

// One 429 with Retry-After 5 s pauses the account for every worker: the
// sandbox receives no request for that account from any of them for 5 s.
func TestProviderRateLimitPausesTheAccountForEveryWorker(t *testing.T) {
	t.Parallel()
	acct := randName("acct-429-")
	// Paced at 1/s: a send already past its last check when the 429 arrives
	// (within one DynamoDB write of it) cannot be called back; the next one
	// is a second away.
	cfg := fmt.Sprintf(`"pacing":{"accounts":{"sandbox/%s":{"rate":1,"per":"1s"}}}`, acct)
	e := newEnv(t, options{Config: wire.Config{ProviderConfig: cfg}})
	workers := []*env{e, e.join(options{Config: wire.Config{ProviderConfig: cfg}}), e.join(options{Config: wire.Config{ProviderConfig: cfg}})}
	e.faults(fmt.Sprintf(`{"account":%q,"faults":[{"kind":"rate_limit","retryAfterSeconds":5}]}`, acct))

	ids := submitMany(t, workers, acct, 4)
	for _, id := range ids {
		e.waitStatus(id, 30*time.Second, core.StatusSucceeded)
	}
	reqs := e.requests(acct)
	var pausedAt time.Time
	for _, r := range reqs {
		if r.Status == http.StatusTooManyRequests {
			if !pausedAt.IsZero() {
				t.Fatalf("a second 429: the account was not paused (%+v)", reqs)
			}
			pausedAt = r.At
		}
	}
	if pausedAt.IsZero() {
		t.Fatalf("the injected 429 was never hit: %+v", reqs)
	}
	for _, r := range reqs {
		if r.At.After(pausedAt) && r.At.Before(pausedAt.Add(5*time.Second)) {
			t.Fatalf("request %s at +%v, inside the 5 s pause after the 429", r.IntentID, r.At.Sub(pausedAt))
		}
	}
	for _, id := range ids {
		if n := e.effectsFor(id); n != 1 {
			t.Fatalf("intent %s: %d effects, want 1", id, n)
		}
	}
}

// An outage (503) opens the breaker after N consecutive transient
// failures; during the outage the sandbox sees at most N requests plus the
// half-open probes; opening and closing each publish one operator event
// (shown in the admin API); every intent is delivered once after recovery.
// The outage is ended by the test once the breaker has re-opened on two
// failed probes (cooldowns 1 s growing to 2 s), so the property is shown
// in seconds and on a slow machine the test waits longer instead of
// running out of outage.
func TestOutageOpensTheBreakerAndEveryIntentIsDeliveredOnceAfterRecovery(t *testing.T) {
	t.Parallel()
	acct := randName("acct-outage-")
	policy := gate.BreakerPolicy{Failures: 3, Cooldown: time.Second, MaxCooldown: 2 * time.Second, ProbeLease: time.Second}
	// The bound "N + probes" holds when the open lands before the next
	// slot: a send whose gate read came before the open's write is not
	// recalled. At 5/s (200 ms slots) DynamoDB Local's open transaction
	// (the gate and its copies) took longer than a slot in two runs of
	// 2026-12-02 and a 4th failure went out 108-155 ms after the 3rd; at
	// 2/s a slot is 500 ms (docs/decisions.md, pacing).
	const rate = 2
	cfg := fmt.Sprintf(`"pacing":{"accounts":{"sandbox/%s":{"rate":%d,"per":"1s"}}}`, acct, rate)
	attempts := core.AttemptPolicy{Breaker: policy, Backoff: core.BackoffPolicy{Base: 500 * time.Millisecond, Cap: time.Second, MaxAttempts: 50, MaxAge: time.Hour}}
	e := newEnv(t, options{Config: wire.Config{ProviderConfig: cfg, Policy: attempts}})
	workers := []*env{e, e.join(options{Config: wire.Config{ProviderConfig: cfg, Policy: attempts}})}
	outageStart := time.Now()
	// An outage longer than the test: the test ends it.
	e.faults(fmt.Sprintf(`{"account":%q,"outage":{"durationMs":%d}}`, acct, time.Hour.Milliseconds()))
	ids := submitMany(t, workers, acct, 10)
	// The N failures that open the breaker, then two failed probes (each
	// re-opens it): the outage has been observed through two cooldowns.
	waitFor(t, 60*time.Second, "N failures and two failed probes", func() bool {
		return len(e.requests(acct)) >= policy.Failures+2
	})
	e.faults(fmt.Sprintf(`{"account":%q,"outage":{"durationMs":0}}`, acct))
	outageEnd := time.Now()
	// Recovery waits for the first probe after the outage: at most the
	// longest cooldown (plus a probe lease for a probe that was cut short).
	recovery := policy.MaxCooldown + policy.ProbeLease + 20*time.Second
	for _, id := range ids {
		e.waitStatus(id, recovery, core.StatusSucceeded)
	}
	// Every 503 was answered during the outage; the breaker cannot open
	// before the outage starts, so the k-th probe comes no earlier than the
	// sum of the first k cooldowns after it.
	var during []sandbox.RequestRecord
	for _, r := range e.requests(acct) {
		if r.Status == http.StatusServiceUnavailable {
			during = append(during, r)
		}
	}
	maxProbes := probesWithin(policy, outageEnd.Sub(outageStart))
	if len(during) < policy.Failures+2 || len(during) > policy.Failures+maxProbes {
		t.Fatalf("%d requests during the %v outage, want between N+2=%d and N+probes=%d: %+v",
			len(during), outageEnd.Sub(outageStart), policy.Failures+2, policy.Failures+maxProbes, during)
	}
	for _, id := range ids {
		if got := e.effectsFor(id); got != 1 {
			t.Fatalf("intent %s: %d effects, want 1", id, got)
		}
	}
	// One operator event per open and per close, visible to operators.
	r := e.do("GET", "/v1/admin/capabilities/sandbox/"+acct, opToken, nil, "")
	if r.status != http.StatusOK {
		t.Fatalf("capabilities: %d %s", r.status, r.body)
	}
	var doc struct {
		Pacing pacing.AccountPacing `json:"pacing"`
	}
	r.json(t, &doc)
	var opened, closed int
	for _, ev := range doc.Pacing.Events {
		switch ev.Kind {
		case core.EventBreakerOpened:
			opened++
		case core.EventBreakerClosed:
			closed++
		}
	}
	if opened != 1 || closed != 1 || doc.Pacing.Breaker.Open || doc.Pacing.Effective == nil || doc.Pacing.Effective.Rate != rate {
		t.Fatalf("pacing %+v: %d opened, %d closed events, want 1 and 1", doc.Pacing, opened, closed)
	}
}

// probesWithin counts the half-open probes a breaker opened at the start
// of a span can make inside it: one after each cooldown.
func probesWithin(b gate.BreakerPolicy, span time.Duration) int {
	n := 0
	for at := b.CooldownAfter(1); at < span; at += b.CooldownAfter(n + 1) {
		n++
	}
	return n
}

// Operators adjust an account's pace through the capabilities endpoint,
// with a reason; bad input is refused and changes nothing.
func TestOperatorAdjustsPaceWithAReason(t *testing.T) {
	acct := randName("acct-adm-")
	e := newEnv(t, options{Config: wire.Config{ProviderConfig: fmt.Sprintf(`"pacing":{"accounts":{"sandbox/%s":{"rate":20,"per":"1s","burst":2}}}`, acct)}})
	path := "/v1/admin/capabilities/sandbox/" + acct + "/pace"
	for _, c := range []struct {
		token, body string
		status      int
		code        string
	}{
		{botToken, `{"pace":{"rate":1,"per":"1s"},"reason":"x"}`, http.StatusForbidden, "forbidden"},
		{opToken, `{"pace":{"rate":1,"per":"1s"}}`, http.StatusBadRequest, core.CodeInvalidField},
		{opToken, `{"pace":{"rate":0,"per":"1s"},"reason":"x"}`, http.StatusBadRequest, core.CodeInvalidField},
		{opToken, `{"pace":{"rate":1,"per":"soon"},"reason":"x"}`, http.StatusBadRequest, core.CodeMalformedJSON},
	} {
		r := e.do("PUT", path, c.token, nil, c.body)
		if r.status != c.status || r.errorCode() != c.code {
			t.Fatalf("%s: %d %s, want %d %s", c.body, r.status, r.body, c.status, c.code)
		}
	}
	var ap pacing.AccountPacing
	r := e.do("GET", path, opToken, nil, "")
	r.json(t, &ap)
	if ap.Override != nil || ap.Effective == nil || ap.Effective.Rate != 20 || ap.Declared.Burst != 2 {
		t.Fatalf("refused changes changed something: %+v", ap)
	}
	r = e.do("PUT", path, opToken, nil, `{"pace":{"rate":2,"per":"1s"},"reason":"provider asked us to slow down"}`)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/admin/capabilities/sandbox/"+acct, opToken, nil, "")
	var doc struct {
		Provider string               `json:"provider"`
		Pacing   pacing.AccountPacing `json:"pacing"`
	}
	r.json(t, &doc)
	if doc.Provider != "sandbox" || doc.Pacing.Effective.Rate != 2 || doc.Pacing.Override.Reason != "provider asked us to slow down" || doc.Pacing.Override.By != "op-ann" {
		t.Fatalf("GET capabilities: %s", r.body)
	}
	// The override paces real sends: 4 intents at 2/s arrive at the sandbox
	// at least ~500 ms apart (each waits for its slot right before the send).
	ids := submitMany(t, []*env{e}, acct, 4)
	for _, id := range ids {
		e.waitStatus(id, 30*time.Second, core.StatusSucceeded)
	}
	reqs := e.requests(acct)
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	// The documented bound (gate.Pace): at most Rate + Burst sends start in
	// any window of Per at the provider — 3 in any second at 2/s (unpaced,
	// all 4 would go out within a few milliseconds).
	var at []time.Time
	for _, r := range reqs {
		at = append(at, r.At)
	}
	if n := gate.MostInWindow(at, time.Second); n > 2+1 {
		t.Fatalf("%d sends in one second at 2/s (burst 1): %+v", n, reqs)
	}
}

// A per-target pace (Slack: 1/s per channel) holds for each target of one
// account across workers, and targets are paced independently: two channels
// of one account each get 1/s, not 1/s between them.
func TestTargetsOfOneAccountArePacedIndependentlyAcrossWorkers(t *testing.T) {
	t.Parallel()
	acct := randName("acct-tgt-")
	cfg := fmt.Sprintf(`"pacing":{"targets":{"sandbox/%s":{"rate":1,"per":"1s"}}}`, acct)
	e := newEnv(t, options{Config: wire.Config{ProviderConfig: cfg}})
	workers := []*env{e, e.join(options{Config: wire.Config{ProviderConfig: cfg}})}
	var ap pacing.AccountPacing
	e.do("GET", "/v1/admin/capabilities/sandbox/"+acct+"/pace", opToken, nil, "").json(t, &ap)
	if ap.TargetPace == nil || ap.TargetPace.Rate != 1 || ap.TargetPace.Per != time.Second || ap.Effective != nil {
		t.Fatalf("admin API shows %+v, want a per-target pace of 1/s and no account pace", ap)
	}
	// Independence is a timing observation (two channels' sends close
	// together), which a loaded machine can hide in one round: both workers
	// busy waiting for one channel's slots serialise the other. So a round
	// that shows no pair close together is repeated (up to 3 rounds, new
	// channels each time); one shared pace would keep them apart in every
	// round. The per-target bounds are checked in every round.
	for round := 0; ; round++ {
		if pacedTargetsRound(t, e, workers, acct, round) {
			return
		}
		if round == 2 {
			t.Fatalf("the two channels were paced together in 3 rounds")
		}
	}
}

// pacedTargetsRound submits 3 intents to each of two channels, checks each
// channel's pace at the sandbox, and reports whether some sends to the two
// went out close together (independent paces).
func pacedTargetsRound(t *testing.T, e *env, workers []*env, acct string, round int) bool {
	t.Helper()
	const perTarget = 3
	chans := [2]string{fmt.Sprintf("chan-%d-0", round), fmt.Sprintf("chan-%d-1", round)}
	var ids []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 2*perTarget; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := workers[i%2].submit(botToken, fmt.Sprintf("%s-%d-%d", acct, round, i), intentBody(acct, chans[i%2], "hello"))
			if r.status != http.StatusCreated {
				t.Errorf("submit %d: %d %s", i, r.status, r.body)
				return
			}
			var in core.Intent
			r.json(t, &in)
			mu.Lock()
			ids = append(ids, in.ID)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, id := range ids {
		e.waitStatus(id, 30*time.Second, core.StatusSucceeded)
	}
	for _, id := range ids {
		if n := e.effectsFor(id); n != 1 {
			t.Fatalf("intent %s: %d effects, want 1", id, n)
		}
	}
	byTarget := map[string][]time.Time{}
	var all []sandbox.RequestRecord
	for _, r := range e.requests(acct) {
		if r.Target != chans[0] && r.Target != chans[1] {
			continue // an earlier round's
		}
		byTarget[r.Target] = append(byTarget[r.Target], r.At)
		all = append(all, r)
	}
	if len(byTarget) != 2 || len(all) != 2*perTarget {
		t.Fatalf("requests %+v", all)
	}
	// One target never exceeds its pace: each send waits for its target's
	// slot (1 s apart) right before the send; one that reaches it more than
	// half an interval late takes a fresh slot, so consecutive sends to one
	// target are at least ~500 ms apart (less the gate's state read before
	// the send, up to ~150 ms on a loaded 2-core machine: 425 ms was seen).
	// Unpaced targets would send within a few ms of each other.
	for target, at := range byTarget {
		// The documented bound (gate.Pace): at most Rate + Burst sends in any
		// window of Per, 2 in any second at 1/s.
		if n := gate.MostInWindow(at, time.Second); n > 1+1 {
			t.Fatalf("target %s: %d sends in one second at 1/s: %v", target, n, at)
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < 350*time.Millisecond {
				t.Fatalf("target %s: sends %d and %d only %v apart at 1/s: %v", target, i-1, i, gap, at)
			}
		}
		if at[len(at)-1].Sub(at[0]) < time.Duration(len(at)-1)*time.Second-600*time.Millisecond {
			t.Fatalf("target %s: %d sends within %v at 1/s: %v", target, len(at), at[len(at)-1].Sub(at[0]), at)
		}
	}
	// Independent: some send to one channel goes out within half a second of
	// a send to the other (one shared 1/s pace would keep them >= ~500 ms apart).
	for _, a := range byTarget[chans[0]] {
		for _, b := range byTarget[chans[1]] {
			if d := a.Sub(b); d < 400*time.Millisecond && d > -400*time.Millisecond {
				return true
			}
		}
	}
	t.Logf("round %d: no sends of the two channels within 400 ms: %v", round, byTarget)
	return false
}

// An unpaced account's attempts read the gate's state from replicas (one
// per intent shard, issue 13). Once the breaker is open, no attempt sends on
// the strength of a replica: during the rest of the outage the sandbox sees
// only the half-open probes, every intent submitted while it is open is
// held, and every intent is delivered once after recovery.
func TestUnpacedAccountSendsNothingButProbesWhileTheBreakerIsOpen(t *testing.T) {
	t.Parallel()
	acct := randName("acct-unpaced-")
	policy := gate.BreakerPolicy{Failures: 2, Cooldown: 2 * time.Second, MaxCooldown: 4 * time.Second, ProbeLease: time.Second}
	attempts := core.AttemptPolicy{Breaker: policy, Backoff: core.BackoffPolicy{Base: 300 * time.Millisecond, Cap: 600 * time.Millisecond, MaxAttempts: 60, MaxAge: time.Hour}}
	e := newEnv(t, options{Config: wire.Config{Policy: attempts}})
	workers := []*env{e, e.join(options{Config: wire.Config{Policy: attempts}})}
	// An outage longer than the test: the test ends it.
	e.faults(fmt.Sprintf(`{"account":%q,"outage":{"durationMs":%d}}`, acct, time.Hour.Milliseconds()))

	var ids []string
	for i := 0; i < policy.Failures; i++ {
		r := workers[i%2].submit(botToken, fmt.Sprintf("%s-f%d", acct, i), intentBody(acct, "chat-0", "hello"))
		if r.status != http.StatusCreated {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		var in core.Intent
		r.json(t, &in)
		ids = append(ids, in.ID)
	}
	var open pacing.AccountPacing
	waitFor(t, 10*time.Second, "the breaker opens", func() bool {
		r := e.do("GET", "/v1/admin/capabilities/sandbox/"+acct+"/pace", opToken, nil, "")
		if r.status != http.StatusOK {
			return false
		}
		r.json(t, &open)
		return open.Breaker.Open && open.Breaker.OpenedAt != nil
	})
	openSeen := time.Now()
	ids = append(ids, submitMany(t, workers, acct, 12)...)
	// The breaker stays open through its first two cooldowns (a probe
	// after each, each failing and re-opening it), as in the 10 s outage
	// this test once used: the intents submitted meanwhile had the whole
	// open spell to send in. A slow machine waits longer, it does not skip.
	spell := policy.CooldownAfter(1) + policy.CooldownAfter(2) + 500*time.Millisecond
	waitFor(t, 60*time.Second, "the open spell and a failed probe", func() bool {
		probed := false
		for _, r := range e.requests(acct) {
			if r.At.After(openSeen) {
				probed = true
			}
		}
		return probed && time.Since(*open.Breaker.OpenedAt) >= spell
	})
	e.faults(fmt.Sprintf(`{"account":%q,"outage":{"durationMs":0}}`, acct))
	outageEnd := time.Now()
	for _, id := range ids {
		e.waitStatus(id, policy.MaxCooldown+policy.ProbeLease+20*time.Second, core.StatusSucceeded)
	}
	var after []sandbox.RequestRecord
	for _, r := range e.requests(acct) {
		if r.At.After(openSeen) && r.Status == http.StatusServiceUnavailable {
			after = append(after, r)
		}
	}
	maxProbes := probesWithin(policy, outageEnd.Sub(*open.Breaker.OpenedAt))
	if len(after) > maxProbes {
		t.Fatalf("%d requests while the breaker was open (from %v after the open to the outage's end), want at most the %d probes: %+v",
			len(after), openSeen.Sub(*open.Breaker.OpenedAt), maxProbes, after)
	}
	for _, id := range ids {
		if n := e.effectsFor(id); n != 1 {
			t.Fatalf("intent %s: %d effects, want 1", id, n)
		}
	}
}
