package dynamo

import (
	"errors"
	"hash/fnv"
	"strconv"
)

// Sharding: how many partition-key values each low-cardinality key is spread
// over. DynamoDB gives a partition about 1,000 WCU/s and 3,000 RCU/s, and a
// hot index partition throttles the base-table write, so no key may be
// written by every intent or by every intent of one bot. A shard is derived
// from the item's own id, so it never needs storing; readers query all
// shards. Target: 10,000 intents/s over 100,000 bots, one bot at 2,000/s,
// every key under half its partition's limit.
type Sharding struct {
	// Repair: the repair index (gsi1 DUE#<s>, HUMAN#<s>). One index write per
	// intent: 10,000/s over 64 keys is ~160 WCU/s per key.
	Repair int
	// Profile: a bot's profile index (gsi2 PROFILE#<bot>#<s>). The hottest
	// bot's 2,000 intents/s over 16 keys is 125 WCU/s per key.
	Profile int
	// Barrier: backup barrier items per bot (BARRIER#<bot>#<s>). Each claim
	// reads its own shard (1 RCU): 2,000/s over 16 items is 125 RCU/s.
	Barrier int
	// Webhook: the unresolved-webhook listing (gsi1 WEBHOOK#UNRESOLVED#<s>).
	Webhook int
	// Registry: replicas of each grant and capability item
	// (GRANTREP#<k>#<id>, CAPREP#<k>#<provider>#<account>). Operators write
	// all of them in one transaction; revalidation reads the replica of its
	// intent's shard: 2,000 attempts/s of one bot over 16 replicas is
	// 125 RCU/s per item.
	Registry int
}

// DefaultSharding is sized for the target load above.
var DefaultSharding = Sharding{Repair: 64, Profile: 16, Barrier: 16, Webhook: 16, Registry: 16}

// shardOf maps an id to one of n shards (FNV-1a, stable across releases:
// stored keys depend on it).
func shardOf(id string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

func shardKey(prefix string, s int) string { return prefix + strconv.Itoa(s) }

// orDefault is DefaultSharding with the table's own Repair count. Only
// Repair may differ (small test tables lower it: a sweep reads every repair
// shard): the other counts are also read where no store's sharding reaches
// (history pages, the registry's source items, a backup's checks), so a
// table whose writers disagreed on them would key items where its readers
// never look. CheckSharding refuses them.
func (s Sharding) orDefault() Sharding {
	d := DefaultSharding
	if s.Repair > 0 {
		d.Repair = s.Repair
	}
	return d
}

// ErrShardingFixed refuses a sharding that sets more than Repair.
var ErrShardingFixed = errors.New("only the repair shard count may be configured; profile, barrier, webhook and registry shards are fixed at dynamo.DefaultSharding")

// CheckSharding refuses a sharding that sets a count other than Repair
// (see orDefault).
func CheckSharding(s Sharding) error {
	if s.Repair < 0 || s.Profile != 0 || s.Barrier != 0 || s.Webhook != 0 || s.Registry != 0 {
		return ErrShardingFixed
	}
	return nil
}

// BarrierShard is the barrier shard (0..Shards.Barrier-1, default sharding)
// whose item a claim of intent id reads.
func BarrierShard(id string) int { return shardOf(id, DefaultSharding.Barrier) }
