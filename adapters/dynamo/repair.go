package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// The sweeper's checkpoints: one small item per repair shard,
// SWEEP#<shard>, SWEEP, holding the gsi1 key of the last entry read.

var _ core.RepairIndex = (*Store)(nil)

const sweepSK = "SWEEP"

func sweepKey(shard int) map[string]types.AttributeValue {
	return key("SWEEP#"+strconv.Itoa(shard), sweepSK)
}

// RepairShards is the number of repair-index shards.
func (s *Store) RepairShards() int { return s.Shards.orDefault().Repair }

// repairPos is a checkpoint: the index key of an entry.
type repairPos struct {
	SK   string `json:"s"`
	PK   string `json:"p"`
	SKey string `json:"k,omitempty"` // the table sort key, when not INTENT
}

func (p repairPos) String() string { b, _ := json.Marshal(p); return string(b) }

// DueRepairs reads a shard's entries due at or before upTo, after its
// checkpoint, in due order (one consistent checkpoint read, one index
// query, one batched consistent read of the intents).
func (s *Store) DueRepairs(ctx context.Context, shard int, upTo time.Time, limit int) ([]*core.Intent, []string, error) {
	pk := shardKey(duePfx, shard)
	cp, err := s.checkpoint(ctx, shard)
	if err != nil {
		return nil, nil, err
	}
	var start map[string]types.AttributeValue
	if sk, ok := cp["wmsk"].(*types.AttributeValueMemberS); ok {
		if p, ok := cp["wmpk"].(*types.AttributeValueMemberS); ok {
			start = map[string]types.AttributeValue{
				"gsi1pk": avS(pk), "gsi1sk": sk,
				"pk": p, "sk": avS(intentSK),
			}
		}
	}
	res, err := s.db.Query(ctx, dueQuery(s.table, pk, upTo, start, min(max(limit, 1), 1000)))
	if err != nil {
		return nil, nil, fmt.Errorf("query repair shard %d: %w", shard, err)
	}
	items, err := hydrate(ctx, s.db, s.table, res.Items)
	if err != nil {
		return nil, nil, err
	}
	byPK := make(map[string]*core.Intent, len(items))
	for _, item := range items {
		in, err := UnmarshalIntent(item)
		if err != nil {
			return nil, nil, err
		}
		byPK[IntentPK(in.ID)] = in
	}
	var out []*core.Intent
	var pos []string
	for _, e := range res.Items {
		p := repairPos{SK: attrS(e, "gsi1sk"), PK: attrS(e, "pk")}
		in, ok := byPK[p.PK]
		if !ok {
			continue // not an intent entry, or gone
		}
		out = append(out, in)
		pos = append(pos, p.String())
	}
	if len(out) == 0 && len(res.Items) > 0 {
		// Only entries without an intent behind them: move past them.
		last := res.Items[len(res.Items)-1]
		if err := s.AdvanceRepairs(ctx, shard, repairPos{SK: attrS(last, "gsi1sk"), PK: attrS(last, "pk")}.String()); err != nil {
			return nil, nil, err
		}
	}
	return out, pos, nil
}

func attrS(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// RepairCheckpoint reads the sweeper's checkpoint on the repair shard of
// intent id (the index key of the last entry it passed; "" before the first
// pass): an entry filed before it is never read again. For diagnosis.
func (s *Store) RepairCheckpoint(ctx context.Context, id string) (string, error) {
	cp, err := s.checkpoint(ctx, shardOf(id, s.RepairShards()))
	return attrS(cp, "wmsk"), err
}

// checkpoint reads a shard's checkpoint item, strongly consistent (nil
// before the first pass).
func (s *Store) checkpoint(ctx context.Context, shard int) (map[string]types.AttributeValue, error) {
	cp, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: sweepKey(shard), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read checkpoint of repair shard %d: %w", shard, err)
	}
	return cp.Item, nil
}

// DropRepairCheckpoints deletes every shard's checkpoint, so the next sweep
// reads each shard from its start. Only for a table reused under a clock
// that starts again earlier (the chaos suite's schedules each start a fake
// clock at real time, while the previous schedule on the table ran its own
// up to an hour ahead): a checkpoint ahead of the clock hides every entry
// filed before it.
func (s *Store) DropRepairCheckpoints(ctx context.Context) error {
	for shard := 0; shard < s.RepairShards(); shard++ {
		if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: sweepKey(shard)}); err != nil {
			return fmt.Errorf("drop checkpoint of repair shard %d: %w", shard, err)
		}
	}
	return nil
}

// AdvanceRepairs moves a shard's checkpoint forward (a conditional update:
// never backwards, so concurrent sweepers cannot undo each other).
func (s *Store) AdvanceRepairs(ctx context.Context, shard int, pos string) error {
	var p repairPos
	if err := json.Unmarshal([]byte(pos), &p); err != nil || p.SK == "" {
		return fmt.Errorf("repair checkpoint %q: not a position", pos)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 sweepKey(shard),
		UpdateExpression:    aws.String("SET wmsk = :s, wmpk = :p"),
		ConditionExpression: aws.String("attribute_not_exists(wmsk) OR wmsk < :s"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":s": avS(p.SK), ":p": avS(p.PK),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("advance repair shard %d: %w", shard, err)
	}
	return nil
}

// CountNeedsHuman counts the human listing from the index alone (keys-only
// COUNT queries, every shard in parallel), reading at most about bound
// entries: a bounded gauge, not a full count of an unbounded backlog.
func (s *Store) CountNeedsHuman(ctx context.Context, bound int) (int, bool, error) {
	per := max(bound/s.RepairShards(), 1)
	total, exact := 0, true
	err := s.queryHumanShards(ctx, types.SelectCount, per, func(res *dynamodb.QueryOutput) {
		total += int(res.Count)
		if len(res.LastEvaluatedKey) > 0 {
			exact = false
		}
	})
	if err != nil {
		return 0, false, fmt.Errorf("count needs-human intents: %w", err)
	}
	return total, exact, nil
}

// OldestNeedsHuman is when the longest-waiting needs-human intent entered
// needs-human (its HUMAN# entry's sort key starts with that moment), ok
// false when none waits: one keys-only Query of one entry per shard.
func (s *Store) OldestNeedsHuman(ctx context.Context) (time.Time, bool, error) {
	var oldest time.Time
	found := false
	err := s.queryHumanShards(ctx, "", 1, func(res *dynamodb.QueryOutput) {
		for _, it := range res.Items {
			if t := repairAtOf(it); !t.IsZero() && (!found || t.Before(oldest)) {
				oldest, found = t, true
			}
		}
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest needs-human intent: %w", err)
	}
	return oldest, found, nil
}

// queryHumanShards queries every shard's HUMAN# entries in gsi1 (at most
// limit each, 16 shards at once) and hands each answer to fold, one at a
// time; select "" reads the index's keys.
func (s *Store) queryHumanShards(ctx context.Context, sel types.Select, limit int, fold func(*dynamodb.QueryOutput)) error {
	var mu sync.Mutex
	return eachShard(s.RepairShards(), 16, func(shard int) error {
		in := listingQuery(s.table, gsiName, shardKey(humanPfx, shard), nil, limit)
		in.Select = sel
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		fold(res)
		return nil
	})
}
