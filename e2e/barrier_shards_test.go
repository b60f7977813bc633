package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core"
)

// Issue 13: a bot's claims share no item. The backup barrier is sharded like
// the intents; a backup raises every shard in one transaction and a claim
// reads only its own shard, right after it is written. A raised barrier
// must stop the claims on every shard of that profile (nothing reaches the
// provider) and none of another profile's.
func TestRaisedBarrierStopsClaimsOnEveryShardOfItsProfileOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	ctx := context.Background()
	t.Cleanup(func() { _ = e.st.App.Store.LiftBarrier(context.Background(), testBot, "bk_e2e") })
	if err := e.st.App.Store.RaiseBarrier(ctx, testBot, "bk_e2e", time.Now().UTC(), 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	frozen, free := map[string]bool{}, map[string]bool{}
	shards := map[int]bool{}
	for i := 0; shards == nil || len(shards) < dynamo.BarrierShards || i < 32; i++ {
		if i > 400 {
			t.Fatalf("400 intents covered only %d of %d barrier shards", len(shards), dynamo.BarrierShards)
		}
		id := e.mustSubmit(fmt.Sprintf("frozen-%d", i), intentBody("acct-frozen", "chan-1", "hold me"))
		frozen[id] = true
		shards[dynamo.BarrierShard(id)] = true
	}
	for i := 0; i < 4; i++ {
		r := e.submit(bot2Token, fmt.Sprintf("free-%d", i), intentBody("acct-free", "chan-1", "send me"))
		if r.status != 201 {
			t.Fatalf("submit as bot-2: %d %s", r.status, r.body)
		}
		var out struct {
			ID string `json:"id"`
		}
		r.json(t, &out)
		free[out.ID] = true
	}
	// The other profile is untouched: every intent delivered once.
	for id := range free {
		e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
	}
	// Every claim of the frozen profile, on every shard, was made and given
	// back before anything was sent.
	for id := range frozen {
		in := e.waitStatus(id, 20*time.Second, core.StatusRetryableFailure)
		if len(in.Attempts) == 0 || in.Attempts[len(in.Attempts)-1].Result != core.ResultHeldByBarrier {
			t.Fatalf("%s: %s", id, trail(in))
		}
	}
	for id := range frozen {
		if n := e.effectsFor(id); n != 0 {
			t.Fatalf("%s: %d side effects behind a raised barrier (shard %d)", id, n, dynamo.BarrierShard(id))
		}
	}
	for id := range free {
		if n := e.effectsFor(id); n != 1 {
			t.Fatalf("%s: %d side effects, want 1", id, n)
		}
	}
}
