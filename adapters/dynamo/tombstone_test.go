package dynamo

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/storetest"
)

// A tombstone with a long bot name, a provider's external id and an
// archive location stays within 300 bytes, and reads back as the intent
// it answers for.
func TestTombstoneSize(t *testing.T) {
	end := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	in := &core.Intent{
		ID: core.IntentID("support-bot-eu-west-production", "slack:Ev0123456789:reply"), Bot: "support-bot-eu-west-production",
		Status: core.StatusSucceeded, ExternalID: "1733047200.123456-C0123456789",
		RequestHash: "sha256:" + strings.Repeat("ab", 32), PayloadHash: "sha256:" + strings.Repeat("cd", 32), EndedAt: &end,
	}
	loc := "intents/dt=2026-12-08/0123456789abcdef.jsonl.gz#499"
	item, err := MarshalTombstone(in, loc, end.Add(90*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n := ItemSize(item, NumberBytesGenerous); n > 300 {
		t.Fatalf("tombstone is %d bytes (generous count), want <= 300", n)
	}
	if !IsTombstone(item) {
		t.Fatal("not recognised as a tombstone")
	}
	for _, k := range []string{"status", "gsi1pk", "gsi2pk"} {
		if _, ok := item[k]; ok {
			t.Fatalf("tombstone carries %s: the stream filters or indexes would see it", k)
		}
	}
	got, err := UnmarshalIntent(item)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != in.ID || got.Bot != in.Bot || got.Status != in.Status || got.ExternalID != in.ExternalID ||
		got.RequestHash != in.RequestHash || got.PayloadHash != in.PayloadHash || got.Pruned == nil ||
		got.Pruned.Archive != loc || !got.Pruned.EndedAt.Equal(end.Truncate(time.Millisecond)) {
		t.Fatalf("read back %+v (pruned %+v)", got, got.Pruned)
	}
}

// The write that ends an intent carries its TTL (expiresAt = end + window)
// in the same put; writes before it carry none; a tombstone is never written
// over by an intent write.
func TestTerminalWriteCarriesTheTTL(t *testing.T) {
	db, table := testTable(t, "ttl")
	s := New(db, table)
	s.Retention = time.Hour
	ctx := context.Background()
	in := storetest.PendingIntent(core.IntentID("bot-a", "k-ttl"), "bot-a")
	if _, _, err := s.Create(ctx, in); err != nil {
		t.Fatal(err)
	}
	raw := func() map[string]types.AttributeValue {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: intentKey(in.ID), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	if _, ok := raw()[TTLAttribute]; ok {
		t.Fatal("a pending intent has a TTL")
	}
	end := storetest.T0.Add(time.Minute + 300*time.Millisecond)
	if _, err := s.Update(ctx, in.ID, func(c *core.Intent) error {
		c.Status, c.UpdatedAt = core.StatusExpired, end
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	exp, ok := raw()[TTLAttribute].(*types.AttributeValueMemberN)
	if want := strconv.FormatInt(end.Add(time.Hour).Unix()+1, 10); !ok || exp.Value != want {
		t.Fatalf("expiresAt %v, want %s (end + window, rounded up)", exp, want)
	}
	got, err := s.Get(ctx, in.ID)
	if err != nil || got.EndedAt == nil || !got.EndedAt.Equal(end) {
		t.Fatalf("endedAt %v (%v)", got.EndedAt, err)
	}
	// Pruned: the key holds the tombstone; no intent write may touch it.
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: intentKey(in.ID)}); err != nil {
		t.Fatal(err)
	}
	tomb, err := MarshalTombstone(got, "", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.PutTombstone(ctx, tomb); !ok || err != nil {
		t.Fatalf("put tombstone: %v %v", ok, err)
	}
	if ok, raced, err := s.PutTombstone(ctx, tomb); ok || raced || err != nil {
		t.Fatalf("a second tombstone put: written %v raced %v %v", ok, raced, err)
	}
	if _, err := s.Update(ctx, in.ID, func(c *core.Intent) error { return nil }); !errors.Is(err, core.ErrPruned) {
		t.Fatalf("update of a tombstone: %v, want ErrPruned", err)
	}
	// A restore of a snapshot taken while it was live never brings it back as work.
	snap := storetest.PendingIntent(in.ID, "bot-a")
	if written, err := s.RestoreIntent(ctx, snap, end); err != nil || written {
		t.Fatalf("restore over a tombstone: written %v, %v", written, err)
	}
	// Intake's conditional put fails on it and returns it as the existing intent.
	again := storetest.PendingIntent(in.ID, "bot-a")
	existing, created, err := s.Create(ctx, again)
	if err != nil || created || existing.Pruned == nil || existing.Status != core.StatusExpired {
		t.Fatalf("create on a tombstone: created=%v existing=%+v err=%v", created, existing, err)
	}
}

// TestTombstoneHashesRoundTrip: every hash form an intent can carry comes
// back from its tombstone as it went in; digests pack to their bytes (an
// effect hash with a marker byte), so a tombstone stays small.
func TestTombstoneHashesRoundTrip(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		hash string
		size int
	}{
		{digest, 32},
		{core.EffectHashPrefix + digest, 33},
		{"rh", 2},
		{core.EffectHashPrefix + "odd", len(core.EffectHashPrefix + "odd")},
		{"", 0},
	} {
		b := packHash(c.hash)
		if len(b) != c.size || unpackHash(b) != c.hash {
			t.Errorf("%q packs to %d bytes and back to %q", c.hash, len(b), unpackHash(b))
		}
	}
}
