package dynamo

import (
	"context"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

// UpdateKnown writes from the state its caller wrote without reading it;
// when someone else wrote since, it reads and lets mutate decide on the
// fresh state, as Update does.
func TestUpdateKnownSkipsTheReadUnlessSomeoneWrote(t *testing.T) {
	client, table := testTable(t, "known")
	db := &countingDB{Client: client}
	s := New(db, table)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	in := &core.Intent{ID: "it_known1", Bot: "b", IdempotencyKey: "k", Kind: core.KindReply, Provider: "p", Account: "a",
		Action: "send", Target: "t", Payload: []byte(`{"x":1}`), Status: core.StatusPending, Version: 1,
		CreatedAt: now, UpdatedAt: now, Attempts: []core.Attempt{}}
	if _, created, err := s.Create(ctx, in); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	db.gets.Store(0)
	got, err := s.UpdateKnown(ctx, in, func(cur *core.Intent) error {
		cur.StatusReason = "first"
		return nil
	})
	if err != nil || got.Version != 2 || db.gets.Load() != 0 {
		t.Fatalf("from the known state: version %v err %v, %d reads (want 0)", got, err, db.gets.Load())
	}
	if in.StatusReason != "" {
		t.Fatal("mutate changed the caller's known intent")
	}
	if got.RepairAt.IsZero() || !got.RepairAt.Equal(in.RepairAt) {
		t.Fatalf("repair entry %v, want %v kept", got.RepairAt, in.RepairAt)
	}
	// in is now stale (version 1): the first try loses, the read decides.
	calls := 0
	again, err := s.UpdateKnown(ctx, in, func(cur *core.Intent) error {
		calls++
		cur.StatusReason += "+second"
		return nil
	})
	if err != nil || again.Version != 3 || again.StatusReason != "first+second" || calls != 2 || db.gets.Load() != 1 {
		t.Fatalf("from a stale state: %+v err %v, %d mutate calls, %d reads", again, err, calls, db.gets.Load())
	}
	stored, err := s.Get(ctx, in.ID)
	if err != nil || stored.Version != 3 || stored.StatusReason != "first+second" {
		t.Fatalf("stored %+v %v", stored, err)
	}
}
