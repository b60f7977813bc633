package dynamo

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botharness/outbox/core"
)

// A restored intent is written back long after its snapshot was taken: the
// due time its repair entry carried is in the past, behind the checkpoint
// the sweeper has already moved past. Restore must file the entry afresh,
// or the sweeper never reads it again (chaos seed 2737401264: a restored
// unknown-outcome intent whose reconciliation failed stayed so for good).
func TestRestoredIntentIsFiledAheadOfTheSweepCheckpoint(t *testing.T) {
	t.Parallel()
	db, table := testTable(t, "restore_repair")
	ctx := context.Background()
	s := New(db, table)
	in := retriedIntent()
	in.Status, in.ExternalID, in.Version = core.StatusUnknownOutcome, "", 1
	t0 := in.CreatedAt
	shard := shardOf(in.ID, s.RepairShards())
	if _, _, err := s.Create(ctx, in); err != nil {
		t.Fatal(err)
	}
	// The sweeper reads the entry an hour later and moves its checkpoint past it.
	later := t0.Add(time.Hour)
	due, pos, err := s.DueRepairs(ctx, shard, later, 10)
	if err != nil || len(due) != 1 || due[0].ID != in.ID {
		t.Fatalf("the intake entry is not due an hour later: %v %v", due, err)
	}
	snapshot := due[0]
	if err := s.AdvanceRepairs(ctx, shard, pos[0]); err != nil {
		t.Fatal(err)
	}
	// The intent is lost, then restored from its snapshot.
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: intentKey(in.ID)}); err != nil {
		t.Fatal(err)
	}
	written, err := s.RestoreIntent(ctx, snapshot, later)
	if err != nil || !written {
		t.Fatalf("restore: written=%v err=%v", written, err)
	}
	if want := later.Add(s.RepairDelay); !snapshot.RepairAt.Equal(want) {
		t.Fatalf("restored entry due %v, want the restorer's clock + delay %v", snapshot.RepairAt, want)
	}
	due, _, err = s.DueRepairs(ctx, shard, later.Add(s.RepairDelay), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].ID != in.ID || due[0].Status != core.StatusUnknownOutcome {
		t.Fatalf("the sweeper does not find the restored intent after its checkpoint: %v", due)
	}
	again, err := s.RestoreIntent(ctx, snapshot, later)
	if err != nil || again {
		t.Fatalf("a second restore overwrote the intent: written=%v err=%v", again, err)
	}
}
