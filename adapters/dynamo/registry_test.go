package dynamo

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

func registryForTest(t *testing.T) (*Registry, *countingDB) {
	t.Helper()
	client, table := testTable(t, "reg")
	db := &countingDB{Client: client}
	return NewRegistry(db, table), db
}

func TestRegistryReadFactsIsOneBatchGet(t *testing.T) {
	t.Parallel()
	reg, db := registryForTest(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	exp := now.Add(time.Hour)
	g := &core.Grant{ID: "g-1", Version: 1, Bot: "bot#1", Provider: "sandbox", Account: "acct", Actions: []string{"send_message"},
		Targets: []string{"chan-*"}, ExpiresAt: &exp, CreatedAt: now, UpdatedAt: now}
	if err := reg.PutGrant(ctx, g, 0); err != nil {
		t.Fatal(err)
	}
	c := &core.Capability{Provider: "sandbox", Account: "acct", Version: 1,
		Actions: map[string]core.Withdrawal{"charge": {Reason: "compliance", At: now, By: "op"}}}
	if err := reg.PutCapability(ctx, c, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.AdvanceSource(ctx, "bot#1", "m-1", regPtr(int64(4)), false, now); err != nil {
		t.Fatal(err)
	}
	in := &core.Intent{ID: "i", Bot: "bot#1", Provider: "sandbox", Account: "acct", Action: "send_message", Target: "chan-1",
		Grant: core.GrantRef{ID: "g-1", Version: 1}, Source: &core.SourceRef{ID: "m-1", Revision: 4}}
	db.gets.Store(0)
	db.batches.Store(0)
	f, err := reg.ReadFacts(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if db.batches.Load() != 1 || db.gets.Load() != 0 {
		t.Fatalf("reads: %d BatchGetItem, %d GetItem; want 1 and 0", db.batches.Load(), db.gets.Load())
	}
	if f.Grant == nil || f.Grant.Version != 1 || f.Grant.ExpiresAt == nil || !f.Grant.ExpiresAt.Equal(exp) || len(f.Grant.Targets) != 1 {
		t.Fatalf("grant %+v", f.Grant)
	}
	if f.Capability == nil || f.Capability.Actions["charge"].Reason != "compliance" || f.Capability.Blocks("send_message") != "" {
		t.Fatalf("capability %+v", f.Capability)
	}
	if f.Source == nil || f.Source.Revision != 4 || f.Source.Deleted {
		t.Fatalf("source %+v", f.Source)
	}
	if _, b := core.Evaluate(in, f, now); b != nil {
		t.Fatalf("blocked: %+v", b)
	}
	// Nothing stored: all nil, still one request.
	db.batches.Store(0)
	f, err = reg.ReadFacts(ctx, &core.Intent{ID: "j", Bot: "b", Provider: "sandbox", Account: "other", Grant: core.GrantRef{ID: "none"}, Source: &core.SourceRef{ID: "x"}})
	if err != nil || f.Grant != nil || f.Capability != nil || f.Source != nil || db.batches.Load() != 1 {
		t.Fatalf("%+v %v batches=%d", f, err, db.batches.Load())
	}
	// The grant's expiry is not the table's TTL attribute.
	out, err := db.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(reg.table), Key: key(GrantPK("g-1"), grantSK)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Item[TTLAttribute]; ok {
		t.Fatalf("grant item carries the TTL attribute %q", TTLAttribute)
	}
}

func regPtr[T any](v T) *T { return &v }

func TestRegistrySourcesMoveForwardOnly(t *testing.T) {
	t.Parallel()
	reg, _ := registryForTest(t)
	ctx := context.Background()
	now := time.Now().UTC()
	st, applied, err := reg.AdvanceSource(ctx, "bot-1", "m-1", regPtr(int64(5)), false, now)
	if err != nil || !applied || st.Revision != 5 || st.Deleted {
		t.Fatalf("%+v %v %v", st, applied, err)
	}
	st, applied, err = reg.AdvanceSource(ctx, "bot-1", "m-1", regPtr(int64(3)), false, now)
	if err != nil || applied || st.Revision != 5 {
		t.Fatalf("older: %+v %v %v", st, applied, err)
	}
	st, applied, err = reg.AdvanceSource(ctx, "bot-1", "m-1", regPtr(int64(5)), false, now)
	if err != nil || applied || st.Revision != 5 {
		t.Fatalf("equal: %+v %v %v", st, applied, err)
	}
	// Another bot's source of the same id is another source.
	if st, _, _ := reg.AdvanceSource(ctx, "bot-2", "m-1", regPtr(int64(1)), false, now); st.Revision != 1 {
		t.Fatalf("bot-2: %+v", st)
	}
	// A deletion arriving with an older revision is still a deletion.
	st, applied, err = reg.AdvanceSource(ctx, "bot-1", "m-1", regPtr(int64(2)), true, now)
	if err != nil || !applied || !st.Deleted || st.Revision != 5 {
		t.Fatalf("stale delete: %+v %v %v", st, applied, err)
	}
	st, applied, err = reg.AdvanceSource(ctx, "bot-1", "m-1", nil, true, now)
	if err != nil || applied || !st.Deleted {
		t.Fatalf("repeat delete: %+v %v %v", st, applied, err)
	}
	st, applied, err = reg.AdvanceSource(ctx, "bot-1", "m-1", regPtr(int64(6)), false, now)
	if err != nil || !applied || !st.Deleted || st.Revision != 6 {
		t.Fatalf("deleted is sticky: %+v %v %v", st, applied, err)
	}
	// Delete without a revision on an unknown source.
	st, applied, err = reg.AdvanceSource(ctx, "bot-1", "m-new", nil, true, now)
	if err != nil || !applied || !st.Deleted || st.Revision != 0 {
		t.Fatalf("delete unknown: %+v %v %v", st, applied, err)
	}

	// Concurrent, shuffled updates leave the highest revision.
	revs := mrand.Perm(30)
	var wg sync.WaitGroup
	var appliedN atomic.Int64
	for _, r := range revs {
		wg.Add(1)
		go func(r int64) {
			defer wg.Done()
			_, ok, err := reg.AdvanceSource(ctx, "bot-1", "m-race", &r, false, now)
			if err != nil {
				t.Error(err)
			}
			if ok {
				appliedN.Add(1)
			}
		}(int64(r + 1))
	}
	wg.Wait()
	st, _, err = reg.AdvanceSource(ctx, "bot-1", "m-race", regPtr(int64(0)), false, now)
	if err != nil || st.Revision != 30 {
		t.Fatalf("after the race: %+v %v", st, err)
	}
	if appliedN.Load() < 1 || appliedN.Load() > 30 {
		t.Fatalf("applied %d", appliedN.Load())
	}
}

func TestRegistryGrantsConditionalAndListed(t *testing.T) {
	t.Parallel()
	reg, _ := registryForTest(t)
	ctx := context.Background()
	now := time.Now().UTC()
	mk := func(id, bot string, v int64) *core.Grant {
		return &core.Grant{ID: id, Version: v, Bot: bot, Provider: "sandbox", Account: "*", Actions: []string{"*"}, Targets: []string{"*"}, CreatedAt: now, UpdatedAt: now}
	}
	if err := reg.PutGrant(ctx, mk("g-a", "bot-1", 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := reg.PutGrant(ctx, mk("g-a", "bot-1", 1), 0); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("create twice: %v", err)
	}
	if err := reg.PutGrant(ctx, mk("g-a", "bot-1", 3), 2); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("wrong expected version: %v", err)
	}
	if err := reg.PutGrant(ctx, mk("g-a", "bot-1", 2), 1); err != nil {
		t.Fatal(err)
	}
	if created, err := reg.SeedGrant(ctx, *mk("g-a", "bot-9", 1)); err != nil || created {
		t.Fatalf("seed over an existing grant: %v %v", created, err)
	}
	if g, _ := reg.GetGrant(ctx, "g-a"); g.Version != 2 || g.Bot != "bot-1" {
		t.Fatalf("seed changed the grant: %+v", g)
	}
	if err := reg.PutGrant(ctx, mk("g-b", "bot-2", 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := reg.PutGrant(ctx, mk("g-c", "bot-1", 1), 0); err != nil {
		t.Fatal(err)
	}
	var ids []string
	cursor := ""
	for i := 0; i < 10; i++ {
		page, next, err := reg.ListGrants(ctx, "", cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range page {
			ids = append(ids, g.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(ids) != 3 || ids[0] != "g-a" || ids[2] != "g-c" {
		t.Fatalf("listed %v", ids)
	}
	page, _, err := reg.ListGrants(ctx, "bot-1", "", 100)
	if err != nil || len(page) != 2 {
		t.Fatalf("bot filter: %d %v", len(page), err)
	}
	if _, err := reg.GetGrant(ctx, "g-none"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// recordingDB records the partition keys of every BatchGetItem (read) and
// every GetItem (got).
type recordingDB struct {
	*dynamodb.Client
	mu        sync.Mutex
	read, got map[string]int
}

func (c *recordingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if pk, ok := in.Key["pk"].(*types.AttributeValueMemberS); ok {
		c.mu.Lock()
		c.got[pk.Value]++
		c.mu.Unlock()
	}
	return c.Client.GetItem(ctx, in, o...)
}

func (c *recordingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.mu.Lock()
	for _, ka := range in.RequestItems {
		for _, k := range ka.Keys {
			if pk, ok := k["pk"].(*types.AttributeValueMemberS); ok {
				c.read[pk.Value]++
			}
		}
	}
	c.mu.Unlock()
	return c.Client.BatchGetItem(ctx, in, o...)
}

// Issue 13: an attempt reads the grant and capability replicas of its own
// shard, so no item is read by every attempt of a bot; an operator's write
// reaches every replica in one transaction, so a revocation (and a
// withdrawal) is seen by the next attempt on every shard.
func TestRegistryRevocationIsSeenOnEveryReplicaShard(t *testing.T) {
	t.Parallel()
	client, table := testTable(t, "rep")
	db := &recordingDB{Client: client, read: map[string]int{}}
	reg := NewRegistry(db, table)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	g := &core.Grant{ID: "g-hot", Version: 1, Bot: "bot-hot", Provider: "sandbox", Account: "*", Actions: []string{"*"},
		Targets: []string{"*"}, CreatedAt: now, UpdatedAt: now}
	if err := reg.PutGrant(ctx, g, 0); err != nil {
		t.Fatal(err)
	}
	// Intents covering every replica shard.
	k := RegistryShards
	var intents []*core.Intent
	covered := map[int]bool{}
	for i := 0; len(covered) < k; i++ {
		if i > 10000 {
			t.Fatalf("ids cover %d of %d shards", len(covered), k)
		}
		id := core.IntentID("bot-hot", "key-"+strconv.Itoa(i))
		if s := ReplicaShard(id); !covered[s] {
			covered[s] = true
			intents = append(intents, &core.Intent{ID: id, Bot: "bot-hot", Provider: "sandbox", Account: "acct-1", Action: "send_message",
				Target: "chan-1", Grant: core.GrantRef{ID: "g-hot", Version: 1}})
		}
	}
	rv := &core.Revalidation{Facts: reg, Clock: core.ClockFunc(func() time.Time { return now })}
	expect := func(stage string, want core.Status) {
		t.Helper()
		for _, in := range intents {
			_, blocked, err := rv.Revalidate(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case want == "" && blocked != nil:
				t.Fatalf("%s: shard %d blocked: %+v", stage, ReplicaShard(in.ID), blocked)
			case want != "" && (blocked == nil || blocked.Status != want):
				t.Fatalf("%s: shard %d: %+v, want %s", stage, ReplicaShard(in.ID), blocked, want)
			}
		}
	}
	expect("granted", "")
	// Every shard read its own replicas, none the canonical items.
	if n := db.read[GrantPK("g-hot")] + db.read[CapabilityPK("sandbox", "acct-1")]; n != 0 {
		t.Fatalf("revalidation read the canonical grant/capability item %d times", n)
	}
	for s := 0; s < k; s++ {
		if db.read[GrantReplicaPK("g-hot", s)] != 1 || db.read[CapabilityReplicaPK("sandbox", "acct-1", s)] != 1 {
			t.Fatalf("shard %d: grant replica read %d times, capability replica %d (want 1 each): %v", s,
				db.read[GrantReplicaPK("g-hot", s)], db.read[CapabilityReplicaPK("sandbox", "acct-1", s)], db.read)
		}
	}

	// A withdrawn action is seen on every shard.
	c := &core.Capability{Provider: "sandbox", Account: "acct-1", Version: 1,
		Actions: map[string]core.Withdrawal{"send_message": {Reason: "maintenance", At: now, By: "op"}}}
	if err := reg.PutCapability(ctx, c, 0); err != nil {
		t.Fatal(err)
	}
	expect("withdrawn", core.StatusGrantRevoked)
	c2 := &core.Capability{Provider: "sandbox", Account: "acct-1", Version: 2}
	if err := reg.PutCapability(ctx, c2, 1); err != nil {
		t.Fatal(err)
	}
	expect("restored", "")

	// A revocation is seen on every shard; a stale write changes no replica.
	g2 := *g
	g2.Version, g2.RevokedAt, g2.RevokedBy = 2, &now, "op"
	stale := g2
	stale.Version, stale.RevokedAt = 3, nil
	if err := reg.PutGrant(ctx, &stale, 7); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("stale write: %v, want ErrConflict", err)
	}
	if err := reg.PutGrant(ctx, &g2, 1); err != nil {
		t.Fatal(err)
	}
	expect("revoked", core.StatusGrantRevoked)
	// Replicas are not listed.
	list, _, err := reg.ListGrants(ctx, "", "", 100)
	if err != nil || len(list) != 1 || list[0].Version != 2 {
		t.Fatalf("listed %+v (%v), want the one grant at version 2", list, err)
	}
}
