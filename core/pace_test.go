package core

import (
	"context"
	"errors"
	"fmt"
	"github.com/botharness/outbox/core/gate"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func TestClassifyForGate(t *testing.T) {
	for _, c := range []struct {
		err  error
		want gate.GateResult
	}{
		{nil, gate.GateSuccess},
		{&RetryableError{Class: ClassRateLimited, RetryAfter: time.Second, Err: errors.New("429")}, gate.GateRateLimited},
		{&RetryableError{Class: ClassTransient, Err: errors.New("503")}, gate.GateTransient},
		{&UnknownOutcomeError{Err: errors.New("timeout")}, gate.GateOther},
		{&PermanentError{Class: ClassRejectedInput, Err: errors.New("400")}, gate.GateOther},
	} {
		if got := classifyForGate(c.err); got != c.want {
			t.Fatalf("classifyForGate(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// gateRig is a dispatcher rig with a gate over MemoryGates and a clock the
// gate's sleeps advance.
func gateRig(pace *gate.Pace, script ...error) (*rig, *gate.MemoryGates, *fakeEvents) {
	r := newRig(Capabilities{}, script...)
	gates := gate.NewMemoryGates()
	ev := &fakeEvents{}
	r.d.Gate = &gate.Gate{
		Store: gates, Clock: r.clock, DefaultRetryAfter: DefaultAttemptPolicy.DefaultRetryAfter, Breaker: gate.BreakerPolicy{Failures: 2, Cooldown: 10 * time.Second, MaxCooldown: time.Minute, ProbeLease: 5 * time.Second},
		Notify: ev.Publish,
		Sleep:  func(_ context.Context, d time.Duration) error { r.clock.Advance(d); return nil },
		Declared: func(provider, account string) (gate.Pace, bool) {
			if pace == nil {
				return gate.Pace{}, false
			}
			return *pace, true
		},
	}
	return r, gates, ev
}

type fakeEvents struct{ got []gate.Event }

func (f *fakeEvents) Publish(_ context.Context, ev gate.Event) error {
	f.got = append(f.got, ev)
	return nil
}

func (r *rig) submitKey(t *testing.T, key string) *Intent {
	t.Helper()
	res, err := r.in.Submit(context.Background(), "bot1", key, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return res.Intent
}

func TestOverPaceAttemptIsDeferredWithoutSendOrAttempt(t *testing.T) {
	r, _, _ := gateRig(&gate.Pace{Rate: 1, Per: 10 * time.Second, Burst: 1})
	a, b := r.submitKey(t, "k1"), r.submitKey(t, "k2")
	ctx := context.Background()
	if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	if err := attemptID(ctx, r.d, b.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	if r.prov.sends != 1 {
		t.Fatalf("sends %d, want 1 (the second is over pace)", r.prov.sends)
	}
	got := r.get(t, b.ID)
	if got.Status != StatusPending || got.AttemptCount != 0 || len(got.Attempts) != 0 {
		t.Fatalf("deferred intent changed: %s attempts %d", got.Status, got.AttemptCount)
	}
	msgs := r.queue.take()
	if len(msgs) != 1 || msgs[0].msg.Op != OpPaced || msgs[0].msg.SlotAt == nil || !msgs[0].msg.SlotAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("queued %+v", msgs)
	}
	// It comes back early (whole-second queue delays) and waits for its slot.
	if msgs[0].delay >= 10*time.Second || msgs[0].delay < 8*time.Second {
		t.Fatalf("delay %v", msgs[0].delay)
	}
	r.clock.Advance(msgs[0].delay)
	if err := r.d.HandleRetry(ctx, msgs[0].msg); err != nil {
		t.Fatal(err)
	}
	if r.prov.sends != 2 || !r.clock.Now().Equal(t0.Add(10*time.Second)) {
		t.Fatalf("sends %d at %v, want 2 at its slot", r.prov.sends, r.clock.Now())
	}
	if got := r.get(t, b.ID); got.Status != StatusSucceeded || got.AttemptCount != 1 {
		t.Fatalf("b %s attempts %d", got.Status, got.AttemptCount)
	}
}

func TestPacedSendsAreSpacedByTheInterval(t *testing.T) {
	r, _, _ := gateRig(&gate.Pace{Rate: 5, Per: time.Second, Burst: 1})
	var times []time.Time
	r.prov.script = nil
	ctx := context.Background()
	for i := 0; i < 12; i++ {
		in := r.submitKey(t, fmt.Sprintf("k%d", i))
		if err := attemptID(ctx, r.d, in.ID, "stream"); err != nil {
			t.Fatal(err)
		}
	}
	_ = times
	r.drain(t)
	if r.prov.sends != 12 {
		t.Fatalf("sends %d", r.prov.sends)
	}
	// 12 sends at 5/s from t0: the last at t0 + 11*200ms, never earlier.
	if got := r.clock.Now().Sub(t0); got < 2200*time.Millisecond-time.Millisecond {
		t.Fatalf("12 sends at 5/s took %v", got)
	}
}

func TestDeferralNeverSendsPastTheDeadline(t *testing.T) {
	r, _, _ := gateRig(&gate.Pace{Rate: 1, Per: time.Minute, Burst: 1})
	ctx := context.Background()
	a := r.submitKey(t, "k1")
	dl := `{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","payload":{"text":"hi"},"deadline":"2026-03-02T09:00:10Z","grant":{"id":"g1","version":1}}`
	res, err := r.in.Submit(ctx, "bot1", "k2", []byte(dl))
	if err != nil {
		t.Fatal(err)
	}
	if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	if err := attemptID(ctx, r.d, res.Intent.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	msgs := r.queue.take()
	if len(msgs) != 1 || msgs[0].delay != 10*time.Second || msgs[0].msg.SlotAt != nil {
		t.Fatalf("want a deferral to the deadline, got %+v", msgs)
	}
	r.clock.Advance(msgs[0].delay)
	if err := r.d.HandleRetry(ctx, msgs[0].msg); err != nil {
		t.Fatal(err)
	}
	if got := r.get(t, res.Intent.ID); got.Status != StatusExpired || r.prov.sends != 1 {
		t.Fatalf("status %s sends %d", got.Status, r.prov.sends)
	}
}

// A 429 pauses the account for every intent: for its Retry-After, or for
// the gate's default (1 s) when it names none.
func TestRateLimitPausesTheAccountForEveryIntent(t *testing.T) {
	for _, c := range []struct {
		name       string
		retryAfter time.Duration
		want       time.Duration
	}{
		{"Retry-After 5s", 5 * time.Second, 5 * time.Second},
		{"no Retry-After: the default", 0, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, gates, _ := gateRig(nil, &RetryableError{Class: ClassRateLimited, RetryAfter: c.retryAfter, Err: errors.New("429")})
			ctx := context.Background()
			a, b := r.submitKey(t, "k1"), r.submitKey(t, "k2")
			if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
				t.Fatal(err)
			}
			st, _ := gates.State(ctx, gate.GateKey("fake", "a1"))
			if st.PausedUntil == nil || !st.PausedUntil.Equal(t0.Add(c.want)) {
				t.Fatalf("pause %v, want +%v", st.PausedUntil, c.want)
			}
			if err := attemptID(ctx, r.d, b.ID, "stream"); err != nil {
				t.Fatal(err)
			}
			if r.prov.sends != 1 {
				t.Fatalf("a second intent was sent during the pause (%d sends)", r.prov.sends)
			}
			r.drain(t)
			if r.prov.sends != 3 || r.clock.Now().Before(t0.Add(c.want)) {
				t.Fatalf("sends %d at %v", r.prov.sends, r.clock.Now())
			}
		})
	}
}

// attemptEach submits n intents (keys k0..k<n-1>) and attempts each once,
// in order, as its stream record would.
func (r *rig) attemptEach(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, r.submitKey(t, fmt.Sprintf("k%d", i)).ID)
	}
	for _, id := range ids {
		if err := attemptID(context.Background(), r.d, id, "stream"); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// transientFailure is a provider's 503: retryable, counted by the breaker.
func transientFailure() error { return &RetryableError{Class: ClassTransient, Err: errors.New("503")} }

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	unavailable := transientFailure
	r, gates, ev := gateRig(nil, unavailable(), unavailable(), unavailable())
	r.d.Policy.Backoff.MaxAttempts = 10
	ctx := context.Background()
	ids := r.attemptEach(t, 4)
	if r.prov.sends != 2 {
		t.Fatalf("sends %d, want 2 (the breaker opens after 2)", r.prov.sends)
	}
	if len(ev.got) != 1 || ev.got[0].Kind != EventBreakerOpened {
		t.Fatalf("events %+v", ev.got)
	}
	st, _ := gates.State(ctx, gate.GateKey("fake", "a1"))
	if !st.Breaker.Open || !st.Breaker.OpenUntil.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("breaker %+v", st.Breaker)
	}
	// At the cooldown's end one probe goes; it fails (3rd scripted 503): open again, longer.
	r.clock.Advance(10 * time.Second)
	for _, id := range ids[2:] {
		if err := attemptID(ctx, r.d, id, "sweeper"); err != nil {
			t.Fatal(err)
		}
	}
	if r.prov.sends != 3 {
		t.Fatalf("sends %d after the half-open probe, want 3 (one probe only)", r.prov.sends)
	}
	st, _ = gates.State(ctx, gate.GateKey("fake", "a1"))
	if !st.Breaker.Open || !st.Breaker.OpenUntil.Equal(r.clock.Now().Add(20*time.Second)) || len(ev.got) != 1 {
		t.Fatalf("after a failed probe: %+v, events %d", st.Breaker, len(ev.got))
	}
	r.queue.take()
	r.clock.Advance(20 * time.Second)
	if err := attemptID(ctx, r.d, ids[3], "sweeper"); err != nil {
		t.Fatal(err)
	}
	st, _ = gates.State(ctx, gate.GateKey("fake", "a1"))
	if st.Breaker.Open || st.Breaker.Failures != 0 || len(ev.got) != 2 || ev.got[1].Kind != EventBreakerClosed {
		t.Fatalf("after a good probe: %+v, events %+v", st.Breaker, ev.got)
	}
	evs, _ := gates.Events(ctx, gate.GateKey("fake", "a1"), 10)
	if len(evs) != 2 || evs[0].Kind != EventBreakerClosed {
		t.Fatalf("stored events %+v", evs)
	}
}

func TestUncertainIntentWithoutKeyCoverNeverProbesNorWaits(t *testing.T) {
	r, gates, _ := gateRig(nil)
	ctx := context.Background()
	in := r.submitKey(t, "k1")
	key := gate.GateKey("fake", "a1")
	_, _ = gates.Open(ctx, key, t0.Add(-time.Second), false, gate.Event{At: t0})
	// Make the intent uncertain: an earlier attempt ended in an unknown outcome.
	_, err := r.store.Update(ctx, in.ID, func(x *Intent) error {
		x.Status = StatusRetryableFailure
		x.AttemptCount = 1
		x.Attempts = append(x.Attempts, Attempt{N: 1, Result: ResultUnknownOutcome})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// No key covers its retry: it never probes, and the gate does not hold it
	// either (it would wait for ever): the send-time check hands it to a human.
	r.prov.caps = Capabilities{}
	if err := attemptID(ctx, r.d, in.ID, "retry"); err != nil {
		t.Fatal(err)
	}
	if r.prov.sends != 0 {
		t.Fatal("an intent whose retry is not provably safe probed a half-open breaker")
	}
	if st, _ := gates.State(ctx, key); st.Breaker.ProbeUntil != nil {
		t.Fatalf("probe taken: %+v", st.Breaker)
	}
	if got := r.get(t, in.ID); got.Status != StatusNeedsHuman {
		t.Fatalf("status %s, want needs-human", got.Status)
	}
}

func TestPauseDuringTheHoldEndsTheClaimWithADeferredAttemptAndNoSend(t *testing.T) {
	r, gates, _ := gateRig(&gate.Pace{Rate: 2, Per: time.Second, Burst: 1})
	ctx := context.Background()
	key := gate.GateKey("fake", "a1")
	a, b := r.submitKey(t, "k1"), r.submitKey(t, "k2")
	if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	r.d.Gate.MaxHold = time.Second
	// b holds for its slot (500ms); meanwhile another worker sees a 429.
	var pausedUntil time.Time
	r.d.Gate.Sleep = func(_ context.Context, d time.Duration) error {
		r.clock.Advance(d)
		if !pausedUntil.IsZero() {
			return nil
		}
		pausedUntil = r.clock.Now().Add(5 * time.Second)
		return gates.Pause(ctx, key, pausedUntil)
	}
	if err := attemptID(ctx, r.d, b.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	if r.prov.sends != 1 {
		t.Fatalf("sent during a pause (%d sends)", r.prov.sends)
	}
	got := r.get(t, b.ID)
	if got.Status != StatusRetryableFailure || got.AttemptCount != 1 || len(got.Attempts) != 1 || got.Attempts[0].Result != AttemptDeferred ||
		got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(pausedUntil) || pausedUntil.Before(t0.Add(5*time.Second)) {
		t.Fatalf("released intent: %s attempts %d next %v", got.Status, got.AttemptCount, got.NextAttemptAt)
	}
	r.d.Gate.Sleep = func(_ context.Context, d time.Duration) error { r.clock.Advance(d); return nil }
	r.drain(t)
	if got := r.get(t, b.ID); got.Status != StatusSucceeded || got.AttemptCount != 2 || r.prov.sends != 2 || MayHaveTakenEffect(got) {
		t.Fatalf("after the pause: %s attempts %d sends %d", got.Status, got.AttemptCount, r.prov.sends)
	}
}

// A paced attempt whose claim and checks outlast the lead reaches its send
// more than one interval after its slot. Sent then, it would crowd the slots
// reserved after its own (several late workers would send at once); it
// takes a fresh slot instead, so the next free slot is at least one
// interval after its send.
func TestLateHoldTakesAFreshSlotInsteadOfCrowdingTheNextOnes(t *testing.T) {
	pace := gate.Pace{Rate: 5, Per: time.Second, Burst: 1}
	r, gates, _ := gateRig(&pace)
	ctx := context.Background()
	key := gate.GateKey("fake", "a1")
	a, b := r.submitKey(t, "k1"), r.submitKey(t, "k2")
	if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	late := true
	r.d.Gate.Sleep = func(_ context.Context, d time.Duration) error {
		r.clock.Advance(d)
		if late { // the first wait of b overruns by a second (a slow claim)
			late = false
			r.clock.Advance(time.Second)
		}
		return nil
	}
	if err := attemptID(ctx, r.d, b.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	sentAt := r.clock.Now()
	if r.prov.sends != 2 {
		t.Fatalf("sends %d, want 2", r.prov.sends)
	}
	next, _, err := reserve(ctx, gates, key, pace.Interval())
	if err != nil {
		t.Fatal(err)
	}
	if next.Before(sentAt.Add(pace.Interval())) {
		t.Fatalf("late send at %v left the next free slot at %v: the next attempt would go out within one interval of it", sentAt.Sub(t0), next.Sub(t0))
	}
}

// A held send that wakes late for every slot it moves on to (a machine too
// slow to keep the pace, other workers taking the slots after its own) is
// released after its third, like a paused one: an attempt recorded as
// deferred, nothing sent. Sent then, it would crowd the sends after it.
func TestASendLateForThreeSlotsInARowIsReleasedNotSent(t *testing.T) {
	pace := gate.Pace{Rate: 2, Per: time.Second, Burst: 1}
	r, gates, _ := gateRig(&pace)
	ctx := context.Background()
	key := gate.GateKey("fake", "a1")
	r.d.Gate.MaxHold = 3 * time.Second
	a, b := r.submitKey(t, "k1"), r.submitKey(t, "k2")
	if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	r.d.Gate.Sleep = func(_ context.Context, d time.Duration) error {
		// Every wait overruns by a second, and meanwhile other workers take
		// the next three slots: each slot b moves on to is taken after its
		// own, so it cannot slide, and it wakes late for that one too.
		for i := 0; i < 3; i++ {
			if _, _, err := reserve(ctx, gates, key, pace.Interval()); err != nil {
				return err
			}
		}
		r.clock.Advance(d + time.Second)
		return nil
	}
	if err := attemptID(ctx, r.d, b.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	if r.prov.sends != 1 {
		t.Fatalf("sends %d, want 1: b was late for every slot", r.prov.sends)
	}
	got := r.get(t, b.ID)
	if got.Status != StatusRetryableFailure || len(got.Attempts) != 1 || got.Attempts[0].Result != AttemptDeferred ||
		!strings.Contains(got.Attempts[0].Evidence.Detail, "three times") {
		t.Fatalf("b: %s %+v", got.Status, got.Attempts)
	}
}

// An operator's new pace sizes the counter from the first slot a worker
// takes after it learns of it, which is its first reservation's answer: the
// slot it took by the old pace is widened by the difference, so the send
// after it keeps the new interval — whether the pace changed after this
// worker's first send or before (a fresh process reads no gate first).
func TestAnOperatorsSlowerPaceSpacesTheNextSendByItsInterval(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("set before the first send %v", before), func(t *testing.T) {
			r, gates, _ := gateRig(&gate.Pace{Rate: 20, Per: time.Second, Burst: 1})
			ctx := context.Background()
			key := gate.GateKey("fake", "a1")
			r.d.Gate.MaxHold = 3 * time.Second
			slow := gate.Pace{Rate: 2, Per: time.Second, Burst: 1}
			override := func() {
				if err := gates.SetOverride(ctx, key, &gate.PaceOverride{Pace: slow, Reason: "provider asked", By: "ann", At: t0}); err != nil {
					t.Fatal(err)
				}
			}
			a, b := r.submitKey(t, "k1"), r.submitKey(t, "k2")
			if before {
				override()
			}
			if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
				t.Fatal(err)
			}
			aSent := r.clock.Now()
			if !before {
				override()
			}
			if err := attemptID(ctx, r.d, b.ID, "stream"); err != nil {
				t.Fatal(err)
			}
			bSent := r.clock.Now()
			if r.prov.sends != 2 {
				t.Fatalf("sends %d, want 2", r.prov.sends)
			}
			if before && bSent.Sub(aSent) < slow.Interval() {
				t.Fatalf("b went %v after a, want at least the operator's interval %v", bSent.Sub(aSent), slow.Interval())
			}
			next, _, err := reserve(ctx, gates, key, 0)
			if err != nil {
				t.Fatal(err)
			}
			if next.Before(bSent.Add(slow.Interval())) {
				t.Fatalf("the next slot is %v after b's send, want at least the new interval %v", next.Sub(bSent), slow.Interval())
			}
		})
	}
}

func TestDuplicateDispatchTriggersHoldOneSlot(t *testing.T) {
	r, _, _ := gateRig(&gate.Pace{Rate: 1, Per: 10 * time.Second, Burst: 1})
	ctx := context.Background()
	a, b, c := r.submitKey(t, "k1"), r.submitKey(t, "k2"), r.submitKey(t, "k3")
	if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	// b's stream record reaches three consumers and a sweeper kicks it too.
	for _, trig := range []Trigger{"stream", "stream", "sweeper", "stream"} {
		if err := r.d.HandleRetry(ctx, RetryMessage{IntentID: b.ID, Op: OpDispatch, Trigger: trig}); err != nil {
			t.Fatal(err)
		}
	}
	if err := attemptID(ctx, r.d, c.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	msgs := r.queue.take()
	if len(msgs) != 2 {
		t.Fatalf("queued %d deferrals, want 2 (b once, c once): %+v", len(msgs), msgs)
	}
	slots := map[string]time.Time{}
	for _, m := range msgs {
		if m.msg.SlotAt == nil {
			t.Fatalf("deferral without a slot: %+v", m.msg)
		}
		slots[m.msg.IntentID] = *m.msg.SlotAt
	}
	// c's slot follows b's directly: b's duplicates took none.
	if !slots[b.ID].Equal(t0.Add(10*time.Second)) || !slots[c.ID].Equal(t0.Add(20*time.Second)) {
		t.Fatalf("slots b %v c %v, want +10s and +20s", slots[b.ID].Sub(t0), slots[c.ID].Sub(t0))
	}
	r.queue.msgs = append(r.queue.msgs, msgs...)
	r.drain(t)
	if r.prov.sends != 3 {
		t.Fatalf("sends %d, want 3", r.prov.sends)
	}
}

// A held send that wakes late for its slot moves on (late). When other
// workers took the slots after its own, it takes a fresh one instead of
// crowding theirs, and is sent at that slot plus the lead, like every fresh
// slot: without the lead it would go out a lead early, on top of the send
// of the slot before it. When no slot was taken after its own (an account
// with little traffic) it keeps its turn: it slides the counter, goes out
// when it woke, and the next slot follows it by one interval. Retaking at
// the tail there would send it an interval and a lead later, and under a
// slow claim path late for that slot too.
func TestALateSendMovesOnWithoutCrowdingTheNext(t *testing.T) {
	for _, c := range []struct {
		others int
		slow   time.Duration // how late b's worker wakes
	}{{2, 700 * time.Millisecond}, {0, 700 * time.Millisecond}, {2, 2500 * time.Millisecond}} {
		others := c.others
		for _, lead := range []time.Duration{0, 250 * time.Millisecond} {
			t.Run(fmt.Sprintf("%d slots taken after its own, %v late, lead %v", others, c.slow, lead), func(t *testing.T) {
				pace := gate.Pace{Rate: 2, Per: time.Second, Burst: 1} // a slot every 500ms
				r, gates, _ := gateRig(&pace)
				ctx := context.Background()
				key := gate.GateKey("fake", "a1")
				r.d.Gate.MaxHold = 3 * time.Second
				r.d.Gate.Lead = lead
				a, b := r.submitKey(t, "k1"), r.submitKey(t, "k2")
				if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil { // slot t0, sent at t0 + lead
					t.Fatal(err)
				}
				first := true
				var woke time.Time
				var taken []time.Time
				r.d.Gate.Sleep = func(_ context.Context, d time.Duration) error {
					if first {
						// While b waits for its slot (+500ms), the other
						// workers take the next ones, and b's worker is
						// slow: it wakes 700ms late.
						first = false
						for i := 0; i < others; i++ {
							slot, _, err := reserve(ctx, gates, key, pace.Interval())
							if err != nil {
								return err
							}
							taken = append(taken, slot.Add(lead))
						}
						r.clock.Advance(d + c.slow)
						woke = r.clock.Now()
						return nil
					}
					r.clock.Advance(d)
					return nil
				}
				if err := attemptID(ctx, r.d, b.ID, "stream"); err != nil {
					t.Fatal(err)
				}
				sentAt := r.clock.Now()
				if r.prov.sends != 2 {
					t.Fatalf("sends %d, want 2", r.prov.sends)
				}
				if got := r.get(t, b.ID); got.Status != StatusSucceeded || got.AttemptCount != 1 {
					t.Fatalf("b %s attempts %d", got.Status, got.AttemptCount)
				}
				if c.slow > 2*time.Second {
					// The slots taken after its own are all past when it
					// wakes: it starts the counter again from now, so the
					// next fresh take follows its send by an interval (a
					// send on the stale tail would go now and leave the
					// counter behind now: the next take would restart there,
					// a lead or less after it).
					raw, _, _, err := r.d.Gate.Store.Take(ctx, key, gate.SlotTake{Interval: pace.Interval(), Floor: sentAt.Add(-pace.Tolerance()), At: sentAt})
					nextAt := raw.Add(r.d.Gate.Lead)
					if err != nil {
						t.Fatal(err)
					}
					if sentAt.Before(woke) || nextAt.Sub(sentAt) < pace.Interval() {
						t.Fatalf("b sent at +%v (woke +%v), the next fresh slot is sent %v after it; want at least %v", sentAt.Sub(t0), woke.Sub(t0), nextAt.Sub(sentAt), pace.Interval())
					}
					return
				}
				if others > 0 {
					// Not between the others' sends: at the next free slot (+2s) plus the lead.
					last := taken[len(taken)-1]
					if !sentAt.Equal(t0.Add(2*time.Second+lead)) || sentAt.Sub(last) < 500*time.Millisecond {
						t.Fatalf("b sent at +%v, %v after the other workers' last send (+%v); want +%v, one interval after it", sentAt.Sub(t0), sentAt.Sub(last), last.Sub(t0), 2*time.Second+lead)
					}
					return
				}
				if !sentAt.Equal(woke) {
					t.Fatalf("b sent at +%v, want when it woke (+%v)", sentAt.Sub(t0), woke.Sub(t0))
				}
				next, _, err := reserve(ctx, gates, key, pace.Interval())
				if err != nil {
					t.Fatal(err)
				}
				if got := next.Add(lead); !got.Equal(sentAt.Add(pace.Interval())) {
					t.Fatalf("the next slot is sent at +%v, want one interval after b's send (+%v)", got.Sub(t0), sentAt.Add(pace.Interval()).Sub(t0))
				}
			})
		}
	}
}

func TestDuplicateProneTrigger(t *testing.T) {
	for trig, want := range map[Trigger]bool{"stream": true, "sweeper": true, OpDispatch: true, "inline": true, "paced": false, "retry": false, "reconcile": false} {
		if got := duplicateProneTrigger(trig); got != want {
			t.Fatalf("duplicateProneTrigger(%q) = %v, want %v", trig, got, want)
		}
	}
}

// Targets with a pace of their own (e.g. Slack: 1/s per channel) are paced
// independently of each other, within one account: a second intent to one
// target waits for that target's next slot, one to another target does not.
func TestTargetsOfOneAccountArePacedIndependently(t *testing.T) {
	r, _, _ := gateRig(nil) // the account itself is not paced
	r.d.Gate.DeclaredTarget = func(provider, account string) (gate.Pace, bool) {
		return gate.Pace{Rate: 1, Per: 10 * time.Second, Burst: 1}, true
	}
	ctx := context.Background()
	submit := func(key, target string) *Intent {
		res, err := r.in.Submit(ctx, "bot1", key, []byte(strings.Replace(body, `"target":"c1"`, `"target":"`+target+`"`, 1)))
		if err != nil {
			t.Fatal(err)
		}
		return res.Intent
	}
	a1, a2, b1 := submit("k1", "c1"), submit("k2", "c1"), submit("k3", "c2")
	for _, in := range []*Intent{a1, a2, b1} {
		if err := attemptID(ctx, r.d, in.ID, "stream"); err != nil {
			t.Fatal(err)
		}
	}
	if r.prov.sends != 2 || !r.clock.Now().Equal(t0) {
		t.Fatalf("sends %d at +%v: want c1's first and c2's first at once", r.prov.sends, r.clock.Now().Sub(t0))
	}
	msgs := r.queue.take()
	if len(msgs) != 1 || msgs[0].msg.IntentID != a2.ID || msgs[0].msg.TargetSlotAt == nil || !msgs[0].msg.TargetSlotAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("want a2 deferred to c1's next slot (+10s), got %+v", msgs)
	}
	if got := r.get(t, a2.ID); got.Status != StatusPending || got.AttemptCount != 0 {
		t.Fatalf("deferred a2 changed: %s attempts %d", got.Status, got.AttemptCount)
	}
	r.queue.msgs = msgs
	r.drain(t)
	if r.prov.sends != 3 || r.clock.Now().Before(t0.Add(10*time.Second)) {
		t.Fatalf("a2 sent at +%v (sends %d), want not before +10s", r.clock.Now().Sub(t0), r.prov.sends)
	}
}

// stateForSpy is a GateStore whose per-attempt reads (StateFor) are
// counted apart from the gate's own (State).
type stateForSpy struct {
	*gate.MemoryGates
	forIDs []string
	state  int
}

func (s *stateForSpy) State(ctx context.Context, key string) (gate.GateState, error) {
	s.state++
	return s.MemoryGates.State(ctx, key)
}

func (s *stateForSpy) StateFor(ctx context.Context, key, id string, now time.Time) (gate.GateState, error) {
	s.forIDs = append(s.forIDs, id)
	return s.MemoryGates.State(ctx, key)
}

// An unpaced account's attempts read the gate through StateFor (the store
// spreads those reads by intent id), and what it says still stops a send:
// once the breaker is open, none goes out.
func TestUnpacedAttemptsReadTheGateThroughStateFor(t *testing.T) {
	unavailable := transientFailure
	r, gates, _ := gateRig(nil, unavailable(), unavailable())
	spy := &stateForSpy{MemoryGates: gates}
	r.d.Gate.Store = spy
	r.d.Policy.Backoff.MaxAttempts = 10
	ids := r.attemptEach(t, 4)
	if r.prov.sends != 2 {
		t.Fatalf("sends %d, want 2 (the breaker opens after 2; StateFor showed it open)", r.prov.sends)
	}
	if len(spy.forIDs) != 4 || spy.state != 0 {
		t.Fatalf("StateFor read for %v, State read %d times; want one StateFor per attempt, by intent id, and no State", spy.forIDs, spy.state)
	}
	for i, id := range ids {
		if spy.forIDs[i] != id {
			t.Fatalf("read %d was for %s, want %s", i, spy.forIDs[i], id)
		}
	}
}

// A held send reads the gate GateReadAhead before its slot, at every pace:
// at 20/s too, where half the interval (25 ms) is shorter than a read on a
// loaded host (a read that short made nearly every 200/s send late).
func TestHeldSendReadsTheGateBeforeItsSlot(t *testing.T) {
	for _, c := range []struct {
		pace   gate.Pace
		others int           // slots other workers take between a's and b's
		want   time.Duration // b's slot
	}{
		{gate.Pace{Rate: 2, Per: time.Second, Burst: 1}, 0, 500 * time.Millisecond},
		{gate.Pace{Rate: 20, Per: time.Second, Burst: 1}, 5, 300 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%d/s", c.pace.Rate), func(t *testing.T) {
			r, gates, _ := gateRig(&c.pace)
			ctx := context.Background()
			r.d.Gate.MaxHold = time.Second
			a, b := r.submitKey(t, "k1"), r.submitKey(t, "k2")
			if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < c.others; i++ {
				if _, _, err := reserve(ctx, gates, gate.GateKey("fake", "a1"), c.pace.Interval()); err != nil {
					t.Fatal(err)
				}
			}
			reads := &timedGates{MemoryGates: gates, now: r.clock.Now}
			r.d.Gate.Store = reads
			if err := attemptID(ctx, r.d, b.ID, "stream"); err != nil {
				t.Fatal(err)
			}
			sentAt := r.clock.Now()
			if r.prov.sends != 2 || !sentAt.Equal(t0.Add(c.want)) {
				t.Fatalf("sends %d, b sent at +%v, want 2 and +%v", r.prov.sends, sentAt.Sub(t0), c.want)
			}
			if len(reads.at) == 0 || !reads.at[len(reads.at)-1].Equal(sentAt.Add(-gate.GateReadAhead)) {
				t.Fatalf("state reads at %v, want the last at the slot less %v (%v)", reads.at, gate.GateReadAhead, sentAt.Add(-gate.GateReadAhead))
			}
		})
	}
}

type timedGates struct {
	*gate.MemoryGates
	now func() time.Time
	at  []time.Time
}

func (g *timedGates) State(ctx context.Context, key string) (gate.GateState, error) {
	g.at = append(g.at, g.now())
	return g.MemoryGates.State(ctx, key)
}

// replicaReads is a GateStore whose per-attempt reads (StateFor) answer the
// zero state whenever the gate admits like it (a clean replica): they never
// show a failure streak below the threshold.
type replicaReads struct{ *gate.MemoryGates }

func (g replicaReads) StateFor(ctx context.Context, key, id string, now time.Time) (gate.GateState, error) {
	st, err := g.MemoryGates.State(ctx, key)
	if err == nil && gate.CleanGate(st, now) {
		return gate.GateState{}, nil
	}
	return st, err
}

// An unpaced account's reads may not show a failure streak; the process that
// counted a failure ends the streak with its next success there, and a
// process that counted none writes nothing for its successes.
func TestASuccessEndsTheStreakItsProcessCounted(t *testing.T) {
	r, gates, _ := gateRig(nil, transientFailure())
	r.d.Gate.Store = replicaReads{gates}
	r.d.Policy.Backoff.MaxAttempts = 10
	ctx := context.Background()
	key := gate.GateKey("fake", "a1")
	r.attemptEach(t, 1) // a 503: the streak is 1
	if st, _ := gates.State(ctx, key); st.Breaker.Failures != 1 {
		t.Fatalf("after a failure: %+v", st.Breaker)
	}
	// Another process (its own Gate over the same store) succeeds: its read
	// shows no streak and it counted none, so it writes nothing.
	other := *r.d
	otherGate := &gate.Gate{Store: r.d.Gate.Store, Breaker: r.d.Gate.Breaker, DefaultRetryAfter: r.d.Gate.DefaultRetryAfter, Notify: r.d.Gate.Notify, Clock: r.d.Gate.Clock, Sleep: r.d.Gate.Sleep}
	other.Gate = otherGate
	in := r.submitKey(t, "other")
	if err := attemptID(ctx, &other, in.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	if st, _ := gates.State(ctx, key); st.Breaker.Failures != 1 {
		t.Fatalf("a success in a process that counted no failure changed the streak: %+v", st.Breaker)
	}
	// The process that counted the failure succeeds: the streak ends.
	in = r.submitKey(t, "mine")
	if err := attemptID(ctx, r.d, in.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	if st, _ := gates.State(ctx, key); st.Breaker.Failures != 0 {
		t.Fatalf("the success after this process's failure left the streak at %d", st.Breaker.Failures)
	}
}

// interleavedGates runs another worker's whole attempt right after this
// worker's next Take by the given interval, as two processes do when
// their reservations land side by side.
type interleavedGates struct {
	*gate.MemoryGates
	interval time.Duration
	other    func()
}

func (g *interleavedGates) Take(ctx context.Context, key string, r gate.SlotTake) (time.Time, gate.GateState, bool, error) {
	slot, st, dup, err := g.MemoryGates.Take(ctx, key, r)
	g.then(r.Interval)
	return slot, st, dup, err
}

// reserve is another worker's take of key's next slot: the counter moves on
// by interval from where it stands (never restarted as idle); interval 0
// reads it. It returns the slot.
func reserve(ctx context.Context, g gate.GateStore, key string, interval time.Duration) (time.Time, gate.GateState, error) {
	epoch := time.Unix(0, 0)
	slot, st, _, err := g.Take(ctx, key, gate.SlotTake{Interval: interval, Floor: epoch, At: epoch})
	return slot, st, err
}

func (g *interleavedGates) then(interval time.Duration) {
	if g.other != nil && interval == g.interval {
		other := g.other
		g.other = nil
		other()
	}
}

// timedProvider records when each send left, on the rig's clock.
type timedProvider struct {
	Provider
	clock Clock
	at    []time.Time
}

func (p *timedProvider) Send(ctx context.Context, r SendRequest) (SendResult, error) {
	p.at = append(p.at, p.clock.Now())
	return p.Provider.Send(ctx, r)
}

// twoProcesses is a paced rig whose sends the provider times, and another
// worker on the same gates: its own process, its own first look at them.
func twoProcesses(pace *gate.Pace) (*rig, *gate.MemoryGates, *timedProvider, *Dispatcher) {
	r, gates, _ := gateRig(pace)
	prov := &timedProvider{Provider: r.prov, clock: r.clock}
	r.d.Providers = ProviderMap{"fake": prov}
	r.d.Gate.MaxHold = 3 * time.Second
	other := *r.d
	g := r.d.Gate
	other.Gate = &gate.Gate{Store: gates, Breaker: g.Breaker, DefaultRetryAfter: g.DefaultRetryAfter, Notify: g.Notify, Clock: g.Clock, Sleep: g.Sleep, Declared: g.Declared, MaxHold: g.MaxHold}
	other.Owner = "w2"
	return r, gates, prov, &other
}

// An operator's faster pace never moves the counter back: a worker that
// took its slot by the old pace learns the new one after another worker
// took the slot after it by the new pace; sizing the counter down by the
// difference of the intervals would hand out that slot again (two sends at
// once). Kept as it stands, the next send waits at most one old interval
// more, once.
func TestAnOperatorsFasterPaceNeverMovesTheCounterBack(t *testing.T) {
	old := gate.Pace{Rate: 1, Per: time.Second, Burst: 1}
	fast := gate.Pace{Rate: 10, Per: time.Second, Burst: 1}
	r, gates, prov, other := twoProcesses(&old)
	ctx := context.Background()
	key := gate.GateKey("fake", "a1")
	mine := &interleavedGates{MemoryGates: gates, interval: old.Interval()}
	r.d.Gate.Store = mine
	a, b, c := r.submitKey(t, "k1"), r.submitKey(t, "k2"), r.submitKey(t, "k3")
	if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	if err := gates.SetOverride(ctx, key, &gate.PaceOverride{Pace: fast, Reason: "provider raised our limit", By: "ann", At: t0}); err != nil {
		t.Fatal(err)
	}
	mine.other = func() {
		if err := attemptID(ctx, other, c.ID, "stream"); err != nil {
			t.Fatal(err)
		}
	}
	if err := attemptID(ctx, r.d, b.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	r.drain(t)
	if len(prov.at) != 3 {
		t.Fatalf("sends %d, want 3 (%v; %s %s %s)", len(prov.at), prov.at, r.get(t, a.ID).Status, r.get(t, b.ID).Status, r.get(t, c.ID).Status)
	}
	for i := 1; i < len(prov.at); i++ {
		if gap := prov.at[i].Sub(prov.at[i-1]); gap < fast.Interval() {
			t.Fatalf("send %d went %v after the one before it, want at least the new interval %v (sends at %v)", i, gap, fast.Interval(), prov.at)
		}
	}
	next, _, err := reserve(ctx, gates, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	if last := prov.at[len(prov.at)-1]; next.Before(last.Add(fast.Interval())) {
		t.Fatalf("the next slot is %v after the last send, want at least %v", next.Sub(last), fast.Interval())
	}
}

// A process's first look at a paced account reads the operator's pace
// before it takes a slot: two processes starting at once on an account the
// operator slowed take their slots by the operator's pace. Sized by the
// declared pace and resized only after it was handed out, the other
// process's slot would sit one declared interval after this one's.
func TestAProcesssFirstSlotIsSizedByTheOperatorsPace(t *testing.T) {
	declared := gate.Pace{Rate: 20, Per: time.Second, Burst: 1}
	slow := gate.Pace{Rate: 2, Per: time.Second, Burst: 1}
	r, gates, prov, other := twoProcesses(&declared)
	ctx := context.Background()
	key := gate.GateKey("fake", "a1")
	if err := gates.SetOverride(ctx, key, &gate.PaceOverride{Pace: slow, Reason: "the provider asked us to slow down", By: "ann", At: t0}); err != nil {
		t.Fatal(err)
	}
	a, b := r.submitKey(t, "k1"), r.submitKey(t, "k2")
	// The other process's whole attempt lands right after this one's take,
	// should that take go by the declared interval.
	mine := &interleavedGates{MemoryGates: gates, interval: declared.Interval()}
	mine.other = func() {
		if err := attemptID(ctx, other, b.ID, "stream"); err != nil {
			t.Fatal(err)
		}
	}
	r.d.Gate.Store = mine
	if err := attemptID(ctx, r.d, a.ID, "stream"); err != nil {
		t.Fatal(err)
	}
	if mine.other != nil { // not interleaved: the other process comes second
		if err := attemptID(ctx, other, b.ID, "stream"); err != nil {
			t.Fatal(err)
		}
	}
	r.drain(t)
	if len(prov.at) != 2 {
		t.Fatalf("sends %d, want 2 (%v)", len(prov.at), prov.at)
	}
	gap := prov.at[1].Sub(prov.at[0])
	if gap < 0 {
		gap = -gap
	}
	if gap < slow.Interval() {
		t.Fatalf("the two processes' first sends went %v apart, want at least the operator's interval %v", gap, slow.Interval())
	}
}
