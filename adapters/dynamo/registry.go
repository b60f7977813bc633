package dynamo

// Registry holds what revalidation reads (issue 4), on the same table:
//
//	GRANT#<id>, GRANT                            a service grant (global id);
//	                                             gsi1pk = GRANTS, gsi1sk = <id> for the admin list
//	GRANTREP#<k>#<id>, GRANT                     replica k of the grant (k < RegistryShards)
//	CAPABILITY#<provider>#<account>, CAPABILITY  operator withdrawals for an account (absent: nothing withdrawn)
//	CAPREP#<k>#<provider>#<account>, CAPABILITY  replica k of the capability item
//	SOURCE#<bot>#<sourceId>, SOURCE              a bot's source and its current revision
//
// <bot> and <provider> are path-escaped so that '#' can never make two keys
// collide. The dispatcher's stream filter only passes sk = INTENT, so none of
// these items ever triggers a dispatch.
//
// Replicas (issue 13): a grant or a capability is read before every attempt
// of every intent that uses it, so one item would take all of a bot's (or an
// account's) attempts — 2,000 strongly consistent reads/s for the target's
// hottest bot, over the partition's 3,000 with the other reads. Operators
// write grants and capabilities rarely, so every write puts the canonical
// item (conditional on its version) and all K replicas in ONE transaction,
// and an attempt reads only the replica of its intent's shard. A
// transaction is all or nothing and a strongly consistent read sees every
// transaction committed before it, so a revocation acknowledged to the
// operator is seen by every later attempt, whatever its shard — the same
// guarantee as the single item. The admin API, intake and the version
// condition use the canonical item; replicas never carry index keys.
//
// Reads per attempt: ReadFacts is one BatchGetItem request, strongly
// consistent, for two keys (grant replica, capability replica) or three
// (plus the source). Items are kept small (well under 4 KB), so it consumes
// 1 RCU per key. A projection would not lower that: DynamoDB charges reads
// on the item size, not on the attributes returned.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
)

// RegistryAPI is the part of the DynamoDB client the registry uses.
type RegistryAPI interface {
	API
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Registry stores grants, capability withdrawals and source revisions.
type Registry struct {
	db    RegistryAPI
	table string
	// BatchTries bounds the re-requests of unprocessed keys (throttling).
	BatchTries int
}

var (
	_ core.GrantStore      = (*Registry)(nil)
	_ core.CapabilityStore = (*Registry)(nil)
	_ core.SourceStore     = (*Registry)(nil)
	_ core.FactReader      = (*Registry)(nil)
)

// NewRegistry returns a registry over table.
func NewRegistry(db RegistryAPI, table string) *Registry {
	return &Registry{db: db, table: table, BatchTries: 5}
}

const (
	grantSK      = "GRANT"
	grantPfx     = "GRANT#"
	grantsGSI    = "GRANTS"
	grantRepPfx  = "GRANTREP#"
	capRepPfx    = "CAPREP#"
	capabilitySK = "CAPABILITY"
	capPfx       = "CAPABILITY#"
	sourceSK     = "SOURCE"
	sourcePfx    = "SOURCE#"
)

// GrantPK is the partition key of a grant item.
func GrantPK(id string) string { return grantPfx + id }

// GrantReplicaPK is the partition key of replica k of a grant.
func GrantReplicaPK(id string, k int) string { return grantRepPfx + strconv.Itoa(k) + "#" + id }

// CapabilityPK is the partition key of an account's capability item.
func CapabilityPK(provider, account string) string {
	return capPfx + url.PathEscape(provider) + "#" + account
}

// CapabilityReplicaPK is the partition key of replica k of an account's
// capability item.
func CapabilityReplicaPK(provider, account string, k int) string {
	return capRepPfx + strconv.Itoa(k) + "#" + url.PathEscape(provider) + "#" + account
}

// ReplicaShard is the replica (0..RegistryShards-1)
// an attempt of intent id reads.
func ReplicaShard(id string) int { return shardOf(id, RegistryShards) }

// putReplicated writes item (the canonical one, conditional on expected) and
// its replicas (same attributes, replica keys, no index keys) in one
// transaction. Refused condition or a concurrent transaction: ErrConflict.
func (r *Registry) putReplicated(ctx context.Context, what string, item map[string]types.AttributeValue, expected int64, replicaPK func(k int) string) error {
	canonical := &dynamodb.PutItemInput{TableName: aws.String(r.table), Item: item}
	regVersionCondition(canonical, expected)
	n := RegistryShards
	items := make([]types.TransactWriteItem, 0, n+1)
	items = append(items, types.TransactWriteItem{Put: &types.Put{
		TableName: canonical.TableName, Item: item, ConditionExpression: canonical.ConditionExpression,
		ExpressionAttributeNames: canonical.ExpressionAttributeNames, ExpressionAttributeValues: canonical.ExpressionAttributeValues,
	}})
	for k := 0; k < n; k++ {
		rep := make(map[string]types.AttributeValue, len(item))
		for a, v := range item {
			switch a {
			case "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk":
				continue
			}
			rep[a] = v
		}
		rep["pk"] = avS(replicaPK(k))
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(r.table), Item: rep}})
	}
	_, err := r.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, c := range tc.CancellationReasons {
			switch aws.ToString(c.Code) {
			case "ConditionalCheckFailed", "TransactionConflict":
				return fmt.Errorf("%s changed since version %d was read: %w", what, expected, core.ErrConflict)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", what, err)
	}
	return nil
}

