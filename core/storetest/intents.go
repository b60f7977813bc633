// Package storetest holds the contract suites of the stores core consumes.
// Every implementation runs the same suite: the in-memory stores core's unit
// tests use (core/store_contract_test.go) and the DynamoDB adapter on
// DynamoDB Local (adapters/dynamo/contract_test.go). A store that passes
// here behaves as core's tests assume.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

// IntentFixture builds a fresh, empty store for one subtest.
type IntentFixture struct {
	New func(t *testing.T) core.IntentStore
	// Barrier, when the store has one, raises (up=true) or lifts the backup
	// barrier of a bot's profile; nil skips the barrier cases.
	Barrier func(t *testing.T, s core.IntentStore, bot string, up bool)
	// HumanShard, when the store shards its needs-human listing, names the
	// shard of an intent id, so the listing case can put several intents on
	// each of several shards (nil: one shard).
	HumanShard func(id string) int
}

// store builds a fresh store and returns its write named op ("Update" or
// "Claim").
func (f IntentFixture) store(t *testing.T, op string) (core.IntentStore, func(context.Context, string, func(*core.Intent) error) (*core.Intent, error)) {
	s := f.New(t)
	if op == "Claim" {
		return s, s.Claim
	}
	return s, s.Update
}

// NeedsHumanLister is the admin list of intents waiting for a human, oldest
// hand-off first, paged with an opaque cursor ("" when there is no next page).
type NeedsHumanLister interface {
	ListPage(ctx context.Context, status core.Status, cursor string, limit int) ([]*core.Intent, string, error)
}

// T0 is the suite's reference time (UTC, no monotonic reading, so stored
// and read-back times compare equal).
var T0 = time.Date(2026, 3, 4, 5, 6, 7, 891000000, time.UTC)

func tp(d time.Duration) *time.Time { t := T0.Add(d); return &t }

// FullIntent is an intent with every field set, so a round trip shows a
// field the store drops.
func FullIntent(id, bot string) *core.Intent {
	return &core.Intent{
		ID: id, Bot: bot, IdempotencyKey: "key-" + id, Kind: core.KindReply, Provider: "sandbox", Account: "acct-1",
		Action: "send_message", Target: "chan-1", Payload: json.RawMessage(`{"text":"hi"}`), PayloadHash: "ph", RequestHash: "rh",
		Source: &core.SourceRef{ID: "src-1", Revision: 3}, Grant: core.GrantRef{ID: "g-1", Version: 2}, Deadline: tp(time.Hour),
		Metadata: json.RawMessage(`{"m":1}`), Status: core.StatusNeedsHuman, StatusReason: "why", Version: 7, CreatedAt: T0,
		UpdatedAt: T0.Add(time.Minute), AttemptCount: 2, FirstAttemptAt: tp(time.Second), Lease: &core.Lease{Owner: "w1", Since: T0.Add(90 * time.Second), Until: T0.Add(2 * time.Minute)},
		NextAttemptAt: tp(3 * time.Minute), ExternalID: "ext-1",
		Attempts: []core.Attempt{
			{N: 1, Trigger: "stream", StartedAt: T0, EndedAt: T0.Add(time.Second), Result: "transient", Evidence: core.Evidence{HTTPStatus: 503, ProviderCode: "busy", Detail: "d", RetryAfter: "2", Extra: map[string]string{"a": "b"}},
				Checks: &core.Checks{Result: "ok", Reason: "r", SourceRevision: 3, GrantVersion: 2}, NextDueAt: tp(10 * time.Second)},
			{N: 2, Trigger: "retry", StartedAt: T0.Add(20 * time.Second), EndedAt: T0.Add(21 * time.Second), Result: "unknown-outcome", ExternalID: "ext-0"},
		},
		Resolutions: []core.Resolution{{At: T0.Add(time.Hour), By: "op", ByKind: "operator", Decision: "retry", Reason: "r", Recommend: true, Key: "idem-1", DuplicateRiskAccepted: true}},
		PayloadRef:  "payloads/sha256/00",
		History: &core.HistorySummary{Pages: 2, SpilledAttempts: 24, SpilledResolutions: 12, Uncertain: true, Delivery: core.DeliveryRead, Echo: true,
			Ack:          &core.Attempt{N: 1, Trigger: core.TriggerWebhook, StartedAt: T0, EndedAt: T0, Result: core.ResultAck, ExternalID: "m-1", Evidence: core.Evidence{ProviderCode: "sent"}},
			LastDecision: &core.Resolution{At: T0, By: "op", ByKind: "operator", Decision: "retry", Key: "k"}},
	}
}

