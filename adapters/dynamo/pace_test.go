package dynamo

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
)

// The GateStore contract, run against core's in-memory fake and against
// DynamoDB Local: both must behave the same for the dispatcher's gate.
func TestGateStoreContract(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) { gateContract(t, func() gate.GateStore { return gate.NewMemoryGates() }) })
	t.Run("dynamodb", func(t *testing.T) {
		db, table := testTable(t, "gate")
		ctx := context.Background()
		gateContract(t, func() gate.GateStore {
			g := NewGates(db, table)
			g.TidyEvery = time.Millisecond // every reader that finds the gate clean tidies: the races get tried
			return g
		})
		t.Run("tidy leaves the replicas marked while the gate is not clean", func(t *testing.T) {
			g := NewGates(db, table)
			g.TidyEvery = time.Millisecond
			now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
			k := "sandbox#" + t.Name()
			marked := func(what string, want bool) {
				t.Helper()
				for r := 0; r < RegistryShards; r++ {
					out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: gateReplicaKey(k, r), ConsistentRead: aws.Bool(true)})
					if err != nil {
						t.Fatal(err)
					}
					if got := boolAttr(out.Item, "dirty"); got != want {
						t.Fatalf("%s: replica %d dirty=%v, want %v", what, r, got, want)
					}
				}
			}
			marked("new key", false)
			if _, err := g.Failure(ctx, k); err != nil {
				t.Fatal(err)
			}
			marked("a failure streak below the threshold (Admit never reads the count)", false)
			if ok, err := g.Open(ctx, k, now.Add(5*time.Second), false, gate.Event{Kind: core.EventBreakerOpened, At: now}); err != nil || !ok {
				t.Fatalf("open: %v %v", ok, err)
			}
			marked("open", true)
			g.tidy(ctx, k, now)
			marked("tidy while open", true)
			if err := g.Pause(ctx, k, now.Add(10*time.Second)); err != nil {
				t.Fatal(err)
			}
			if ok, err := g.Close(ctx, k, gate.Event{Kind: core.EventBreakerClosed, At: now}); err != nil || !ok {
				t.Fatalf("close: %v %v", ok, err)
			}
			g.tidy(ctx, k, now.Add(10*time.Second))
			marked("tidy as the pause ends (within the settle)", true)
			g.tidy(ctx, k, now.Add(10*time.Second+gate.GateCleanSettle))
			marked("tidy after the pause", false)
			if st, _ := g.State(ctx, k); st.PausedUntil == nil {
				t.Fatal("tidy removed the pause")
			}
		})
		t.Run("failures write no transaction; concurrent first 429s mark the replicas once; concurrent successes reset once", func(t *testing.T) {
			// Cost, not safety: a 17-item transaction is 34 write units on
			// AWS. A failure streak needs no marks at all; a 429 on a clean
			// account does, and every worker that sees it finds the gate
			// unmarked at once.
			db := &gateWriteCounter{API: db}
			g := NewGates(db, table)
			k := "sandbox#" + t.Name()
			run := func(n int, f func(i int)) {
				var wg sync.WaitGroup
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func() { defer wg.Done(); f(i) }()
				}
				wg.Wait()
			}
			run(6, func(int) {
				if _, err := g.Failure(ctx, k); err != nil {
					t.Error(err)
				}
			})
			if got := db.transactions.Load(); got != 0 {
				t.Fatalf("6 failures committed %d transactions, want 0", got)
			}
			pause := time.Now().Add(time.Hour)
			run(6, func(i int) {
				if err := g.Pause(ctx, k, pause.Add(time.Duration(i)*time.Second)); err != nil {
					t.Error(err)
				}
			})
			if got := db.transactions.Load(); got != 1 {
				t.Fatalf("6 concurrent first 429s committed %d marking transactions, want 1", got)
			}
			if st, _ := g.State(ctx, k); st.PausedUntil == nil || !st.PausedUntil.Equal(pause.Add(5*time.Second).UTC().Truncate(time.Millisecond)) && !st.PausedUntil.Equal(pause.Add(5*time.Second)) {
				t.Fatalf("paused until %v, want the latest (%v)", st.PausedUntil, pause.Add(5*time.Second))
			}
			db.updates.Store(0)
			run(6, func(int) {
				if _, err := g.Close(ctx, k, gate.Event{At: time.Now()}); err != nil {
					t.Error(err)
				}
			})
			if got, tx := db.updates.Load(), db.transactions.Load(); got != 1 || tx != 1 {
				t.Fatalf("6 concurrent successes after a streak committed %d writes and %d more transactions, want 1 and 0", got, tx-1)
			}
			if st, _ := g.State(ctx, k); st.Breaker.Failures != 0 {
				t.Fatalf("streak not ended: %+v", st.Breaker)
			}
		})
	})
}

