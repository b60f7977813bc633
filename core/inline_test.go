package core

import (
	"context"
	"errors"
	"github.com/botharness/outbox/core/gate"
	"testing"
	"time"
)

func inlineRig(r *rig) *rig {
	r.in.Inline = &Inline{D: r.d}
	return r
}

func (r *rig) submitWait(t *testing.T, key string, wait time.Duration) SubmitResult {
	t.Helper()
	res, err := r.in.SubmitWith(context.Background(), "bot1", key, []byte(body), SubmitOptions{Wait: wait})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Inline happy path: the put is already the claim, the outcome the second
// write; the stream has nothing to do and nothing is queued.
func TestInlineSucceedsInTwoWrites(t *testing.T) {
	r := inlineRig(newRig(Capabilities{}))
	res := r.submitWait(t, "k1", 5*time.Second)
	if !res.Waited || res.Replayed || res.Intent.Status != StatusSucceeded || res.Intent.ExternalID != "ext-1" {
		t.Fatalf("got waited=%v %s %q", res.Waited, res.Intent.Status, res.Intent.ExternalID)
	}
	if r.store.puts != 2 || r.prov.sends != 1 {
		t.Fatalf("puts %d sends %d, want 2 and 1", r.store.puts, r.prov.sends)
	}
	got := r.get(t, res.Intent.ID)
	if len(got.Attempts) != 1 || got.Attempts[0].Trigger != TriggerInline || got.AttemptCount != 1 || got.FirstAttemptAt == nil {
		t.Fatalf("attempts %+v", got.Attempts)
	}
	if got.RepairAt.IsZero() {
		t.Fatal("the in-flight put filed no repair entry")
	}
	if msgs := r.queue.take(); len(msgs) != 0 {
		t.Fatalf("queued %+v", msgs)
	}
	// The stream's trigger (were it not filtered out) claims nothing.
	mustAttempt(t, r.d, got.ID)
	if r.prov.sends != 1 {
		t.Fatalf("sends %d after a stray dispatch", r.prov.sends)
	}
}

// Without a wait, or without inline delivery wired, nothing changes.
func TestNoWaitTakesTheAsynchronousRoad(t *testing.T) {
	r := inlineRig(newRig(Capabilities{}))
	res := r.submitWait(t, "k1", 0)
	if res.Waited || res.Intent.Status != StatusPending || r.prov.sends != 0 {
		t.Fatalf("got waited=%v %s sends %d", res.Waited, res.Intent.Status, r.prov.sends)
	}
	r2 := newRig(Capabilities{})
	res = r2.submitWait(t, "k1", 5*time.Second)
	if res.Waited || res.Intent.Status != StatusPending {
		t.Fatalf("no Inline: got waited=%v %s", res.Waited, res.Intent.Status)
	}
}

func TestInlineWaitIsCapped(t *testing.T) {
	var off *Inline
	l := &Inline{D: &Dispatcher{}}
	for _, c := range []struct {
		l    *Inline
		ask  time.Duration
		want time.Duration
	}{
		{l, time.Hour, DefaultInlineMaxWait},
		{l, 3 * time.Second, 3 * time.Second},
		{l, 0, 0},
		{&Inline{D: &Dispatcher{}, MaxWait: 2 * time.Second}, 5 * time.Second, 2 * time.Second},
		{off, 5 * time.Second, 0},
	} {
		if got := c.l.wait(c.ask); got != c.want {
			t.Errorf("Wait(%v) = %v, want %v", c.ask, got, c.want)
		}
	}
}

// A raised barrier, a revalidation that blocks, and a paused account each
// make the put the ordinary pending intent: nothing sent, nothing counted,
// and the asynchronous road then does exactly what it always does.
func TestInlineFallsBackToThePendingRoad(t *testing.T) {
	t.Run("barrier", func(t *testing.T) {
		r := inlineRig(newRig(Capabilities{}))
		b := &barrierUp{up: true}
		r.d.Barrier = b
		res := r.submitWait(t, "k1", 5*time.Second)
		assertFallback(t, r, res)
		b.up = false
		mustAttempt(t, r.d, res.Intent.ID)
		if got := r.get(t, res.Intent.ID); got.Status != StatusSucceeded || r.prov.sends != 1 {
			t.Fatalf("async road after the barrier: %s sends %d", got.Status, r.prov.sends)
		}
	})
	t.Run("revalidation", func(t *testing.T) {
		r := inlineRig(newRig(Capabilities{}))
		r.d.Revalidator = blockAll{}
		res := r.submitWait(t, "k1", 5*time.Second)
		assertFallback(t, r, res)
		mustAttempt(t, r.d, res.Intent.ID)
		if got := r.get(t, res.Intent.ID); got.Status != StatusGrantRevoked || r.prov.sends != 0 {
			t.Fatalf("async road blocks it: %s sends %d", got.Status, r.prov.sends)
		}
	})
	t.Run("paused", func(t *testing.T) {
		r, gates, _ := gateRig(nil)
		inlineRig(r)
		if err := gates.Pause(context.Background(), gate.GateKey("fake", "a1"), r.clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		res := r.submitWait(t, "k1", 5*time.Second)
		assertFallback(t, r, res)
		if msgs := r.queue.take(); len(msgs) != 0 {
			t.Fatalf("an unpaced fallback queued %+v (the stream takes it)", msgs)
		}
	})
}

func assertFallback(t *testing.T, r *rig, res SubmitResult) {
	t.Helper()
	got := r.get(t, res.Intent.ID)
	if res.Waited || res.Intent.Status != StatusPending || got.Status != StatusPending || got.AttemptCount != 0 || r.prov.sends != 0 || r.store.puts != 1 {
		t.Fatalf("fallback: waited=%v answered %s stored %s attempts %d sends %d puts %d",
			res.Waited, res.Intent.Status, got.Status, got.AttemptCount, r.prov.sends, r.store.puts)
	}
}

type blockAll struct{}

func (blockAll) Revalidate(context.Context, *Intent) (*Checks, *Blocked, error) {
	return &Checks{Result: string(StatusGrantRevoked)}, &Blocked{Status: StatusGrantRevoked, Reason: "revoked"}, nil
}

// A paced account whose next slot is beyond the hold bound: the put is
// pending, and the slot the intake reserved goes on with a paced message;
// the stream's dispatch of the pending intent holds no second slot, and the
// intent is sent exactly once, on its slot.
func TestInlineOverPaceHandsItsSlotOn(t *testing.T) {
	r, _, _ := gateRig(&gate.Pace{Rate: 1, Per: 10 * time.Second, Burst: 1})
	inlineRig(r)
	first := r.submitWait(t, "k1", 5*time.Second)
	if first.Intent.Status != StatusSucceeded {
		t.Fatalf("first: %s", first.Intent.Status)
	}
	second := r.submitWait(t, "k2", 5*time.Second)
	if second.Waited || second.Intent.Status != StatusPending || r.prov.sends != 1 {
		t.Fatalf("second: waited=%v %s sends %d", second.Waited, second.Intent.Status, r.prov.sends)
	}
	msgs := r.queue.take()
	if len(msgs) != 1 || msgs[0].msg.Op != OpPaced || msgs[0].msg.SlotAt == nil || !msgs[0].msg.SlotAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("queued %+v", msgs)
	}
	// The stream record of the pending intent: a duplicate of the intake's
	// reservation, it takes no slot and sends nothing.
	mustAttempt(t, r.d, second.Intent.ID)
	if r.prov.sends != 1 || len(r.queue.take()) != 0 {
		t.Fatalf("the stream's dispatch sent or queued: sends %d", r.prov.sends)
	}
	r.clock.Advance(msgs[0].delay)
	if err := r.d.HandleRetry(context.Background(), msgs[0].msg); err != nil {
		t.Fatal(err)
	}
	got := r.get(t, second.Intent.ID)
	if got.Status != StatusSucceeded || r.prov.sends != 2 || r.clock.Now().Before(t0.Add(10*time.Second)) {
		t.Fatalf("handed-on attempt: %s sends %d at %v", got.Status, r.prov.sends, r.clock.Now())
	}
}

// An unknown outcome inline goes down the same road as the dispatcher's:
// the answer says so, and the reconciliation is queued.
func TestInlineUnknownOutcomeIsRecordedAsAnyAttempt(t *testing.T) {
	r := inlineRig(newRig(Capabilities{Lookup: true}, &UnknownOutcomeError{Err: context.DeadlineExceeded}))
	res := r.submitWait(t, "k1", 5*time.Second)
	if !res.Waited || res.Intent.Status != StatusUnknownOutcome {
		t.Fatalf("got waited=%v %s", res.Waited, res.Intent.Status)
	}
	msgs := r.queue.take()
	if len(msgs) != 1 || msgs[0].msg.Op != OpReconcile {
		t.Fatalf("queued %+v", msgs)
	}
}

// A crash between the put and the outcome leaves the lease; the sweeper's
// rule for an expired lease turns it into an unknown outcome.
func TestInlineCrashLeavesALeaseTheSweeperExpires(t *testing.T) {
	r := inlineRig(newRig(Capabilities{}))
	r.in.Store = crashAfterClaim{r.store}
	r.d.Store = crashAfterClaim{r.store}
	res := r.submitWait(t, "k1", 5*time.Second)
	got := r.get(t, res.Intent.ID)
	if got.Status != StatusInFlight || got.Lease == nil || res.Waited || r.prov.sends != 1 {
		t.Fatalf("after a lost outcome: %s waited=%v sends %d", got.Status, res.Waited, r.prov.sends)
	}
	plan := PlanRepair(got, got.Lease.Until, 30*time.Second, 90*time.Second)
	if !plan.ExpireLease {
		t.Fatalf("the sweeper would not expire the lease: %+v", plan)
	}
}

// A replay that asks to wait while the attempt is in flight polls until the
// outcome is stored, then answers it; bounded by its wait.
func TestInlineReplayWaitsForTheOutcome(t *testing.T) {
	r := inlineRig(newRig(Capabilities{}))
	// The first request's put (already claimed) is stored; its send is slow.
	in := r.submitKey(t, "k1")
	if _, err := r.store.Claim(context.Background(), in.ID, func(in *Intent) error { return r.d.startAttempt(in, r.clock.Now()) }); err != nil {
		t.Fatal(err)
	}
	polls := 0
	r.in.Inline.Sleep = func(_ context.Context, d time.Duration) error {
		polls++
		r.clock.Advance(d)
		if polls == 3 {
			_, err := r.store.Update(context.Background(), in.ID, func(in *Intent) error {
				in.ExternalID = "ext-9"
				return in.MoveTo(StatusSucceeded, "", r.clock.Now())
			})
			return err
		}
		return nil
	}
	res := r.submitWait(t, "k1", 5*time.Second)
	if !res.Replayed || !res.Waited || res.Intent.Status != StatusSucceeded || res.Intent.ExternalID != "ext-9" || polls != 3 {
		t.Fatalf("replay: replayed=%v waited=%v %s polls %d", res.Replayed, res.Waited, res.Intent.Status, polls)
	}
	// Still in flight past the bound: the in-flight state, not waited.
	in2 := r.submitKey(t, "k2")
	if _, err := r.store.Claim(context.Background(), in2.ID, func(in *Intent) error { return r.d.startAttempt(in, r.clock.Now()) }); err != nil {
		t.Fatal(err)
	}
	start := r.clock.Now()
	res, err := r.in.SubmitWith(context.Background(), "bot1", "k2", []byte(body), SubmitOptions{Wait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Waited || res.Intent.Status != StatusInFlight || r.clock.Now().Sub(start) > 2*time.Second {
		t.Fatalf("bounded replay: waited=%v %s after %v", res.Waited, res.Intent.Status, r.clock.Now().Sub(start))
	}
}

// barrierSeq answers the barrier reads in turn (the last answer repeats).
type barrierSeq struct {
	up    []bool
	calls int
}

func (b *barrierSeq) BarrierUp(context.Context, *Intent) (time.Time, bool, error) {
	up := b.up[min(b.calls, len(b.up)-1)]
	b.calls++
	return time.Time{}, up, nil
}

// The barrier read before the put stands for the read after the claim only
// while the put came back within InlineBarrierFresh of that read (a backup
// waits BarrierSettle after its raise before it reads an intent). A backup
// raising between the read and a slow put: the put is not known to precede
// the backup's reads, so the barrier is read again after it, and the claim
// is given back unsent, as every claim behind a raised barrier is.
func TestInlineBarrierReadStandsForTheReadAfterTheClaimOnlyWhileFresh(t *testing.T) {
	for _, c := range []struct {
		name      string
		putTakes  time.Duration
		wantReads int
		wantSends int
	}{
		{"fast put: one read, sent", InlineBarrierFresh / 10, 1, 1},
		{"slow put: read again, held", InlineBarrierFresh, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := inlineRig(newRig(Capabilities{}))
			b := &barrierSeq{up: []bool{false, true}} // raised right after the first read
			r.d.Barrier = b
			mono := time.Unix(1000, 0)
			r.in.Inline.Monotonic = func() time.Time { return mono }
			r.store.onCreate = func() { mono = mono.Add(c.putTakes) }
			res := r.submitWait(t, "k1", 5*time.Second)
			if b.calls != c.wantReads || r.prov.sends != c.wantSends {
				t.Fatalf("barrier reads %d sends %d, want %d and %d", b.calls, r.prov.sends, c.wantReads, c.wantSends)
			}
			got := r.get(t, res.Intent.ID)
			if c.wantSends == 0 && (len(got.Attempts) != 1 || got.Attempts[0].Result != ResultHeldByBarrier) {
				t.Fatalf("held claim: %s %+v", got.Status, got.Attempts)
			}
			if c.wantSends == 1 && got.Status != StatusSucceeded {
				t.Fatalf("status %s", got.Status)
			}
		})
	}
}

// fakePreflight answers the inline intake's one read before its put.
type fakePreflight struct {
	pf    Preflight
	err   error
	calls int
}

func (f *fakePreflight) Preflight(context.Context, *Intent) (Preflight, error) {
	f.calls++
	return f.pf, f.err
}

// With a Preflight, its one read decides what the three reads decide
// (revalidation, barrier, gate): they are not read again before the put,
// and each of its answers that says no makes the put the pending intent.
func TestInlinePreflightStandsForTheThreeReads(t *testing.T) {
	grant := &Grant{ID: "g1", Version: 1, Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"*"}}
	ok := Preflight{Facts: RevalidationFacts{Grant: grant}, GateClean: true}
	for _, c := range []struct {
		name   string
		pf     Preflight
		err    error
		pause  bool
		inline bool
	}{
		{"all clear", ok, nil, false, true},
		{"barrier up", Preflight{Facts: ok.Facts, BarrierUp: true, GateClean: true}, nil, false, false},
		{"grant gone", Preflight{GateClean: true}, nil, false, false},
		{"gate not clean, paused", Preflight{Facts: ok.Facts}, nil, true, false},
		{"gate not clean, nothing there", Preflight{Facts: ok.Facts}, nil, false, true},
		{"unreadable", Preflight{}, errors.New("throttled"), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, gates, _ := gateRig(nil)
			inlineRig(r)
			pre := &fakePreflight{pf: c.pf, err: c.err}
			b := &barrierUp{}
			r.d.Barrier, r.d.Revalidator, r.in.Inline.Preflight = b, blockAll{}, pre
			if c.pause {
				if err := gates.Pause(context.Background(), gate.GateKey("fake", "a1"), r.clock.Now().Add(time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
			res := r.submitWait(t, "k1", 5*time.Second)
			if pre.calls != 1 || b.calls != 0 {
				t.Fatalf("preflight read %d times, barrier %d times before the put; want 1 and 0", pre.calls, b.calls)
			}
			if !c.inline {
				assertFallback(t, r, res)
				return
			}
			// blockAll would refuse it: the preflight's facts decided.
			if !res.Waited || res.Intent.Status != StatusSucceeded || r.prov.sends != 1 {
				t.Fatalf("inline: waited=%v %s sends %d", res.Waited, res.Intent.Status, r.prov.sends)
			}
		})
	}
}
