package dynamo

import (
	"context"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
)

// The inline intake's one read before its put answers what the three reads
// it stands for answer (ReadFacts, BarrierUp, the gate replica StateFor
// reads first), in one BatchGetItem: nothing raised, a barrier up for the
// profile, a paused gate (its replicas marked dirty).
func TestPreflightReadsWhatTheThreeReadsReadInOneBatch(t *testing.T) {
	t.Parallel()
	reg, db := registryForTest(t)
	store, gates := New(db.Client, reg.table), NewGates(db.Client, reg.table)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	g := &core.Grant{ID: "g-1", Version: 1, Bot: "bot-1", Provider: "sandbox", Account: "acct", Actions: []string{"send_message"},
		Targets: []string{"*"}, CreatedAt: now, UpdatedAt: now}
	if err := reg.PutGrant(ctx, g, 0); err != nil {
		t.Fatal(err)
	}
	if err := reg.PutCapability(ctx, &core.Capability{Provider: "sandbox", Account: "acct", Version: 1}, 0); err != nil {
		t.Fatal(err)
	}
	intent := func(id, bot string) *core.Intent {
		return &core.Intent{ID: id, Bot: bot, Provider: "sandbox", Account: "acct", Action: "send_message", Target: "c",
			Grant: core.GrantRef{ID: "g-1", Version: 1}, UpdatedAt: now}
	}
	key := gate.GateKey("sandbox", "acct")
	check := func(what string, in *core.Intent, wantUp, wantClean bool) {
		t.Helper()
		db.gets.Store(0)
		db.batches.Store(0)
		pf, err := reg.Preflight(ctx, in)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if db.batches.Load() != 1 || db.gets.Load() != 0 {
			t.Fatalf("%s: %d BatchGetItem, %d GetItem; want 1 and 0", what, db.batches.Load(), db.gets.Load())
		}
		f, err := reg.ReadFacts(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if (pf.Facts.Grant == nil) != (f.Grant == nil) || pf.Facts.Grant.Version != f.Grant.Version || (pf.Facts.Capability == nil) != (f.Capability == nil) {
			t.Fatalf("%s: facts %+v, ReadFacts %+v", what, pf.Facts, f)
		}
		_, up, err := store.BarrierUp(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if pf.BarrierUp != up || up != wantUp {
			t.Fatalf("%s: barrier up %v, BarrierUp %v, want %v", what, pf.BarrierUp, up, wantUp)
		}
		st, err := gates.StateFor(ctx, key, in.ID, now)
		if err != nil {
			t.Fatal(err)
		}
		if pf.GateClean != wantClean || (wantClean && st != (gate.GateState{})) {
			t.Fatalf("%s: gate clean %v (StateFor %+v), want %v", what, pf.GateClean, st, wantClean)
		}
	}
	check("nothing raised", intent("it-1", "bot-1"), false, true)
	if err := store.RaiseBarrier(ctx, "bot-2", "backup-1", now, time.Hour); err != nil {
		t.Fatal(err)
	}
	check("another profile's barrier", intent("it-1", "bot-1"), false, true)
	for _, id := range []string{"it-1", "it-2", "it-3"} { // the barrier shards differ by intent
		check("its profile's barrier, "+id, intent(id, "bot-2"), true, true)
	}
	if err := gates.Pause(ctx, key, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"it-1", "it-2", "it-3"} { // every replica is marked
		check("a paused gate, "+id, intent(id, "bot-1"), false, false)
	}
}