// gateWriteCounter counts the writes that commit.
type gateWriteCounter struct {
	API
	transactions, updates atomic.Int64
}

func (c *gateWriteCounter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := c.API.TransactWriteItems(ctx, in, o...)
	if err == nil {
		c.transactions.Add(1)
	}
	return out, err
}

func (c *gateWriteCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.API.UpdateItem(ctx, in, o...)
	if err == nil {
		c.updates.Add(1)
	}
	return out, err
}

func gateContract(t *testing.T, newStore func() gate.GateStore) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	key := func(t *testing.T) string { return "sandbox#" + t.Name() }

	take := func(t *testing.T, g gate.GateStore, k string, r gate.SlotTake) (time.Time, gate.GateState, bool) {
		t.Helper()
		slot, st, dup, err := g.Take(ctx, k, r)
		if err != nil {
			t.Fatal(err)
		}
		return slot, st, dup
	}
	at := func(d time.Duration) time.Time { return now.Add(d) }
	ms := time.Millisecond

	t.Run("take hands out consecutive slots and restarts a counter behind its floor at At", func(t *testing.T) {
		g, k := newStore(), key(t)
		for i, c := range []struct {
			floor, at, want time.Duration
		}{
			{0, 0, 0},                      // a new key is idle: At
			{0, 0, 50 * ms},                // busy: the counter
			{0, time.Hour, 100 * ms},       // busy: At does not matter
			{-time.Hour, 0, 150 * ms},      // a floor far behind never restarts it
			{200 * ms, 200 * ms, 200 * ms}, // floor at the counter: still busy
			{time.Hour, time.Hour, time.Hour},
			{time.Hour + 50*ms, time.Hour, time.Hour + 50*ms},
		} {
			slot, st, dup := take(t, g, k, gate.SlotTake{Interval: 50 * ms, Floor: at(c.floor), At: at(c.at)})
			if dup || !slot.Equal(at(c.want)) || st.Breaker.Open || st.PausedUntil != nil {
				t.Fatalf("take %d: slot %v (want %v) dup %v state %+v", i, slot.Sub(now), c.want, dup, st)
			}
		}
	})

	t.Run("a take that could move the counter back is refused", func(t *testing.T) {
		g, k := newStore(), key(t)
		take(t, g, k, gate.SlotTake{Interval: time.Second, Floor: now, At: now})
		_, _, _, err := g.Take(ctx, k, gate.SlotTake{Interval: 50 * ms, Floor: at(2 * time.Second), At: now})
		if !errors.Is(err, gate.ErrInvalidTake) {
			t.Fatalf("err %v, want ErrInvalidTake", err)
		}
		if slot, _, _ := take(t, g, k, gate.SlotTake{Interval: 50 * ms, Floor: now, At: now}); !slot.Equal(at(time.Second)) {
			t.Fatalf("the refused take moved the counter: next slot %v", slot.Sub(now))
		}
	})

	t.Run("concurrent takes never share a slot", func(t *testing.T) {
		g, k := newStore(), key(t)
		var mu sync.Mutex
		seen := map[time.Time]bool{}
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 5; i++ {
					// Every take's floor is now: the first ones race to
					// restart the new key; one wins, the rest take after it.
					slot, _, _, err := g.Take(ctx, k, gate.SlotTake{Interval: ms, Floor: now, At: now})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if seen[slot] {
						t.Errorf("slot %v handed out twice", slot)
					}
					seen[slot] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(seen) != 40 || !seen[now] || !seen[at(39*ms)] {
			t.Fatalf("%d slots", len(seen))
		}
	})

	t.Run("a claim takes at most one slot until its window ends, busy or idle", func(t *testing.T) {
		g, k := newStore(), key(t)
		until := at(30 * time.Second)
		claim := func(c string, floor, atT time.Time, until time.Time) gate.SlotTake {
			return gate.SlotTake{Interval: 50 * ms, Floor: floor, At: atT, Claim: c, Until: until}
		}
		if slot, _, dup := take(t, g, k, claim("i-1#0", now, now, until)); dup || !slot.Equal(now) {
			t.Fatalf("first claim: slot %v dup %v", slot, dup)
		}
		// Its duplicates, concurrently, on a busy counter and on one they
		// find behind their floor: none takes a slot.
		var wg sync.WaitGroup
		var mu sync.Mutex
		dups := 0
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				floor := now
				if w%2 == 1 {
					floor = at(time.Second) // the counter (+50ms) is behind it
				}
				_, _, dup, err := g.Take(ctx, k, claim("i-1#0", floor, at(time.Second), until))
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				if dup {
					dups++
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		if dups != 4 {
			t.Fatalf("%d of 4 repeats turned away", dups)
		}
		// Another claim (another intent, or the next attempt) gets the next slot.
		if slot, _, dup := take(t, g, k, claim("i-1#1", now, now, until)); dup || !slot.Equal(at(50*ms)) {
			t.Fatalf("next attempt: slot %v dup %v", slot, dup)
		}
		// After the window the same claim takes again (a crashed holder is repaired).
		if slot, _, dup := take(t, g, k, claim("i-1#0", now, until, until.Add(30*time.Second))); dup || !slot.Equal(at(100*ms)) {
			t.Fatalf("after the window: slot %v dup %v", slot, dup)
		}
	})

	t.Run("pause is never shortened and pushes the slots past it", func(t *testing.T) {
		g, k := newStore(), key(t)
		take(t, g, k, gate.SlotTake{Floor: now, At: now})
		if err := g.Pause(ctx, k, now.Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := g.Pause(ctx, k, now.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		st, err := g.State(ctx, k)
		if err != nil || st.PausedUntil == nil || !st.PausedUntil.Equal(now.Add(5*time.Second)) {
			t.Fatalf("paused until %v (%v)", st.PausedUntil, err)
		}
		slot, st, _ := take(t, g, k, gate.SlotTake{Interval: time.Second, Floor: now, At: now})
		if !slot.Equal(now.Add(5*time.Second)) || !st.PausedUntil.Equal(now.Add(5*time.Second)) {
			t.Fatalf("slot after pause %v", slot)
		}
	})

	t.Run("breaker: failures, one open, one probe, reopen, close", func(t *testing.T) {
		g, k := newStore(), key(t)
		for i := 1; i <= 3; i++ {
			st, err := g.Failure(ctx, k)
			if err != nil || st.Breaker.Failures != i {
				t.Fatalf("failure %d: %+v %v", i, st.Breaker, err)
			}
		}
		ev := gate.Event{Kind: core.EventBreakerOpened, Provider: "sandbox", Account: "a", At: now, Detail: "3 failures"}
		if ok, err := g.Open(ctx, k, now.Add(10*time.Second), false, ev); err != nil || !ok {
			t.Fatalf("open: %v %v", ok, err)
		}
		if ok, _ := g.Open(ctx, k, now.Add(10*time.Second), false, ev); ok {
			t.Fatal("an open breaker opened twice")
		}
		st, _ := g.State(ctx, k)
		if !st.Breaker.Open || st.Breaker.Opens != 1 || !st.Breaker.OpenUntil.Equal(now.Add(10*time.Second)) || !st.Breaker.OpenedAt.Equal(now) {
			t.Fatalf("open state %+v", st.Breaker)
		}
		if ok, _ := g.TakeProbe(ctx, k, now.Add(5*time.Second), now.Add(8*time.Second)); ok {
			t.Fatal("probe during the cooldown")
		}
		if ok, err := g.TakeProbe(ctx, k, now.Add(10*time.Second), now.Add(15*time.Second)); err != nil || !ok {
			t.Fatalf("probe at cooldown end: %v %v", ok, err)
		}
		if ok, _ := g.TakeProbe(ctx, k, now.Add(11*time.Second), now.Add(16*time.Second)); ok {
			t.Fatal("a second probe while the first is out")
		}
		if ok, err := g.Open(ctx, k, now.Add(40*time.Second), true, gate.Event{}); err != nil || !ok {
			t.Fatalf("reopen: %v %v", ok, err)
		}
		st, _ = g.State(ctx, k)
		if st.Breaker.Opens != 2 || st.Breaker.ProbeUntil != nil || !st.Breaker.OpenUntil.Equal(now.Add(40*time.Second)) {
			t.Fatalf("after reopen %+v", st.Breaker)
		}
		closeEv := gate.Event{Kind: core.EventBreakerClosed, Provider: "sandbox", Account: "a", At: now.Add(41 * time.Second), Detail: "ok"}
		if ok, err := g.Close(ctx, k, closeEv); err != nil || !ok {
			t.Fatalf("close: %v %v", ok, err)
		}
		if ok, _ := g.Close(ctx, k, closeEv); ok {
			t.Fatal("closed twice")
		}
		st, _ = g.State(ctx, k)
		if st.Breaker.Open || st.Breaker.Failures != 0 || st.Breaker.Opens != 0 || st.Breaker.OpenUntil != nil || st.Breaker.ClosedAt == nil {
			t.Fatalf("closed state %+v", st.Breaker)
		}
		evs, err := g.Events(ctx, k, 10)
		if err != nil || len(evs) != 2 || evs[0].Kind != core.EventBreakerClosed || evs[1].Kind != core.EventBreakerOpened || evs[1].Detail != "3 failures" || !evs[1].At.Equal(now) {
			t.Fatalf("events %+v (%v)", evs, err)
		}
		if ok, _ := g.Open(ctx, k, now, true, gate.Event{}); ok {
			t.Fatal("reopen of a closed breaker")
		}
	})

	t.Run("concurrent failures on a clean gate are each counted once, and concurrent successes end the streak", func(t *testing.T) {
		g, k := newStore(), key(t)
		const n = 8
		counts := make(chan int, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := g.Failure(ctx, k)
				if err != nil {
					t.Error(err)
				}
				counts <- st.Breaker.Failures
			}()
		}
		wg.Wait()
		close(counts)
		// Each caller sees at least its own count (the marking one reads the
		// gate after its transaction), and one of them sees all n: that one
		// opens the breaker.
		most := 0
		for c := range counts {
			if c < 1 || c > n {
				t.Fatalf("a failure saw count %d of %d", c, n)
			}
			most = max(most, c)
		}
		st, _ := g.State(ctx, k)
		if st.Breaker.Failures != n || most != n {
			t.Fatalf("after %d concurrent failures: gate %d, highest count seen %d", n, st.Breaker.Failures, most)
		}
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if ok, err := g.Close(ctx, k, gate.Event{At: now}); ok || err != nil {
					t.Errorf("close of a closed breaker: %v %v", ok, err)
				}
			}()
		}
		wg.Wait()
		if st, _ := g.State(ctx, k); st.Breaker.Failures != 0 || st.Breaker.Open {
			t.Fatalf("after concurrent successes %+v", st.Breaker)
		}
		if evs, _ := g.Events(ctx, k, 10); len(evs) != 0 {
			t.Fatalf("events %+v", evs)
		}
	})

	t.Run("close of a closed breaker resets failures only", func(t *testing.T) {
		g, k := newStore(), key(t)
		_, _ = g.Failure(ctx, k)
		if ok, err := g.Close(ctx, k, gate.Event{At: now}); ok || err != nil {
			t.Fatalf("%v %v", ok, err)
		}
		st, _ := g.State(ctx, k)
		if st.Breaker.Failures != 0 {
			t.Fatalf("%+v", st.Breaker)
		}
		if evs, _ := g.Events(ctx, k, 10); len(evs) != 0 {
			t.Fatalf("events %+v", evs)
		}
	})

	t.Run("an attempt's read (StateFor, any intent) admits exactly what the gate admits, after every change", func(t *testing.T) {
		g, k := newStore(), key(t)
		ids := make([]string, 48) // enough ids to land on every replica
		for i := range ids {
			ids[i] = fmt.Sprintf("it_%02d", i)
		}
		check := func(what string, at time.Time) {
			t.Helper()
			own, err := g.State(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			want := gate.Admit(at, 0, own, at, 0)
			for _, id := range ids {
				st, err := g.StateFor(ctx, k, id, at)
				if err != nil {
					t.Fatalf("%s: %s: %v", what, id, err)
				}
				if got := gate.Admit(at, 0, st, at, 0); got != want {
					t.Fatalf("%s: intent %s reads %+v and gets %+v; the gate (%+v) says %+v", what, id, st, got, own, want)
				}
				if st.Override != nil || own.Override != nil {
					if st.Override == nil || own.Override == nil || *st.Override != *own.Override {
						t.Fatalf("%s: intent %s reads override %+v, the gate holds %+v", what, id, st.Override, own.Override)
					}
				}
				// The failure count may read as zero from a replica: Admit
				// never reads it, and successes learn of a streak from the
				// worker that counted it (gate.EndsStreak).
			}
		}
		check("new key", now)
		if _, err := g.Failure(ctx, k); err != nil {
			t.Fatal(err)
		}
		check("a failure streak runs", now)
		if _, err := g.Failure(ctx, k); err != nil {
			t.Fatal(err)
		}
		if ok, err := g.Open(ctx, k, now.Add(10*time.Second), false, gate.Event{Kind: core.EventBreakerOpened, At: now}); err != nil || !ok {
			t.Fatalf("open: %v %v", ok, err)
		}
		check("open", now.Add(time.Second))
		check("cooldown over: half-open", now.Add(10*time.Second))
		if ok, err := g.TakeProbe(ctx, k, now.Add(10*time.Second), now.Add(15*time.Second)); err != nil || !ok {
			t.Fatalf("probe: %v %v", ok, err)
		}
		check("probe out", now.Add(11*time.Second))
		if ok, err := g.Open(ctx, k, now.Add(30*time.Second), true, gate.Event{}); err != nil || !ok {
			t.Fatalf("reopen: %v %v", ok, err)
		}
		check("reopened", now.Add(12*time.Second))
		if ok, err := g.Close(ctx, k, gate.Event{Kind: core.EventBreakerClosed, At: now.Add(31 * time.Second)}); err != nil || !ok {
			t.Fatalf("close: %v %v", ok, err)
		}
		check("closed", now.Add(31*time.Second))
		check("closed, replicas tidied", now.Add(31*time.Second))
		// The breaker opens straight from a clean gate (a streak reset and
		// tidied between the N-th failure and the open).
		if ok, err := g.Open(ctx, k, now.Add(60*time.Second), false, gate.Event{Kind: core.EventBreakerOpened, At: now.Add(32 * time.Second)}); err != nil || !ok {
			t.Fatalf("open from clean: %v %v", ok, err)
		}
		check("opened from a clean gate", now.Add(33*time.Second))
		if ok, err := g.Close(ctx, k, gate.Event{Kind: core.EventBreakerClosed, At: now.Add(61 * time.Second)}); err != nil || !ok {
			t.Fatalf("close: %v %v", ok, err)
		}
		check("closed again", now.Add(62*time.Second))
		if err := g.Pause(ctx, k, now.Add(70*time.Second)); err != nil {
			t.Fatal(err)
		}
		check("paused", now.Add(63*time.Second))
		check("pause over", now.Add(72*time.Second))
		o := &gate.PaceOverride{Pace: gate.Pace{Rate: 3, Per: time.Second, Burst: 1}, Reason: "asked", By: "ann", At: now}
		if err := g.SetOverride(ctx, k, o); err != nil {
			t.Fatal(err)
		}
		check("operator's pace", now.Add(73*time.Second))
		if err := g.SetOverride(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
		check("operator's pace removed", now.Add(74*time.Second))
		if _, err := g.Failure(ctx, k); err != nil {
			t.Fatal(err)
		}
		check("a second streak", now.Add(75*time.Second))
		if _, err := g.Close(ctx, k, gate.Event{At: now.Add(76 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		check("second streak reset", now.Add(76*time.Second))
	})

	t.Run("no attempt's read says closed while the gate is open, with tidies racing every open", func(t *testing.T) {
		// Readers (attempts of many intents) read all the time, tidying the
		// replicas whenever the gate is clean; the writer runs streaks that
		// open the breaker and closes it again. A read that starts after an
		// open returned and ends before the close starts must see it open:
		// that attempt would otherwise send into an open breaker.
		g, k := newStore(), key(t)
		const rounds, readers = 12, 6
		type span struct{ from, to time.Time }
		var mu sync.Mutex
		var opens []span
		type read struct {
			from, to time.Time
			open     bool
		}
		var reads []read
		var done atomic.Bool
		var nreads, nclean atomic.Int64
		var wg sync.WaitGroup
		for r := 0; r < readers; r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				for i := 0; !done.Load(); i++ {
					from := time.Now()
					st, err := g.StateFor(ctx, k, fmt.Sprintf("it_%d_%d", r, i), now)
					to := time.Now()
					if err != nil {
						t.Error(err)
						return
					}
					if gate.CleanGate(st, now) {
						nclean.Add(1)
					}
					nreads.Add(1)
					mu.Lock()
					reads = append(reads, read{from, to, st.Breaker.Open})
					mu.Unlock()
				}
			}(r)
		}
		waitReads := func(n int64, clean bool) {
			t.Helper()
			base, baseClean := nreads.Load(), nclean.Load()
			deadline := time.Now().Add(20 * time.Second)
			for nreads.Load() < base+n || (clean && nclean.Load() < baseClean+n) {
				if time.Now().After(deadline) {
					t.Fatalf("readers stalled (%d reads, %d clean)", nreads.Load()-base, nclean.Load()-baseClean)
				}
				runtime.Gosched()
			}
		}
		for round := 0; round < rounds && !t.Failed(); round++ {
			waitReads(readers, true) // the gate is clean and read as clean
			for i := 0; i < 2; i++ {
				if _, err := g.Failure(ctx, k); err != nil {
					t.Fatal(err)
				}
			}
			ok, err := g.Open(ctx, k, now.Add(time.Hour), false, gate.Event{Kind: core.EventBreakerOpened, At: now.Add(time.Duration(round) * time.Second)})
			if err != nil || !ok {
				t.Fatalf("round %d: open: %v %v", round, ok, err)
			}
			opened := time.Now()
			waitReads(2*readers, false)
			closing := time.Now()
			if ok, err := g.Close(ctx, k, gate.Event{Kind: core.EventBreakerClosed, At: now.Add(time.Duration(round)*time.Second + time.Millisecond)}); err != nil || !ok {
				t.Fatalf("round %d: close: %v %v", round, ok, err)
			}
			mu.Lock()
			opens = append(opens, span{opened, closing})
			mu.Unlock()
		}
		done.Store(true)
		wg.Wait()
		inside := 0
		for _, rd := range reads {
			for _, o := range opens {
				if rd.from.After(o.from) && rd.to.Before(o.to) {
					inside++
					if !rd.open {
						t.Fatalf("a read from +%v to +%v of an open spell read the breaker closed", rd.from.Sub(o.from), rd.to.Sub(o.from))
					}
				}
			}
		}
		if inside < rounds*readers {
			t.Fatalf("only %d reads fell inside the open spells", inside)
		}
	})

	t.Run("override round-trips and comes back with a reservation", func(t *testing.T) {
		g, k := newStore(), key(t)
		o := &gate.PaceOverride{Pace: gate.Pace{Rate: 3, Per: time.Second, Burst: 2}, Reason: "asked", By: "ann", At: now}
		if err := g.SetOverride(ctx, k, o); err != nil {
			t.Fatal(err)
		}
		_, st, _ := take(t, g, k, gate.SlotTake{Interval: time.Second, Floor: now, At: now})
		if st.Override == nil || *st.Override != *o {
			t.Fatalf("override %+v", st.Override)
		}
		if err := g.SetOverride(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
		if st, _ := g.State(ctx, k); st.Override != nil {
			t.Fatalf("override not removed %+v", st.Override)
		}
	})
}

// An unpaced attempt's read lands on the replica of its intent's shard:
// the reads of many intents spread over every replica, none on the gate.
func TestGateStateReadsSpreadOverReplicas(t *testing.T) {
	t.Parallel()
	client, table := testTable(t, "gate_spread")
	db := &recordingDB{Client: client, got: map[string]int{}}
	g := NewGates(db, table)
	ctx := context.Background()
	key := gate.GateKey("sandbox", "acct-spread")
	const n = 640 // 40 per replica on average
	for i := 0; i < n; i++ {
		st, err := g.StateFor(ctx, key, fmt.Sprintf("it_%d", i), time.Now())
		if err != nil || !gate.CleanGate(st, time.Now()) {
			t.Fatalf("read %d: %+v %v", i, st, err)
		}
	}
	seen := db.got
	if seen[GatePK(key)] != 0 {
		t.Fatalf("a clean gate was read %d times itself", seen[GatePK(key)])
	}
	if len(seen) != RegistryShards {
		t.Fatalf("%d items read (%v), want the %d replicas", len(seen), seen, RegistryShards)
	}
	for pk, k := range seen {
		if k > 2*n/RegistryShards {
			t.Fatalf("%s read %d of %d times", pk, k, n)
		}
	}
}
