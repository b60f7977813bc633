package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestNextRepairCheck(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	old := now.Add(-time.Hour)
	const delay = 90 * time.Second
	cases := []struct {
		name     string
		before   Status
		status   Status
		repairAt time.Time
		want     time.Time
	}{
		{"new pending intent: due after lease+grace", "", StatusPending, time.Time{}, now.Add(delay)},
		{"restored open intent: due again after delay", "", StatusUnknownOutcome, old, now.Add(delay)},
		{"restored terminal intent: no new entry", "", StatusSucceeded, old, old},
		{"claim writes no index", StatusPending, StatusInFlight, old, old},
		{"success leaves the dead entry in place", StatusInFlight, StatusSucceeded, old, old},
		{"retry due after the entry: left", StatusInFlight, StatusRetryableFailure, now.Add(10 * time.Second), now.Add(10 * time.Second)},
		{"to a human: listed by arrival", StatusUnknownOutcome, StatusNeedsHuman, old, now},
		{"human recommendation (no move)", StatusNeedsHuman, StatusNeedsHuman, old, old},
		{"human retry: due again after delay", StatusNeedsHuman, StatusPending, old, now.Add(delay)},
		{"human reconcile: due again after delay", StatusNeedsHuman, StatusUnknownOutcome, old, now.Add(delay)},
		{"human abandon: off the human list", StatusNeedsHuman, StatusAbandoned, old, time.Time{}},
		{"open intent without entry gets one", StatusInFlight, StatusRetryableFailure, time.Time{}, now.Add(delay)},
	}
	for _, c := range cases {
		in := &Intent{Status: c.status, RepairAt: c.repairAt}
		if got := NextRepairCheck(c.before, in, now, RepairPolicy{Delay: delay, Grace: 30 * time.Second}); !got.Equal(c.want) {
			t.Errorf("%s: got %v want %v", c.name, got, c.want)
		}
	}
	soon, late := now.Add(10*time.Second), now.Add(time.Hour)
	pol := RepairPolicy{Delay: delay, Grace: 30 * time.Second}
	retries := []struct {
		name     string
		retryAt  time.Time
		repairAt time.Time
		want     time.Time
	}{
		{"retry due before the entry intake filed: entry stays (no index write)", soon, now.Add(delay), now.Add(delay)},
		{"retry due after the entry: entry stays (the sweeper re-files it)", late, now.Add(delay), now.Add(delay)},
		{"entry exactly retry + delay: stays", soon, soon.Add(delay), soon.Add(delay)},
		{"entry further out than retry + delay: moves to retry + grace", soon, soon.Add(delay + time.Second), soon.Add(30 * time.Second)},
	}
	for _, c := range retries {
		retryAt := c.retryAt
		in := &Intent{Status: StatusRetryableFailure, NextAttemptAt: &retryAt, RepairAt: c.repairAt}
		if got := NextRepairCheck(StatusInFlight, in, now, pol); !got.Equal(c.want) {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
	if got := NextRepairCheck("", &Intent{Status: StatusPending, Deadline: &soon}, now, RepairPolicy{Delay: delay}); !got.Equal(soon) {
		t.Errorf("new intent with a near deadline: due %v, want its deadline %v", got, soon)
	}
	if got := NextRepairCheck("", &Intent{Status: StatusPending, Deadline: &late}, now, RepairPolicy{Delay: delay}); !got.Equal(now.Add(delay)) {
		t.Errorf("new intent with a far deadline: due %v, want after delay", got)
	}
}

func TestRetryEntryBounds(t *testing.T) {
	retry := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	p := RepairPolicy{Delay: 90 * time.Second, Grace: 30 * time.Second}
	cases := []struct {
		name     string
		repairAt time.Time
		want     bool
	}{
		{"entry before the retry (sweeper re-files it)", retry.Add(-time.Minute), true},
		{"entry within grace of the retry", retry.Add(20 * time.Second), true},
		{"entry at retry + delay", retry.Add(90 * time.Second), true},
		{"entry past retry + delay", retry.Add(91 * time.Second), false},
	}
	for _, c := range cases {
		if got := RetryEntryBounds(c.repairAt, retry, p); got != c.want {
			t.Errorf("%s: got %v want %v", c.name, got, c.want)
		}
	}
}

func TestRepairBackoff(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	const delay = 90 * time.Second
	for _, c := range []struct {
		name   string
		waited time.Duration
		want   time.Duration
	}{
		{"waited less than lease + grace: lease + grace", 10 * time.Second, delay},
		{"waited exactly lease + grace", delay, delay},
		{"waited 7 minutes: as long again", 7 * time.Minute, 7 * time.Minute},
		{"waited a day: the cap", 24 * time.Hour, MaxRepairBackoff},
		{"clock skew (since in the future): lease + grace", -time.Minute, delay},
	} {
		if got := RepairBackoff(now.Add(-c.waited), now, delay); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPlanRepair(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	const grace, delay = 30 * time.Second, 90 * time.Second
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	cases := []struct {
		name string
		in   Intent
		want repairPlan
	}{
		{"terminal: dead entry", Intent{Status: StatusSucceeded}, repairPlan{}},
		{"needs-human: listed elsewhere", Intent{Status: StatusNeedsHuman}, repairPlan{}},
		{"orphaned pending: dispatch, look again later", Intent{Status: StatusPending, UpdatedAt: now.Add(-time.Minute)}, repairPlan{Op: OpDispatch, RecheckAt: now.Add(delay)}},
		{"fresh pending: wait for the stream", Intent{Status: StatusPending, UpdatedAt: now.Add(-time.Second)}, repairPlan{RecheckAt: now.Add(-time.Second + grace)}},
		{"lease expired", Intent{Status: StatusInFlight, Lease: &Lease{Until: now.Add(-time.Second)}}, repairPlan{ExpireLease: true, RecheckAt: now.Add(delay)}},
		{"lease live: look after it ends", Intent{Status: StatusInFlight, Lease: &Lease{Until: now.Add(time.Minute)}}, repairPlan{RecheckAt: now.Add(time.Minute + grace)}},
		{"retry overdue: re-enqueue", Intent{Status: StatusRetryableFailure, NextAttemptAt: at(-time.Minute)}, repairPlan{Op: OpAttempt, RecheckAt: now.Add(delay)}},
		{"retry later: look after it is due", Intent{Status: StatusRetryableFailure, NextAttemptAt: at(10 * time.Minute)}, repairPlan{RecheckAt: now.Add(10*time.Minute + grace)}},
		{"unknown outcome quiet: reconcile", Intent{Status: StatusUnknownOutcome, UpdatedAt: now.Add(-time.Minute)}, repairPlan{Op: OpReconcile, RecheckAt: now.Add(delay)}},
		{"pending for 10 minutes: dispatch, look again after as long", Intent{Status: StatusPending, UpdatedAt: now.Add(-10 * time.Minute)}, repairPlan{Op: OpDispatch, RecheckAt: now.Add(10 * time.Minute)}},
		{"retry overdue by 4 minutes: re-enqueue, look again after as long", Intent{Status: StatusRetryableFailure, NextAttemptAt: at(-4 * time.Minute)}, repairPlan{Op: OpAttempt, RecheckAt: now.Add(4 * time.Minute)}},
		{"unknown outcome for 2 hours: reconcile, look again after the cap", Intent{Status: StatusUnknownOutcome, UpdatedAt: now.Add(-2 * time.Hour)}, repairPlan{Op: OpReconcile, RecheckAt: now.Add(MaxRepairBackoff)}},
	}
	for _, c := range cases {
		if got := PlanRepair(&c.in, now, grace, delay); got != c.want {
			t.Errorf("%s: got %+v want %+v", c.name, got, c.want)
		}
	}
}

type batchRec struct{ msgs []QueuedMessage }

func (b *batchRec) EnqueueBatch(_ context.Context, msgs []QueuedMessage) ([]int, error) {
	b.msgs = append(b.msgs, msgs...)
	return nil, nil
}

// One bot's backlog must not queue ahead of another bot's first repair.
func TestSweeperHandsRepairsOutFairlyAcrossBots(t *testing.T) {
	r := newRig(Capabilities{})
	ctx := context.Background()
	var ids []string
	for i := 0; i < 40; i++ {
		res, err := r.in.Submit(ctx, "busy", "k"+string(rune('a'+i%26))+string(rune('a'+i/26)), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Intent.ID)
	}
	r.clock.Advance(time.Second)
	quiet, err := r.in.Submit(ctx, "quiet", "q1", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(5 * time.Minute)
	b := &batchRec{}
	r.d.Policy.SweepGrace = 30 * time.Second
	s := &Sweeper{D: r.d, Index: r.store, Batch: b, PerBotRate: 10}
	rep, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PendingKicked != 41 || len(b.msgs) != 41 {
		t.Fatalf("report %+v, %d messages", rep, len(b.msgs))
	}
	pos := -1
	for i, m := range b.msgs {
		if m.Msg.IntentID == quiet.Intent.ID {
			pos = i
			if m.Delay != 0 || m.Msg.Op != OpDispatch {
				t.Fatalf("quiet bot's repair delayed %v op %s", m.Delay, m.Msg.Op)
			}
		}
	}
	if pos < 0 || pos > 1 {
		t.Fatalf("quiet bot's repair is message %d of %d: it queued behind the busy bot's backlog", pos, len(b.msgs))
	}
	var maxDelay time.Duration
	for _, m := range b.msgs {
		maxDelay = max(maxDelay, m.Delay)
	}
	if maxDelay != 3900*time.Millisecond {
		t.Fatalf("busy bot's 40 repairs at 10/s: last delay %v, want 3.9s", maxDelay)
	}
	// Every entry was re-filed past the pacing delay: a second run right
	// away reads nothing and sends nothing.
	b.msgs = nil
	rep, err = s.Run(ctx)
	if err != nil || rep.Read != 0 || len(b.msgs) != 0 {
		t.Fatalf("second run: %+v %v, %d messages", rep, err, len(b.msgs))
	}
	_ = ids
}

type barrierUp struct {
	up    bool
	err   error
	calls int
}

func (b *barrierUp) BarrierUp(context.Context, *Intent) (time.Time, bool, error) {
	b.calls++
	return time.Time{}, b.up, b.err
}

// A claim made while the barrier is up (or unreadable) is given back
// before anything is sent, and the attempt comes back once it may.
func TestClaimBehindBarrierSendsNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		b    *barrierUp
	}{{"raised", &barrierUp{up: true}}, {"unreadable", &barrierUp{err: errors.New("throttled")}}} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(Capabilities{})
			r.d.Barrier = c.b
			in := r.submit(t)
			if err := attemptID(context.Background(), r.d, in.ID, "stream"); err != nil {
				t.Fatal(err)
			}
			got := r.get(t, in.ID)
			if r.prov.sends != 0 || got.Status != StatusRetryableFailure || got.Attempts[0].Result != ResultHeldByBarrier || MayHaveTakenEffect(got) {
				t.Fatalf("sends=%d status=%s attempts=%+v", r.prov.sends, got.Status, got.Attempts)
			}
			c.b.up, c.b.err = false, nil
			r.drain(t)
			if got := r.get(t, in.ID); r.prov.sends != 1 || got.Status != StatusSucceeded {
				t.Fatalf("after the lift: sends=%d status=%s", r.prov.sends, got.Status)
			}
		})
	}
}