// SourcePK is the partition key of a bot's source item.
func SourcePK(bot, sourceID string) string {
	return sourcePfx + url.PathEscape(bot) + "#" + sourceID
}

func regCCF(err error) (*types.ConditionalCheckFailedException, bool) {
	var ccf *types.ConditionalCheckFailedException
	return ccf, errors.As(err, &ccf)
}

// versionCondition makes a write conditional on the stored version
// (0: the item must not exist).
func regVersionCondition(in *dynamodb.PutItemInput, expected int64) {
	if expected == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
		return
	}
	in.ConditionExpression = aws.String("#v = :v")
	in.ExpressionAttributeNames = map[string]string{"#v": "version"}
	in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": avN(expected)}
}

// ---- grants ----

func marshalGrant(g *core.Grant) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(grantToItem(g))
	if err != nil {
		return nil, fmt.Errorf("marshal grant %s: %w", g.ID, err)
	}
	item["pk"], item["sk"] = avS(GrantPK(g.ID)), avS(grantSK)
	item["gsi1pk"], item["gsi1sk"] = avS(grantsGSI), avS(g.ID)
	return item, nil
}

// unmarshalAs decodes a stored item as I and converts it; what names the
// item in the error.
func unmarshalAs[I, T any](item map[string]types.AttributeValue, what string, from func(*I) T) (T, error) {
	var it I
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		var zero T
		return zero, fmt.Errorf("unmarshal %s: %w", what, err)
	}
	return from(&it), nil
}

func unmarshalGrant(item map[string]types.AttributeValue) (*core.Grant, error) {
	return unmarshalAs(item, "grant", grantFromItem)
}

// GetGrant reads a grant with a strongly consistent read.
func (r *Registry) GetGrant(ctx context.Context, id string) (*core.Grant, error) {
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.table), Key: key(GrantPK(id), grantSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get grant %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("grant %s: %w", id, core.ErrNotFound)
	}
	return unmarshalGrant(out.Item)
}

// PutGrant writes g and its replicas in one transaction if the stored
// version is expected (0: absent).
func (r *Registry) PutGrant(ctx context.Context, g *core.Grant, expected int64) error {
	item, err := marshalGrant(g)
	if err != nil {
		return err
	}
	return r.putReplicated(ctx, "grant "+g.ID, item, expected, func(k int) string { return GrantReplicaPK(g.ID, k) })
}

// SeedGrant creates g unless a grant with its id exists (then it changes
// nothing and returns false). Local stacks and tests seed dev grants with it.
func (r *Registry) SeedGrant(ctx context.Context, g core.Grant) (bool, error) {
	if g.Version == 0 {
		g.Version = 1
	}
	now := time.Now().UTC()
	if g.CreatedAt.IsZero() {
		g.CreatedAt = now
	}
	if g.UpdatedAt.IsZero() {
		g.UpdatedAt = now
	}
	if g.UpdatedBy == "" {
		g.UpdatedBy = "seed"
	}
	err := r.PutGrant(ctx, &g, 0)
	if errors.Is(err, core.ErrConflict) {
		return false, nil
	}
	return err == nil, err
}

// ListGrants pages through grants by id over gsi1 (eventually consistent).
func (r *Registry) ListGrants(ctx context.Context, bot, cursor string, limit int) ([]*core.Grant, string, error) {
	items, next, err := hydratedPage(ctx, r.db, r.table, "grants", cursorShape{partitionAttr: "gsi1pk", partition: grantsGSI, pkPrefix: grantPfx, sk: grantSK}, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]*core.Grant, 0, len(items))
	for _, item := range items {
		g, err := unmarshalGrant(item)
		if err != nil {
			return nil, "", err
		}
		if bot != "" && g.Bot != bot {
			continue // the index holds keys only, so the bot filter applies here
		}
		out = append(out, g)
	}
	return out, next, nil
}

