package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/notifier"
	"github.com/botharness/outbox/adapters/operatorevents"
	"github.com/botharness/outbox/adapters/webhooksig"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/core/notify"
	"github.com/botharness/outbox/localstack/lambdahost"
)

const operatorSecret = "whsec_b3BlcmF0b3ItZXZlbnRzLXRlc3Qtc2VjcmV0"

// opReceiver is the operators' subscriber: it verifies each POST's Standard
// Webhooks signature and counts deliveries per webhook-id.
type opReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	ids map[string]int
	got []operatorevents.Payload
	bad int
}

func newOpReceiver(t *testing.T) *opReceiver {
	r := &opReceiver{ids: map[string]int{}}
	v := &webhooksig.Verifier{Secrets: webhooksig.StaticSecrets{"operator/events": {operatorSecret}}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		h := map[string]string{}
		for k := range req.Header {
			h[k] = req.Header.Get(k)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		ver, err := v.Verify(req.Context(), "operator", "events", h, body)
		if err != nil {
			r.bad++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p operatorevents.Payload
		if err := json.Unmarshal(body, &p); err != nil || p.Data.EventID != ver.ID {
			r.bad++
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.ids[ver.ID]++
		r.got = append(r.got, p)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *opReceiver) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[id]
}

func (r *opReceiver) total() (posts, distinct, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.ids {
		posts += n
	}
	return posts, len(r.ids), r.bad
}

func (r *opReceiver) payload(id string) (operatorevents.Payload, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.got {
		if p.Data.EventID == id {
			return p, true
		}
	}
	return operatorevents.Payload{}, false
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recordTap reads the table's real stream with the notifier's filter and
// keeps the records, so the test can deliver them (and duplicates) by hand.
type recordTap struct {
	mu   sync.Mutex
	recs []events.DynamoDBEventRecord
}

func (e *env) tapNotifierStream(t *testing.T) *recordTap {
	tap := &recordTap{}
	p, err := lambdahost.NewStreamPoller(lambdahost.StreamPollerConfig{
		DynamoDB: e.clients.DynamoDB, Streams: e.clients.Streams, TableName: e.table,
		FilterPattern: notifier.StreamFilterPattern, StartingPosition: lambdahost.StartTrimHorizon, PollInterval: 50 * time.Millisecond,
		Handler: func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			tap.mu.Lock()
			tap.recs = append(tap.recs, ev.Records...)
			tap.mu.Unlock()
			return events.DynamoDBEventResponse{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return tap
}

// record returns the first tapped record whose event id is id.
func (tap *recordTap) record(t *testing.T, id string) events.DynamoDBEventRecord {
	t.Helper()
	var found events.DynamoDBEventRecord
	waitFor(t, 10*time.Second, "a stream record of "+id, func() bool {
		tap.mu.Lock()
		defer tap.mu.Unlock()
		for _, r := range tap.recs {
			if ev, ok, _ := notifier.EventOf(r); ok && ev.ID == id {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

type crashingSubscriber struct{}

func (crashingSubscriber) Publish(context.Context, core.OperatorEvent) error {
	panic("worker crashed between recording the claim and publishing")
}

// TestOperatorEventOncePerEpisode: duplicated stream records and a crash
// between the transition's claim and the publish still give exactly one
// signed POST per needs-human episode at the subscriber, with a stable id
// per episode and a new one for the next episode.
func TestOperatorEventOncePerEpisode(t *testing.T) {
	t.Parallel()
	rcv := newOpReceiver(t)
	e := newEnv(t, options{
		Config: wire.Config{
			OperatorWebhookURL: rcv.srv.URL, OperatorWebhookSecret: operatorSecret,
			ConsoleURL: "http://console.test/console/",
		},
		DisableNotifier: true,
	})
	tap := e.tapNotifierStream(t)
	deliver := func(recs ...events.DynamoDBEventRecord) events.DynamoDBEventResponse {
		t.Helper()
		resp, err := e.st.Notifier.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	e.faults(`{"account":"acct-oe","capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"},{"kind":"drop_after_commit"}]}`)
	id := e.mustSubmit("oe-1", intentBody("acct-oe", "chan-oe", "hello"))
	e.waitStatus(id, 10*time.Second, core.StatusNeedsHuman)
	ep1 := id + ".needs-human.1"
	rec := tap.record(t, ep1)

	// A worker claims the episode's event and crashes before publishing.
	crashed := &notifier.Handler{N: &notify.OperatorNotifier{
		Ledger: dynamo.NewOperatorEventLedger(e.clients.DynamoDB, e.table), Subscriber: crashingSubscriber{},
		Owner: "crashed-worker", Lease: time.Second,
	}}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the crashing subscriber did not run")
			}
		}()
		_, _ = crashed.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
	}()
	// The stream re-delivers the record (twice, in one batch) while the dead
	// worker's lease lives: nothing is published and the record is failed
	// back to the stream for a later retry.
	if resp := deliver(rec, rec); len(resp.BatchItemFailures) != 1 {
		t.Fatalf("a live claim must fail the record back for retry, got %+v", resp)
	}
	if n := rcv.count(ep1); n != 0 {
		t.Fatalf("published %d times while another worker held the claim", n)
	}
	// The lease runs out; the next sweeper tick publishes the orphaned claim.
	waitFor(t, 10*time.Second, "the crashed claim to be redriven", func() bool {
		e.sweep()
		return rcv.count(ep1) == 1
	})
	// Stream retries and duplicates after that publish nothing more.
	for i := 0; i < 3; i++ {
		if resp := deliver(rec, rec); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("duplicate of a published event failed: %+v", resp)
		}
	}
	e.sweep()
	if n := rcv.count(ep1); n != 1 {
		t.Fatalf("episode 1 published %d times, want 1", n)
	}
	p, ok := rcv.payload(ep1)
	if !ok || p.Type != core.OperatorEventNeedsHuman || p.Data.IntentID != id || p.Data.Bot != testBot ||
		p.Data.Provider != "sandbox" || p.Data.Account != "acct-oe" || p.Data.Reason == "" ||
		p.Data.ConsoleURL != "http://console.test/console/#/intents/"+id {
		t.Fatalf("payload: %+v", p)
	}

	// The operator retries (deliberately, accepting the duplicate risk); the
	// sandbox drops the response again: a second episode, a second event.
	r := e.do("POST", "/v1/admin/intents/"+id+"/resolution", opToken, map[string]string{"Idempotency-Key": "oe-retry-1"},
		`{"decision":"retry","reason":"customer asked again","acceptDuplicateRisk":true}`)
	if r.status != http.StatusOK {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	waitFor(t, 10*time.Second, "the second needs-human episode", func() bool {
		in := e.intent(id)
		return in.Status == core.StatusNeedsHuman && core.NeedsHumanEpisode(in) == 2
	})
	ep2 := id + ".needs-human.2"
	rec2 := tap.record(t, ep2)
	for i := 0; i < 3; i++ {
		if resp := deliver(rec2, rec, rec2); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("deliver: %+v", resp)
		}
	}
	posts, distinct, bad := rcv.total()
	if rcv.count(ep2) != 1 || posts != 2 || distinct != 2 || bad != 0 {
		t.Fatalf("subscriber saw %d posts, %d ids, %d bad; episode 2: %d", posts, distinct, bad, rcv.count(ep2))
	}
	if got := e.effectsFor(id); got != 2 {
		t.Fatalf("sandbox effects = %d, want 2 (the original and the operator's retry)", got)
	}
}

// TestOperatorEventFromRunningNotifier: with the notifier's stream poller
// running (as under make run), an intent that ends failed produces exactly
// one signed event.
func TestOperatorEventFromRunningNotifier(t *testing.T) {
	t.Parallel()
	rcv := newOpReceiver(t)
	e := newEnv(t, options{Config: wire.Config{OperatorWebhookURL: rcv.srv.URL, OperatorWebhookSecret: operatorSecret}})
	e.faults(`{"account":"acct-rej","faults":[{"kind":"reject"}]}`)
	id := e.mustSubmit("oe-rej", intentBody("acct-rej", "chan-1", "nope"))
	e.waitStatus(id, 10*time.Second, core.StatusFailed)
	waitFor(t, 10*time.Second, "the failed event", func() bool { return rcv.count(id+".failed") == 1 })
	time.Sleep(500 * time.Millisecond) // give a duplicate the chance to show up
	if posts, distinct, bad := rcv.total(); posts != 1 || distinct != 1 || bad != 0 {
		t.Fatalf("posts=%d distinct=%d bad=%d, want exactly one", posts, distinct, bad)
	}
}

// TestBreakerEventsReachOperatorSubscribers: a provider's failures open the
// account's circuit breaker and recovery closes it (issue 15); each of those
// operator events reaches the signed-webhook subscriber exactly once.
func TestBreakerEventsReachOperatorSubscribers(t *testing.T) {
	t.Parallel()
	rcv := newOpReceiver(t)
	acct := randName("acct-brk-")
	cfg := fmt.Sprintf(`"pacing":{"accounts":{"sandbox/%s":{"rate":5,"per":"1s"}}}`, acct)
	policy := core.AttemptPolicy{
		Backoff: core.BackoffPolicy{Base: 300 * time.Millisecond, Cap: 600 * time.Millisecond, MaxAttempts: 50, MaxAge: time.Hour},
		Breaker: gate.BreakerPolicy{Failures: 2, Cooldown: 500 * time.Millisecond, MaxCooldown: time.Second, ProbeLease: time.Second},
	}
	e := newEnv(t, options{Config: wire.Config{ProviderConfig: cfg, Policy: policy, OperatorWebhookURL: rcv.srv.URL, OperatorWebhookSecret: operatorSecret}})
	// Three 503s in a row (the open after two, a failed probe), whenever
	// they come: a timed outage could end before a loaded machine's first
	// send, and then no breaker would open.
	e.faults(fmt.Sprintf(`{"account":%q,"faults":[{"kind":"unavailable"},{"kind":"unavailable"},{"kind":"unavailable"}]}`, acct))
	ids := submitMany(t, []*env{e}, acct, 3)
	// Generous: the three need several queue round trips (whole-second
	// delays, the breaker's cooldowns, a probe each), which a loaded
	// make test stretches; one of them was still waiting at 30 s in a
	// run of 2026-12-03. The assertions are about the events, not speed.
	for _, id := range ids {
		e.waitStatus(id, 60*time.Second, core.StatusSucceeded)
	}
	kinds := func() map[string]int {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		out := map[string]int{}
		for _, p := range rcv.got {
			if p.Data.Account == acct {
				out[p.Type]++
			}
		}
		return out
	}
	waitFor(t, 10*time.Second, "breaker opened and closed events", func() bool {
		k := kinds()
		return k[core.EventBreakerOpened] >= 1 && k[core.EventBreakerClosed] >= 1
	})
	e.sweep()
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for id, n := range rcv.ids {
		if n != 1 {
			t.Errorf("event %s delivered %d times", id, n)
		}
	}
	if rcv.bad != 0 {
		t.Errorf("%d badly signed posts", rcv.bad)
	}
}

// TestUnsubscribedBreakerEventIsRedrivenBySweeper: with no subscriber
// configured, a breaker move is still an operator event (a warning log
// line and the breaker_opened metric the stack's alarm watches). The gate's
// transaction stores it unpublished; when the worker that moved the gate
// dies before publishing it, the sweeper publishes it (and its record then
// expires) instead of leaving it unpublished, unlogged and uncounted for
// ever.
func TestUnsubscribedBreakerEventIsRedrivenBySweeper(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	g := e.st.App.Gate
	if g == nil {
		t.Fatal("the stack has no account gate")
	}
	ctx := context.Background()
	now := time.Now().UTC()
	const acct = "acct-unsubscribed"
	ev := gate.BreakerEvent(core.EventBreakerOpened, "sandbox", acct, now, "the worker that opened it died before publishing")
	if ok, err := g.Store.Open(ctx, gate.GateKey("sandbox", acct), now.Add(time.Minute), false, ev); err != nil || !ok {
		t.Fatalf("open: %v %v", ok, err)
	}
	ledger := dynamo.NewOperatorEventLedger(e.clients.DynamoDB, e.table)
	unpublished := func() []string {
		evs, err := ledger.Unpublished(ctx, time.Now().UTC().Add(time.Second), 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range evs {
			ids = append(ids, x.ID)
		}
		return ids
	}
	if ids := unpublished(); len(ids) != 1 || ids[0] != ev.ID {
		t.Fatalf("before the sweep: unpublished %v, want [%s]", ids, ev.ID)
	}
	e.sweep()
	if ids := unpublished(); len(ids) != 0 {
		t.Fatalf("after the sweep: still unpublished %v", ids)
	}
}