// PendingIntent is a fresh intent as intake creates it.
func PendingIntent(id, bot string) *core.Intent {
	return &core.Intent{ID: id, Bot: bot, IdempotencyKey: "key-" + id, Kind: core.KindAction, Provider: "sandbox", Account: "acct-1",
		Action: "send_message", Target: "chan-1", Payload: json.RawMessage(`{"text":"x"}`), Grant: core.GrantRef{ID: "g-1", Version: 1},
		Status: core.StatusPending, Version: 1, CreatedAt: T0, UpdatedAt: T0, Attempts: []core.Attempt{}}
}

// SameIntent fails the test unless got and want hold the same facts (an
// empty and a nil list are the same).
func SameIntent(t *testing.T, what string, got, want *core.Intent) {
	t.Helper()
	g, w := *got, *want
	// RepairAt is the store's repair-index due time, decided by
	// core.NextRepairCheck; the repair cases below check it.
	g.RepairAt, w.RepairAt = time.Time{}, time.Time{}
	// EndedAt and ExpiresAt are stamped by the store's write with
	// retention.ApplyRetention (its own rule and table test; the dynamo store's
	// TestTerminalWriteCarriesTheTTL checks the stored attribute).
	g.EndedAt, w.EndedAt = nil, nil
	g.ExpiresAt, w.ExpiresAt = time.Time{}, time.Time{}
	if len(g.Attempts) == 0 {
		g.Attempts = nil
	}
	if len(w.Attempts) == 0 {
		w.Attempts = nil
	}
	if !reflect.DeepEqual(&g, &w) {
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		t.Fatalf("%s: stored intent differs\n got: %+v\nwant: %+v\n got json: %s\nwant json: %s", what, g, w, gb, wb)
	}
}

var errMutate = errors.New("mutate refuses")

// claimFor is the claim core's dispatcher makes: pending -> in flight under
// a lease held by owner.
func claimFor(owner string) func(*core.Intent) error {
	return func(in *core.Intent) error {
		if !in.Claimable(T0) {
			return core.ErrNotClaimable
		}
		in.Status = core.StatusInFlight
		in.AttemptCount++
		in.FirstAttemptAt = tp(0)
		in.Lease = &core.Lease{Owner: owner, Until: T0.Add(time.Minute)}
		in.UpdatedAt = T0
		return nil
	}
}