// ---- capabilities ----

func unmarshalCapability(item map[string]types.AttributeValue) (*core.Capability, error) {
	return unmarshalAs(item, "capability", capabilityFromItem)
}

// GetCapability reads an account's capability state (ErrNotFound: none).
func (r *Registry) GetCapability(ctx context.Context, provider, account string) (*core.Capability, error) {
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.table), Key: key(CapabilityPK(provider, account), capabilitySK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get capability %s/%s: %w", provider, account, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("capability %s/%s: %w", provider, account, core.ErrNotFound)
	}
	return unmarshalCapability(out.Item)
}

// PutCapability writes c and its replicas in one transaction if the stored
// version is expected (0: absent).
func (r *Registry) PutCapability(ctx context.Context, c *core.Capability, expected int64) error {
	item, err := attributevalue.MarshalMap(capabilityToItem(c))
	if err != nil {
		return fmt.Errorf("marshal capability: %w", err)
	}
	item["pk"], item["sk"] = avS(CapabilityPK(c.Provider, c.Account)), avS(capabilitySK)
	return r.putReplicated(ctx, "capability "+c.Provider+"/"+c.Account, item, expected,
		func(k int) string { return CapabilityReplicaPK(c.Provider, c.Account, k) })
}

// ---- sources ----

func unmarshalSource(item map[string]types.AttributeValue) (*core.SourceState, error) {
	return unmarshalAs(item, "source", sourceFromItem)
}

// AdvanceSource moves a source's revision forward with one conditional
// update (attribute_not_exists(revision) OR revision < :r); an older or equal
// revision fails the condition and the current state is returned unchanged.
// deleted is sticky and is recorded whatever the revision (a second,
// conditional update when the revision did not move).
func (r *Registry) AdvanceSource(ctx context.Context, bot, id string, revision *int64, deleted bool, now time.Time) (*core.SourceState, bool, error) {
	k := key(SourcePK(bot, id), sourceSK)
	// gsi2 (the profile index) lists the source with its bot's outbox, so a
	// profile backup carries the revisions its intents are checked against.
	names := map[string]string{"#r": "revision", "#d": "deleted", "#u": "updatedAt", "#b": "bot", "#s": "sourceId", "#g2p": "gsi2pk", "#g2s": "gsi2sk"}
	vals := map[string]types.AttributeValue{
		":u": avS(now.UTC().Format(time.RFC3339Nano)), ":b": avS(bot), ":s": avS(id),
		":g2p": avS(ProfilePK(bot, id, ProfileShards)), ":g2s": avS("SOURCE#" + id),
		":t": &types.AttributeValueMemberBOOL{Value: true}, ":f": &types.AttributeValueMemberBOOL{Value: false},
	}
	update := func(expr, cond string, vals map[string]types.AttributeValue) (map[string]types.AttributeValue, bool, error) {
		out, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(r.table), Key: k,
			UpdateExpression: aws.String(expr), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			return out.Attributes, true, nil
		}
		ccf, ok := regCCF(err)
		if !ok {
			return nil, false, fmt.Errorf("update source %s: %w", id, err)
		}
		if len(ccf.Item) > 0 {
			return ccf.Item, false, nil
		}
		got, gerr := r.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.table), Key: k, ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			return nil, false, fmt.Errorf("read source %s: %w", id, gerr)
		}
		return got.Item, false, nil
	}
	var item map[string]types.AttributeValue
	var applied bool
	var err error
	if revision != nil {
		v := map[string]types.AttributeValue{":r": avN(*revision)}
		for kk, vv := range vals {
			v[kk] = vv
		}
		// DynamoDB refuses unused expression values.
		del := "if_not_exists(#d, :f)"
		delete(v, ":t")
		if deleted {
			del = ":t"
			v[":t"] = vals[":t"]
			delete(v, ":f")
		}
		item, applied, err = update("SET #g2p = :g2p, #g2s = :g2s, #r = :r, #d = "+del+", #u = :u, #b = :b, #s = :s",
			"attribute_not_exists(#r) OR #r < :r", v)
		if err != nil {
			return nil, false, err
		}
	}
	if deleted && !applied {
		// Not moved forward (or no revision given): record the deletion anyway.
		v := map[string]types.AttributeValue{":z": avN(0)}
		for kk, vv := range vals {
			v[kk] = vv
		}
		item, applied, err = update("SET #g2p = :g2p, #g2s = :g2s, #d = :t, #u = :u, #b = :b, #s = :s, #r = if_not_exists(#r, :z)",
			"attribute_not_exists(#d) OR #d = :f", v)
		if err != nil {
			return nil, false, err
		}
	}
	st, err := unmarshalSource(item)
	if err != nil {
		return nil, false, err
	}
	return st, applied, nil
}