// racingStore lets another writer (a late stream record's claim) land
// between the sweeper's read of an intent and its write: the sweeper's
// conditional write then loses.
type racingStore struct {
	*memStore
	race   func(id string) // runs once, between read and write
	before func()          // runs once, before the writer decides
}

func (s *racingStore) Update(ctx context.Context, id string, mutate func(*Intent) error) (*Intent, error) {
	cur, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if b := s.before; b != nil {
		s.before = nil
		b()
	}
	if err := mutate(cur); err != nil {
		return nil, err
	}
	if r := s.race; r != nil {
		s.race = nil
		r(id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.putIfVersion(cur) {
		return nil, fmt.Errorf("intent %s: %w", id, ErrConflict)
	}
	return cur, nil
}

// A claim leaves the repair entry where it is. If the sweeper's re-file of
// that entry loses to the claim and the sweeper still moves its checkpoint
// past the entry, no sweep reads it again: when the claimer then dies, the
// intent stays in-flight for good (chaos seeds 3912877662, 3912877698).
func TestSweeperNeverPassesAnEntryWhoseWriteLostARace(t *testing.T) {
	r := newRig(Capabilities{})
	ctx := context.Background()
	rs := &racingStore{memStore: r.store}
	r.d.Store = rs
	in := r.submit(t) // its stream record is lost: nothing claims it
	r.clock.Advance(5 * time.Minute)
	rs.race = func(id string) {
		// The late record's claim, on another worker that then crashes.
		if _, err := r.store.Update(ctx, id, func(c *Intent) error {
			now := r.clock.Now()
			c.Status, c.AttemptCount, c.UpdatedAt = StatusInFlight, 1, now
			c.Lease = &Lease{Owner: "w2", Since: now, Until: now.Add(r.d.Policy.Lease)}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	r.d.Policy.SweepGrace = 30 * time.Second
	s := &Sweeper{D: r.d, Index: rs, Batch: &batchRec{}}
	rep, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Raced != 1 || rep.PendingKicked != 0 {
		t.Fatalf("first run: %+v, want the one entry raced and nothing sent", rep)
	}
	r.clock.Advance(r.d.Policy.Lease + time.Minute)
	if _, err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := r.store.Get(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status == StatusInFlight {
		t.Fatalf("the dead claimer's intent is still in-flight after its lease ran out: the sweeper passed its entry")
	}
	if n := len(got.Attempts); n != 1 || got.Attempts[0].Result != ResultLeaseExpired {
		t.Fatalf("attempts %+v, want the lease-expired evidence", got.Attempts)
	}
}

// Every entry the sweeper files must be due after the clock of its write:
// a sweeper that started meanwhile moves the checkpoint up to its own clock
// (less Skew), and an entry filed behind that is never read again. A run
// that takes long (a large backlog) must not file entries at its start's
// clock.
func TestSweeperFilesEntriesAfterTheClockOfItsWrite(t *testing.T) {
	r := newRig(Capabilities{})
	ctx := context.Background()
	rs := &racingStore{memStore: r.store}
	r.d.Store = rs
	in := r.submit(t) // its stream record is lost
	r.clock.Advance(5 * time.Minute)
	var writeClock time.Time
	rs.before = func() {
		r.clock.Advance(10 * time.Minute) // the run is slow; other sweepers have moved on
		writeClock = r.clock.Now()
	}
	r.d.Policy.SweepGrace = 30 * time.Second
	s := &Sweeper{D: r.d, Index: rs, Batch: &batchRec{}}
	if _, err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := r.store.Get(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.RepairAt.After(writeClock.Add(-5 * time.Second)) {
		t.Fatalf("entry re-filed at %v, behind the clock of its write %v less Skew", got.RepairAt, writeClock)
	}
}
