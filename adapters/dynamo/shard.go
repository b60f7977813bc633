package dynamo

import (
	"errors"
	"strconv"
	"sync"

	"github.com/botharness/outbox/core/botlimit"
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
	// intent: 10,000/s over 64 keys is ~160 WCU/s per key. The one count a
	// table may choose (small test tables lower it: a sweep reads every
	// repair shard); zero is DefaultSharding's.
	Repair int
}

// DefaultSharding is sized for the target load above.
var DefaultSharding = Sharding{Repair: 64}

// The other shard counts are fixed: they are also read where no store's
// sharding reaches (history pages, the registry's source items, a backup's
// checks), so a table whose writers disagreed on them would key items where
// its readers never look.
const (
	// ProfileShards: a bot's profile index (gsi2 PROFILE#<bot>#<s>). The
	// hottest bot's 2,000 intents/s over 16 keys is 125 WCU/s per key.
	ProfileShards = 16
	// BarrierShards: backup barrier items per bot (BARRIER#<bot>#<s>). Each
	// claim reads its own shard (1 RCU): 2,000/s over 16 items is 125 RCU/s.
	BarrierShards = 16
	// WebhookShards: the unresolved-webhook listing (gsi1 WEBHOOK#UNRESOLVED#<s>).
	WebhookShards = 16
	// RegistryShards: replicas of each grant and capability item
	// (GRANTREP#<k>#<id>, CAPREP#<k>#<provider>#<account>). Operators write
	// all of them in one transaction; revalidation reads the replica of its
	// intent's shard: 2,000 attempts/s of one bot over 16 replicas is
	// 125 RCU/s per item.
	RegistryShards = 16
)

// shardOf maps an id to one of n shards: core.ShardOf (FNV-1a, stable
// across releases: stored keys depend on it).
var shardOf = botlimit.ShardOf

func shardKey(prefix string, s int) string { return prefix + strconv.Itoa(s) }

// eachShard calls f for shards 0 to n-1, at most limit at a time, and
// returns their errors joined in shard order (nil if none failed).
func eachShard(n, limit int, f func(shard int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for shard := 0; shard < n; shard++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[shard] = f(shard)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// orDefault is the sharding with DefaultSharding's count where unset.
func (s Sharding) orDefault() Sharding {
	if s.Repair > 0 {
		return s
	}
	return DefaultSharding
}

// BarrierShard is the barrier shard (0..BarrierShards-1)
// whose item a claim of intent id reads.
func BarrierShard(id string) int { return shardOf(id, BarrierShards) }