// ---- revalidation facts ----

// ReadFacts reads the intent's grant, its account's capability (the
// replicas of the intent's shard) and (if it names one) its source in one
// strongly consistent BatchGetItem.
func (r *Registry) ReadFacts(ctx context.Context, in *core.Intent) (core.RevalidationFacts, error) {
	f, _, err := r.readFacts(ctx, in)
	return f, err
}

var _ core.InlinePreflight = (*Registry)(nil)

// Preflight reads what an inline attempt decides before its put in the one
// BatchGetItem of ReadFacts: the facts, the barrier shard covering the
// intent (as BarrierUp reads it) and the gate's replica for the intent (as
// Gates.StateFor reads it first).
func (r *Registry) Preflight(ctx context.Context, in *core.Intent) (core.Preflight, error) {
	gateKey := gate.GateKey(in.Provider, in.Account)
	bk := barrierKey(in.Bot, shardOf(in.ID, BarrierShards))
	gk := gateReplicaKey(gateKey, shardOf(in.ID, RegistryShards))
	f, extra, err := r.readFacts(ctx, in, bk, gk)
	if err != nil {
		return core.Preflight{}, err
	}
	pf := core.Preflight{Facts: f}
	if _, pf.BarrierUp, err = barrierFrom(extra[0], in); err != nil {
		return pf, err
	}
	pf.GateClean = !boolAttr(extra[1], "dirty")
	return pf, nil
}

// readFacts is ReadFacts reading the extra keys in the same batch: their
// items come back in the order asked (nil where none exists).
func (r *Registry) readFacts(ctx context.Context, in *core.Intent, extra ...map[string]types.AttributeValue) (core.RevalidationFacts, []map[string]types.AttributeValue, error) {
	k := shardOf(in.ID, RegistryShards)
	keys := []map[string]types.AttributeValue{
		key(GrantReplicaPK(in.Grant.ID, k), grantSK),
		key(CapabilityReplicaPK(in.Provider, in.Account, k), capabilitySK),
	}
	if in.Source != nil {
		keys = append(keys, key(SourcePK(in.Bot, in.Source.ID), sourceSK))
	}
	keys = append(keys, extra...)
	extraItems := make([]map[string]types.AttributeValue, len(extra))
	pkOf := func(item map[string]types.AttributeValue) string {
		v, _ := item["pk"].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	extraAt := make(map[string]int, len(extra)) // by pk: no fact shares one
	for j, ek := range extra {
		extraAt[pkOf(ek)] = j
	}
	var f core.RevalidationFacts
	tries := max(r.BatchTries, 1)
	for i := 0; len(keys) > 0; i++ {
		if i == tries {
			return f, nil, fmt.Errorf("read revalidation facts of %s: %d keys unprocessed after %d tries", in.ID, len(keys), tries)
		}
		if i > 0 {
			select {
			case <-ctx.Done():
				return f, nil, ctx.Err()
			case <-time.After(time.Duration(25<<i) * time.Millisecond):
			}
		}
		out, err := r.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{r.table: {Keys: keys, ConsistentRead: aws.Bool(true)}},
		})
		if err != nil {
			return f, nil, fmt.Errorf("read revalidation facts of %s: %w", in.ID, err)
		}
		for _, item := range out.Responses[r.table] {
			if j, ok := extraAt[pkOf(item)]; ok {
				extraItems[j] = item
				continue
			}
			sk, _ := item["sk"].(*types.AttributeValueMemberS)
			if sk == nil {
				continue
			}
			switch sk.Value {
			case grantSK:
				if f.Grant, err = unmarshalGrant(item); err != nil {
					return f, nil, err
				}
			case capabilitySK:
				if f.Capability, err = unmarshalCapability(item); err != nil {
					return f, nil, err
				}
			case sourceSK:
				if f.Source, err = unmarshalSource(item); err != nil {
					return f, nil, err
				}
			}
		}
		keys = out.UnprocessedKeys[r.table].Keys
	}
	return f, extraItems, nil
}
