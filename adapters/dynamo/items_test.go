package dynamo

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/storetest"
)

// retriedIntent is a delivered intent as the bench's retry phase leaves it
// (its fields, ids and evidence), with a payload of exactly 1 KiB (the
// bench's is ~0.8 KiB): one 503 with its retry time, then a success.
func retriedIntent() *core.Intent {
	t0 := time.Date(2026, 11, 30, 20, 14, 35, 339194594, time.UTC)
	at := func(d time.Duration) *time.Time { t := t0.Add(d); return &t }
	head, tail := `{"text":"`, `","format":"markdown","thread":"th-8812"}`
	payload := head + strings.Repeat("x", 1024-len(head)-len(tail)) + tail
	return &core.Intent{
		ID: core.IntentID("bench-bot", "retry-1a24bbb5e6-0"), Bot: "bench-bot", IdempotencyKey: "retry-1a24bbb5e6-0", Kind: core.KindReply,
		Provider: "sandbox", Account: "bench-retry", Action: "send_message", Target: "chat-0", Payload: json.RawMessage(payload),
		PayloadHash: "sha256:" + strings.Repeat("2a", 32), RequestHash: "sha256:" + strings.Repeat("61", 32),
		Grant:    core.GrantRef{ID: "g-1", Version: 1},
		Metadata: json.RawMessage(`{"conversation":"conv-1234","turn":7}`), Status: core.StatusSucceeded, Version: 5,
		CreatedAt: t0, UpdatedAt: t0.Add(1627 * time.Millisecond), AttemptCount: 2, FirstAttemptAt: at(82 * time.Millisecond),
		ExternalID: "sbx_2", RepairAt: t0.Add(90 * time.Second),
		Attempts: []core.Attempt{
			{N: 1, Trigger: "stream", StartedAt: t0.Add(82 * time.Millisecond), EndedAt: t0.Add(256 * time.Millisecond), Result: "transient",
				Evidence: core.Evidence{HTTPStatus: 503, ProviderCode: "unavailable"}, Checks: &core.Checks{Result: "ok", GrantVersion: 1},
				NextDueAt: at(1256 * time.Millisecond)},
			{N: 2, Trigger: "retry", StartedAt: t0.Add(1413 * time.Millisecond), EndedAt: t0.Add(1627 * time.Millisecond), Result: "succeeded",
				ExternalID: "sbx_2", Evidence: core.Evidence{HTTPStatus: 201, ProviderCode: "delivered"},
				Checks: &core.Checks{Result: "ok", GrantVersion: 1}},
		},
	}
}

// Every write of an intent rewrites the whole item and costs a write unit
// per started KB: a 1 KiB intent with its two attempt entries must stay
// within 2 KB, or the last write of a retried intent costs 3 WCU
// (wcu_per_retried_intent). Measured with DynamoDB's own number rule.
func TestTwoAttemptIntentStaysUnderTwoKB(t *testing.T) {
	t.Parallel()
	item, err := MarshalIntent(retriedIntent())
	if err != nil {
		t.Fatal(err)
	}
	size := ItemSize(item, NumberBytesDynamoDB)
	if size > 2048 {
		t.Fatalf("a 1 KiB intent with two attempts is %d bytes (> 2 KB: 3 WCU per write)", size)
	}
	var attempts int
	if l, ok := item["attempts"].(*types.AttributeValueMemberL); ok {
		for _, e := range l.Value {
			attempts += valueSize(e, NumberBytesDynamoDB) + 1
		}
	}
	t.Logf("item %d bytes, of which attempt entries %d", size, attempts)
	if attempts > 200 {
		t.Fatalf("two attempt entries take %d bytes (want <= 200: short names, numeric times, flat evidence)", attempts)
	}
}

// Marshal and unmarshal keep every field of an intent (the contract suite
// checks the same on DynamoDB Local).
func TestIntentItemRoundTrip(t *testing.T) {
	t.Parallel()
	for _, in := range []*core.Intent{storetest.FullIntent("it_full", "bot-1"), retriedIntent()} {
		item, err := MarshalIntent(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalIntent(item)
		if err != nil {
			t.Fatal(err)
		}
		storetest.SameIntent(t, in.ID, got, in)
	}
}

// Entries stored in the earlier verbose shape (long names, nested maps,
// RFC 3339 times) still read as the same facts.
func TestLegacyHistoryEntriesStillRead(t *testing.T) {
	t.Parallel()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	m := func(kv map[string]types.AttributeValue) types.AttributeValue {
		return &types.AttributeValueMemberM{Value: kv}
	}
	want := storetest.FullIntent("it_legacy", "bot-1")
	item, err := MarshalIntent(want)
	if err != nil {
		t.Fatal(err)
	}
	item["attempts"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{
		m(map[string]types.AttributeValue{"n": n("1"), "trigger": s("stream"), "startedAt": s("2026-03-04T05:06:07.891Z"),
			"endedAt": s("2026-03-04T05:06:08.891Z"), "result": s("transient"),
			"evidence": m(map[string]types.AttributeValue{"httpStatus": n("503"), "providerCode": s("busy"), "detail": s("d"), "retryAfter": s("2"),
				"extra": m(map[string]types.AttributeValue{"a": s("b")})}),
			"checks":    m(map[string]types.AttributeValue{"result": s("ok"), "reason": s("r"), "sourceRevision": n("3"), "grantVersion": n("2")}),
			"nextDueAt": s("2026-03-04T05:06:17.891Z")}),
		m(map[string]types.AttributeValue{"n": n("2"), "trigger": s("retry"), "startedAt": s("2026-03-04T05:06:27.891Z"),
			"endedAt": s("2026-03-04T05:06:28.891Z"), "result": s("unknown-outcome"), "externalId": s("ext-0"), "evidence": m(nil)}),
	}}
	item["resolutions"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{
		m(map[string]types.AttributeValue{"at": s("2026-03-04T06:06:07.891Z"), "by": s("op"), "byKind": s("operator"), "decision": s("retry"),
			"reason": s("r"), "recommendationOnly": &types.AttributeValueMemberBOOL{Value: true}, "key": s("idem-1"),
			"duplicateRiskAccepted": &types.AttributeValueMemberBOOL{Value: true}}),
	}}
	got, err := UnmarshalIntent(item)
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameIntent(t, "legacy entries", got, want)
}