// RunIntentStore runs the IntentStore contract.
func RunIntentStore(t *testing.T, f IntentFixture) {
	ctx := context.Background()
	create := func(t *testing.T, s core.IntentStore, in *core.Intent) {
		t.Helper()
		if _, created, err := s.Create(ctx, in); err != nil || !created {
			t.Fatalf("create %s: created=%v err=%v", in.ID, created, err)
		}
	}
	get := func(t *testing.T, s core.IntentStore, id string) *core.Intent {
		t.Helper()
		in, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return in
	}

	t.Run("create then get returns every field", func(t *testing.T) {
		s := f.New(t)
		want := FullIntent("it_full", "bot-a")
		create(t, s, want)
		SameIntent(t, "round trip", get(t, s, want.ID), FullIntent("it_full", "bot-a"))
	})

	t.Run("a conflicting create returns the existing intent and writes nothing", func(t *testing.T) {
		s := f.New(t)
		first := PendingIntent("it_c", "bot-a")
		create(t, s, first)
		other := FullIntent("it_c", "bot-b")
		ex, created, err := s.Create(ctx, other)
		if err != nil || created {
			t.Fatalf("second create: created=%v err=%v, want created=false and no error", created, err)
		}
		SameIntent(t, "returned existing", ex, PendingIntent("it_c", "bot-a"))
		SameIntent(t, "stored", get(t, s, "it_c"), PendingIntent("it_c", "bot-a"))
	})

	t.Run("missing intents are ErrNotFound", func(t *testing.T) {
		s := f.New(t)
		if _, err := s.Get(ctx, "it_missing"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("Get: %v, want ErrNotFound", err)
		}
		called := false
		mut := func(*core.Intent) error { called = true; return nil }
		if _, err := s.Update(ctx, "it_missing", mut); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("Update: %v, want ErrNotFound", err)
		}
		if _, err := s.Claim(ctx, "it_missing", mut); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("Claim: %v, want ErrNotFound", err)
		}
		if called {
			t.Fatal("mutate was called for a missing intent")
		}
		if _, err := s.Get(ctx, "it_missing"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("after Update/Claim of a missing intent, Get: %v, want ErrNotFound (nothing created)", err)
		}
	})

	t.Run("update writes the mutation and advances the version by one", func(t *testing.T) {
		s := f.New(t)
		create(t, s, PendingIntent("it_u", "bot-a"))
		got, err := s.Update(ctx, "it_u", func(in *core.Intent) error {
			in.Status, in.StatusReason = core.StatusExpired, "deadline"
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := PendingIntent("it_u", "bot-a")
		want.Status, want.StatusReason, want.Version = core.StatusExpired, "deadline", 2
		SameIntent(t, "returned", got, want)
		SameIntent(t, "stored", get(t, s, "it_u"), want)
	})

	for _, op := range []string{"Update", "Claim"} {
		t.Run("a mutate error writes nothing ("+op+")", func(t *testing.T) {
			s, write := f.store(t, op)
			create(t, s, PendingIntent("it_e", "bot-a"))
			_, err := write(ctx, "it_e", func(in *core.Intent) error {
				in.Status, in.AttemptCount = core.StatusInFlight, 9
				return fmt.Errorf("wrapped: %w", errMutate)
			})
			if !errors.Is(err, errMutate) {
				t.Fatalf("%s: %v, want the mutate error", op, err)
			}
			SameIntent(t, "stored", get(t, s, "it_e"), PendingIntent("it_e", "bot-a"))
		})
	}

	for _, op := range []string{"Update", "Claim"} {
		t.Run("a lost race is ErrConflict and the winner's write stands ("+op+")", func(t *testing.T) {
			s, write := f.store(t, op)
			create(t, s, PendingIntent("it_r", "bot-a"))
			competitors := 0
			_, err := write(ctx, "it_r", func(in *core.Intent) error {
				// Every time this writer decides, another writer gets in first.
				competitors++
				if _, err := s.Update(ctx, "it_r", func(c *core.Intent) error {
					c.StatusReason = fmt.Sprintf("competitor %d", competitors)
					return nil
				}); err != nil {
					return fmt.Errorf("competitor: %w", err)
				}
				in.Status, in.StatusReason = core.StatusInFlight, "loser"
				return nil
			})
			if !errors.Is(err, core.ErrConflict) {
				t.Fatalf("%s: %v, want ErrConflict", op, err)
			}
			got := get(t, s, "it_r")
			if got.Status != core.StatusPending || got.StatusReason != fmt.Sprintf("competitor %d", competitors) || got.Version != int64(1+competitors) {
				t.Fatalf("stored %s/%q version %d; want pending, the last competitor's write (%d) and version %d", got.Status, got.StatusReason, got.Version, competitors, 1+competitors)
			}
		})
	}

	t.Run("20 parallel claims: exactly one wins", func(t *testing.T) {
		s := f.New(t)
		create(t, s, PendingIntent("it_p", "bot-a"))
		var wg sync.WaitGroup
		errs := make([]error, 20)
		start := make(chan struct{})
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = s.Claim(ctx, "it_p", claimFor(fmt.Sprintf("w%d", i)))
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("claims %d and %d both won", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, core.ErrNotClaimable) && !errors.Is(err, core.ErrConflict):
				t.Fatalf("claim %d lost with %v, want ErrNotClaimable or ErrConflict", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no claim won")
		}
		got := get(t, s, "it_p")
		if got.Status != core.StatusInFlight || got.AttemptCount != 1 || got.Lease == nil || got.Lease.Owner != fmt.Sprintf("w%d", winner) || got.Version != 2 {
			t.Fatalf("stored %s attempt %d lease %+v version %d; want in-flight, attempt 1, held by w%d, version 2", got.Status, got.AttemptCount, got.Lease, got.Version, winner)
		}
	})

	t.Run("claim, then the outcome is written on the claimed state", func(t *testing.T) {
		s := f.New(t)
		create(t, s, PendingIntent("it_o", "bot-a"))
		claimed, err := s.Claim(ctx, "it_o", claimFor("w1"))
		if err != nil {
			t.Fatal(err)
		}
		if claimed.Version != 2 || claimed.Status != core.StatusInFlight {
			t.Fatalf("claim returned %s version %d", claimed.Status, claimed.Version)
		}
		// A second claim of an in-flight intent is refused by its mutate and
		// changes nothing.
		if _, err := s.Claim(ctx, "it_o", claimFor("w2")); !errors.Is(err, core.ErrNotClaimable) {
			t.Fatalf("second claim: %v, want ErrNotClaimable", err)
		}
		stored, err := s.Update(ctx, "it_o", func(in *core.Intent) error {
			if in.Lease == nil || in.Lease.Owner != "w1" || in.AttemptCount != 1 {
				return fmt.Errorf("outcome sees lease %+v attempt %d, not the claim", in.Lease, in.AttemptCount)
			}
			in.Attempts = append(in.Attempts, core.Attempt{N: 1, Trigger: "stream", StartedAt: T0, EndedAt: T0.Add(time.Second), Result: "succeeded", ExternalID: "ext-9"})
			in.Status, in.Lease, in.ExternalID, in.UpdatedAt = core.StatusSucceeded, nil, "ext-9", T0.Add(time.Second)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := PendingIntent("it_o", "bot-a")
		want.Status, want.Version, want.AttemptCount, want.FirstAttemptAt, want.ExternalID, want.UpdatedAt = core.StatusSucceeded, 3, 1, tp(0), "ext-9", T0.Add(time.Second)
		want.Attempts = []core.Attempt{{N: 1, Trigger: "stream", StartedAt: T0, EndedAt: T0.Add(time.Second), Result: "succeeded", ExternalID: "ext-9"}}
		SameIntent(t, "returned", stored, want)
		SameIntent(t, "stored", get(t, s, "it_o"), want)
	})

	t.Run("the repair entry: due after intake, left by the claim and outcomes, moved by a human hand-off", func(t *testing.T) {
		s := f.New(t)
		create(t, s, PendingIntent("it_r", "bot-a"))
		due := get(t, s, "it_r").RepairAt
		if due.IsZero() {
			t.Fatal("a new pending intent has no repair entry")
		}
		if _, err := s.Claim(ctx, "it_r", claimFor("w1")); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, "it_r").RepairAt; !got.Equal(due) {
			t.Fatalf("the claim moved the repair entry: %v -> %v", due, got)
		}
		// A retry due before the entry: the entry already bounds the
		// recovery of a lost retry message (core.RetryEntryBounds).
		if _, err := s.Update(ctx, "it_r", func(in *core.Intent) error {
			in.Status, in.Lease, in.UpdatedAt, in.NextAttemptAt = core.StatusRetryableFailure, nil, T0.Add(time.Second), tp(2*time.Second)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, "it_r").RepairAt; !got.Equal(due) {
			t.Fatalf("a retryable outcome moved the repair entry: %v -> %v", due, got)
		}
		if _, err := s.Update(ctx, "it_r", func(in *core.Intent) error {
			in.Status, in.Lease, in.UpdatedAt = core.StatusNeedsHuman, nil, T0.Add(time.Minute)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, "it_r").RepairAt; !got.Equal(T0.Add(time.Minute)) {
			t.Fatalf("handed to a human: listed at %v, want %v", got, T0.Add(time.Minute))
		}
		if _, err := s.Update(ctx, "it_r", func(in *core.Intent) error {
			in.Status, in.UpdatedAt = core.StatusAbandoned, T0.Add(2*time.Minute)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, "it_r").RepairAt; !got.IsZero() {
			t.Fatalf("abandoned: still listed at %v", got)
		}
	})

	t.Run("moved history pages are written with the intent and read back by number, in order", func(t *testing.T) {
		s := f.New(t)
		hp, ok := s.(core.HistoryPages)
		if !ok {
			t.Skip("store reads no history pages")
		}
		create(t, s, PendingIntent("it_h", "bot-a"))
		for round := 0; round < 2; round++ {
			if _, err := s.Update(ctx, "it_h", func(in *core.Intent) error {
				n := core.MaxInlineResolutions - len(in.Resolutions) + 1 // one past the inline cap: a move
				for i := 0; i < n; i++ {
					in.Resolutions = append(in.Resolutions, core.Resolution{At: T0, By: "op", ByKind: "operator", Decision: "abandon",
						Reason: fmt.Sprint(round, "-", i), Recommend: true, Key: fmt.Sprint("k", round, "-", i)})
				}
				core.SpillHistory(in)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		in := get(t, s, "it_h")
		if in.History == nil || in.History.Pages != 2 {
			t.Fatalf("history %+v, want 2 pages", in.History)
		}
		all, err := hp.HistoryPages(ctx, "it_h", 1, 2)
		if err != nil || len(all) != 2 || all[0].Seq != 1 || all[1].Seq != 2 {
			t.Fatalf("pages 1..2: %+v %v", all, err)
		}
		if all[0].Resolutions[0].Key != "k0-0" || all[0].Resolutions[0].Reason != "0-0" {
			t.Fatalf("page 1 starts with %+v, want the first resolution with its key", all[0].Resolutions[0])
		}
		second, err := hp.HistoryPages(ctx, "it_h", 2, 2)
		if err != nil || len(second) != 1 || second[0].Seq != 2 || !reflect.DeepEqual(second[0], all[1]) {
			t.Fatalf("page 2 alone: %+v %v", second, err)
		}
		if none, err := hp.HistoryPages(ctx, "it_h", 3, 9); err != nil || len(none) != 0 {
			t.Fatalf("pages past the last: %+v %v", none, err)
		}
	})

	t.Run("needs-human intents list in due order across shards, ≥ 3 pages, stable cursor", func(t *testing.T) {
		s := f.New(t)
		l, ok := s.(NeedsHumanLister)
		if !ok {
			t.Skip("the store has no needs-human listing")
		}
		// 24 intents, four on each of six shards, handed to a human at
		// times out of id order (some equal), plus intents in other states
		// that must not be listed.
		shardOf := f.HumanShard
		if shardOf == nil {
			shardOf = func(string) int { return 0 }
		}
		perShard := map[int]int{}
		var ids []string
		for i := 0; len(ids) < 24; i++ {
			id := fmt.Sprintf("it_h%03d", i)
			sh := shardOf(id)
			if perShard[sh] >= 4 && f.HumanShard != nil || perShard[sh] == 0 && len(perShard) >= 6 {
				continue
			}
			perShard[sh]++
			ids = append(ids, id)
		}
		type want struct {
			id  string
			due time.Time
		}
		var wants []want
		for i, id := range ids {
			due := T0.Add(time.Duration((i*7)%11) * time.Minute)
			create(t, s, PendingIntent(id, []string{"bot-a", "bot-b"}[i%2]))
			if _, err := s.Update(ctx, id, func(in *core.Intent) error {
				in.Status, in.UpdatedAt = core.StatusNeedsHuman, due
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			wants = append(wants, want{id, due})
		}
		create(t, s, PendingIntent("it_hpending", "bot-a"))
		create(t, s, PendingIntent("it_hdone", "bot-a"))
		if _, err := s.Update(ctx, "it_hdone", func(in *core.Intent) error {
			in.Status, in.UpdatedAt = core.StatusNeedsHuman, T0
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, "it_hdone", func(in *core.Intent) error {
			in.Status, in.UpdatedAt = core.StatusAbandoned, T0.Add(time.Second)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		sort.SliceStable(wants, func(i, j int) bool {
			if !wants[i].due.Equal(wants[j].due) {
				return wants[i].due.Before(wants[j].due)
			}
			return wants[i].id < wants[j].id
		})
		var got []string
		seen := map[string]bool{}
		var last time.Time
		cursor, pages := "", 0
		for {
			if pages > 20 {
				t.Fatal("paging does not end")
			}
			items, next, err := l.ListPage(ctx, core.StatusNeedsHuman, cursor, 4)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(items) > 4 {
				t.Fatalf("page %d: %d items over the limit 4", pages, len(items))
			}
			for _, in := range items {
				if seen[in.ID] {
					t.Fatalf("page %d repeats %s", pages, in.ID)
				}
				seen[in.ID] = true
				if in.Status != core.StatusNeedsHuman {
					t.Fatalf("listed %s in %s", in.ID, in.Status)
				}
				if in.UpdatedAt.Before(last) {
					t.Fatalf("page %d: %s handed over at %v listed after one at %v", pages, in.ID, in.UpdatedAt, last)
				}
				last = in.UpdatedAt
				got = append(got, in.ID)
			}
			if next == "" {
				break
			}
			// The same cursor gives the same page (it is a position, not a
			// session).
			again, next2, err := l.ListPage(ctx, core.StatusNeedsHuman, cursor, 4)
			if err != nil || next2 != next || len(again) != len(items) {
				t.Fatalf("page %d read twice: %d items (next %q, %v), first %d (next %q)", pages, len(again), next2, err, len(items), next)
			}
			cursor = next
		}
		if pages < 3 {
			t.Fatalf("%d pages, want at least 3", pages)
		}
		ids = ids[:0]
		for _, w := range wants {
			ids = append(ids, w.id)
		}
		if !reflect.DeepEqual(got, ids) {
			t.Fatalf("listed\n%v\nwant (due order, no gaps)\n%v", got, ids)
		}
	})

	if f.Barrier != nil {
		t.Run("a raised backup barrier is up on every shard of its profile and none of another", func(t *testing.T) {
			s := f.New(t)
			bc, ok := s.(core.BarrierCheck)
			if !ok {
				t.Fatal("a store with a barrier must implement core.BarrierCheck")
			}
			f.Barrier(t, s, "bot-frozen", true)
			// Enough intent ids to land on every barrier shard.
			for i := 0; i < 200; i++ {
				id := fmt.Sprintf("it_b%d", i)
				for _, c := range []struct {
					bot  string
					want bool
				}{{"bot-frozen", true}, {"bot-free", false}} {
					in := PendingIntent(id, c.bot)
					in.UpdatedAt = T0
					_, up, err := bc.BarrierUp(ctx, in)
					if err != nil || up != c.want {
						t.Fatalf("%s of %s: barrier up=%v err=%v, want up=%v", id, c.bot, up, err, c.want)
					}
				}
			}
			// The claim itself is a plain conditional write: the dispatcher
			// reads the barrier right after it (core.BarrierCheck).
			create(t, s, PendingIntent("it_b", "bot-frozen"))
			if _, err := s.Claim(ctx, "it_b", claimFor("w1")); err != nil {
				t.Fatalf("claim: %v", err)
			}
			f.Barrier(t, s, "bot-frozen", false)
			for i := 0; i < 200; i++ {
				in := PendingIntent(fmt.Sprintf("it_b%d", i), "bot-frozen")
				if _, up, err := bc.BarrierUp(ctx, in); err != nil || up {
					t.Fatalf("after the lift: up=%v err=%v", up, err)
				}
			}
		})
	}
}
