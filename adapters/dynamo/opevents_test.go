package dynamo

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/core/notify"
)

type countingSubscriber struct{ ids []string }

func (s *countingSubscriber) Publish(_ context.Context, ev core.OperatorEvent) error {
	s.ids = append(s.ids, ev.ID)
	return nil
}

// A breaker's open and close are stored once: the gate's own transaction
// writes the event's ledger record (unpublished, due at once), which
// GET .../pace lists; the worker that moved the gate publishes it through
// the ledger without a second record, the one whose worker died first is
// redriven, and neither is published again.
func TestBreakerEventIsStoredOnceAsItsLedgerRecord(t *testing.T) {
	db, table := testTable(t, "breaker_ledger")
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	g, k := NewGates(db, table), gate.GateKey("sandbox", "acct-once")
	sub := &countingSubscriber{}
	n := &notify.OperatorNotifier{Ledger: NewOperatorEventLedger(db, table), Subscriber: sub, Owner: "w",
		Clock: core.ClockFunc(func() time.Time { return now.Add(time.Second) })}
	openedEv := gate.BreakerEvent(core.EventBreakerOpened, "sandbox", "acct-once", now, "3 failures")
	closedEv := gate.BreakerEvent(core.EventBreakerClosed, "sandbox", "acct-once", now.Add(time.Millisecond), "ok")
	opened := core.GateOperatorEvent(openedEv)
	if ok, err := g.Open(ctx, k, now.Add(time.Minute), false, openedEv); err != nil || !ok {
		t.Fatalf("open: %v %v", ok, err)
	}
	if err := n.Publish(ctx, opened); err != nil {
		t.Fatal(err)
	}
	if ok, err := g.Close(ctx, k, closedEv); err != nil || !ok { // and this worker dies before publishing
		t.Fatalf("close: %v %v", ok, err)
	}
	for i := 0; i < 2; i++ {
		if got, err := n.Redrive(ctx, 10); err != nil || got != 1-i {
			t.Fatalf("redrive %d: %d %v", i, got, err)
		}
	}
	if len(sub.ids) != 2 || sub.ids[0] != opened.ID || sub.ids[1] != closedEv.ID {
		t.Fatalf("published %v", sub.ids)
	}
	evs, err := g.Events(ctx, k, 10)
	if err != nil || len(evs) != 2 || evs[0].ID != closedEv.ID || evs[1].ID != opened.ID || evs[1].Detail != "3 failures" {
		t.Fatalf("gate history %+v (%v)", evs, err)
	}
	for _, ev := range evs {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: opEventKey(core.OperatorEvent{ID: ev.ID})})
		if err != nil || out.Item != nil {
			t.Fatalf("a second record of %s: %v %v", ev.ID, out.Item, err)
		}
	}
}
