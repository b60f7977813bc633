package dynamo

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// Tombstones (issue 27). When the table's TTL deletes a terminal intent, the
// pruner puts a tombstone under the same key (pk INTENT#<id>, sk INTENT): the
// bot, the request and payload hashes, the final status, the external id,
// when it ended and where its full record was archived, and its own TTL.
//
// The shape is deliberately not an intent's: attribute names are one or two
// letters and the final status is stored as "ps", never "status", so every
// stream filter and index that looks at intents (the dispatcher's and the
// notifier's filters on status, the repair index gsi1, the profile index
// gsi2 that backups read) passes it by: the sweeper, backups, restores, the
// operator-event ledger and the repair index never see a tombstone. Hashes
// are stored as 32 raw bytes. A typical tombstone is about 200 bytes
// (TestTombstoneSize; the bound is 300).
type tombstoneItem struct {
	Status      string `dynamodbav:"ps"`
	Bot         string `dynamodbav:"b"`
	RequestHash []byte `dynamodbav:"rh"`
	PayloadHash []byte `dynamodbav:"ph,omitempty"`
	ExternalID  string `dynamodbav:"x,omitempty"`
	// EndedAt is Unix milliseconds.
	EndedAt int64  `dynamodbav:"e"`
	Archive string `dynamodbav:"ar,omitempty"`
	// ExpiresAt is the table's TTL attribute (epoch seconds; 0: for ever).
	ExpiresAt int64 `dynamodbav:"expiresAt,omitempty"`
}

// tombstoneMarker is the attribute only a tombstone has.
const tombstoneMarker = "ps"

// IsTombstone reports whether item is an intent's tombstone.
func IsTombstone(item map[string]types.AttributeValue) bool {
	_, ok := item[tombstoneMarker]
	return ok
}

// packHash stores "sha256:<hex>" as its 32 bytes; anything else as its text.
func packHash(h string) []byte {
	// An effect hash (core.EffectHash) packs as a marker byte and its digest.
	var mark []byte
	if x, ok := strings.CutPrefix(h, core.EffectHashPrefix); ok {
		h, mark = x, []byte{effectHashMark}
	}
	if x, ok := strings.CutPrefix(h, "sha256:"); ok && len(x) == 64 {
		if b, err := hex.DecodeString(x); err == nil {
			return append(mark, b...)
		}
	}
	if mark != nil {
		h = core.EffectHashPrefix + h
	}
	if h == "" {
		return nil
	}
	return []byte(h)
}

// effectHashMark leads a packed effect hash (33 bytes).
const effectHashMark = 0x01

func unpackHash(b []byte) string {
	if len(b) == 32 {
		return "sha256:" + hex.EncodeToString(b)
	}
	if len(b) == 33 && b[0] == effectHashMark {
		return core.EffectHashPrefix + "sha256:" + hex.EncodeToString(b[1:])
	}
	return string(b)
}

// MarshalTombstone renders the tombstone of ended intent in: archive is where
// its record went ("" with the archive off), expires when the tombstone
// itself expires (zero: never).
func MarshalTombstone(in *core.Intent, archive string, expires time.Time) (map[string]types.AttributeValue, error) {
	end := in.UpdatedAt
	if in.EndedAt != nil {
		end = *in.EndedAt
	}
	it := tombstoneItem{Status: string(in.Status), Bot: in.Bot, RequestHash: packHash(in.RequestHash), PayloadHash: packHash(in.PayloadHash),
		ExternalID: in.ExternalID, EndedAt: end.UnixMilli(), Archive: archive}
	if !expires.IsZero() {
		it.ExpiresAt = expires.Unix()
	}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("marshal tombstone of %s: %w", in.ID, err)
	}
	for k, v := range intentKey(in.ID) {
		item[k] = v
	}
	return item, nil
}

// unmarshalTombstone reads a tombstone as the intent it answers for: its
// identity and final outcome, no attempts, Pruned set.
func unmarshalTombstone(item map[string]types.AttributeValue) (*core.Intent, error) {
	var it tombstoneItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("unmarshal tombstone: %w", err)
	}
	pk, _ := item["pk"].(*types.AttributeValueMemberS)
	if pk == nil {
		return nil, errors.New("unmarshal tombstone: no pk")
	}
	end := time.UnixMilli(it.EndedAt).UTC()
	in := &core.Intent{
		ID: strings.TrimPrefix(pk.Value, "INTENT#"), Bot: it.Bot, Status: core.Status(it.Status),
		RequestHash: unpackHash(it.RequestHash), PayloadHash: unpackHash(it.PayloadHash), ExternalID: it.ExternalID,
		UpdatedAt: end, EndedAt: &end, Attempts: []core.Attempt{},
		Pruned: &core.Pruned{EndedAt: end, Archive: it.Archive},
	}
	if it.ExpiresAt != 0 {
		in.ExpiresAt = time.Unix(it.ExpiresAt, 0).UTC()
	}
	return in, nil
}

// PutTombstone writes a pruned intent's tombstone only where its key is
// free: the TTL delete removed the intent, and a key a bot reused in the
// moment between (a new intent) is never overwritten. written is false then,
// and raced tells a new intent (true) from a tombstone already there (a
// retried batch).
func (s *Store) PutTombstone(ctx context.Context, item map[string]types.AttributeValue) (written, raced bool, err error) {
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, len(ccf.Item) > 0 && !IsTombstone(ccf.Item), nil
	}
	if err != nil {
		return false, false, fmt.Errorf("put tombstone: %w", err)
	}
	return true, false, nil
}

// ExpireHistoryPages hands pages 1..n of a pruned intent's moved history
// (the pruner archived them first) to the table's TTL: one UpdateItem per
// page sets its expiry to at (already passed), so the TTL service deletes
// it like the intent. No function may DeleteItem (infra's least-privilege
// rule); a page already gone is skipped.
func (s *Store) ExpireHistoryPages(ctx context.Context, id string, n int, at time.Time) error {
	for seq := 1; seq <= n; seq++ {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.table),
			Key:                       key(IntentPK(id), HistorySK(seq)),
			UpdateExpression:          aws.String("SET #t = :t"),
			ConditionExpression:       aws.String("attribute_exists(pk)"),
			ExpressionAttributeNames:  map[string]string{"#t": TTLAttribute},
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": avN(at.Unix())},
		})
		var ccf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &ccf) {
			return fmt.Errorf("expire history page %d of %s: %w", seq, id, err)
		}
	}
	return nil
}
