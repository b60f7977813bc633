package dynamo

// Account gates (issue 15): pace, 429 pauses and the circuit breaker of a
// provider account, shared by every worker.
//
//	GATE#<provider>#<account>, GATE          the gate: next free slot, pause, breaker, operator's pace
//	GATE#<provider>#<account>, EVENT#<time>  an operator event (breaker opened/closed): its ledger record (opevents.go)
//
//	GATEREP#<k>#<provider>#<account>, GATE   replica k (k < RegistryShards): dirty=true, or absent
//
// A paced attempt costs one UpdateItem (ADD on the slot counter, which
// returns the whole gate: pause, breaker and the operator's pace come back
// with it) and the gate's GetItem right before its send; an unpaced attempt
// one strongly consistent GetItem of the replica of its intent's shard
// (StateFor). Everything else (pause, failure count, open, probe, close) is
// written only when it happens. The gate item is per account, so its write
// rate is the account's send rate (plus deferrals): within one partition's
// 1,000 writes/s for any rate a provider allows one account.
//
// Replicas (issue 13): an unpaced account is read by every attempt (one bot
// at 2,000/s would read one item 2,000 times a second; a partition serves
// 3,000 RCU/s). A replica holds no state, only whether the gate may be
// anything but clean (gate.CleanGate): a clean replica (absent) answers the
// zero state, a dirty one sends the reader to the gate itself. Invariant:
// whenever the gate is not clean, it carries rd=true, and rd=true means
// every replica is dirty. Kept with transactions, never with copies:
//   - a change that makes the gate unclean (a pause, an open, an operator's
//     pace) is one conditional write "rd = true AND ..." when the replicas
//     are already marked; otherwise one transaction that makes the change,
//     sets rd and marks every replica (an open, a 429 on a clean account:
//     rare). A failure streak below the threshold does not make it unclean
//     (Admit never reads the count): a failure is one plain write;
//   - the breaker's own moves (probe, re-open, close, the streak's reset)
//     stay single writes on the gate (it is unclean while they happen, so
//     every reader is on the gate: one winner per probe, as without replicas);
//   - a reader that finds a dirty replica and a clean gate tidies: one
//     transaction, conditional on the gate being clean (and rd), removes rd
//     and deletes the replicas.
// So a replica read at any instant is as safe as a gate read at that
// instant: it answers "clean" only while the gate is clean.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
)

// Gates is the DynamoDB GateStore.
type Gates struct {
	db    API
	table string
	// TidyEvery spaces one process's tries to tidy a gate's replicas
	// (default 1 s).
	TidyEvery time.Duration

	tidied sync.Map // key -> time.Time of this process's last tidy try
}

var _ gate.GateStore = (*Gates)(nil)

// NewGates returns the gate store over table.
func NewGates(db API, table string) *Gates {
	return &Gates{db: db, table: table}
}

const (
	gateSK     = "GATE"
	gateEvtPfx = "EVENT#"
	// gatesListing is the gsi1 key listing every gate that was ever unclean
	// (paused, opened, given an operator's pace): written once per account.
	gatesListing = "GATES"
)

// GatePK is the partition key of a gate's items.
func GatePK(key string) string { return "GATE#" + key }

func gateKey(k string) map[string]types.AttributeValue {
	return key(GatePK(k), gateSK)
}

// GateReplicaPK is the partition key of replica k of a gate.
func GateReplicaPK(key string, k int) string { return "GATEREP#" + strconv.Itoa(k) + "#" + key }

func gateReplicaKey(gate string, k int) map[string]types.AttributeValue {
	return key(GateReplicaPK(gate, k), gateSK)
}

// replicaMarks are the transaction items that mark every replica of key
// dirty (sending its readers to the gate itself).
func (g *Gates) replicaMarks(key string) []types.TransactWriteItem {
	items := make([]types.TransactWriteItem, 0, RegistryShards)
	for k := 0; k < RegistryShards; k++ {
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(g.table), Key: gateReplicaKey(key, k),
			UpdateExpression:          aws.String("SET dirty = :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": avBool(true)},
		}})
	}
	return items
}

func avBool(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }

func boolAttr(item map[string]types.AttributeValue, name string) bool {
	v, ok := item[name].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func avN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func avT(t time.Time) types.AttributeValue {
	return avN(t.UnixNano())
}

func numAttr(item map[string]types.AttributeValue, name string) (int64, bool) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	x, err := strconv.ParseInt(v.Value, 10, 64)
	return x, err == nil
}

func timeAttr(item map[string]types.AttributeValue, name string) *time.Time {
	x, ok := numAttr(item, name)
	if !ok {
		return nil
	}
	t := time.Unix(0, x).UTC()
	return &t
}

func strAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func gateState(item map[string]types.AttributeValue) gate.GateState {
	var st gate.GateState
	if item == nil {
		return st
	}
	st.PausedUntil = timeAttr(item, "pausedUntil")
	if v, ok := item["open"].(*types.AttributeValueMemberBOOL); ok {
		st.Breaker.Open = v.Value
	}
	f, _ := numAttr(item, "failures")
	o, _ := numAttr(item, "opens")
	st.Breaker.Failures, st.Breaker.Opens = int(f), int(o)
	st.Breaker.OpenUntil = timeAttr(item, "openUntil")
	st.Breaker.ProbeUntil = timeAttr(item, "probeUntil")
	st.Breaker.OpenedAt = timeAttr(item, "openedAt")
	st.Breaker.ClosedAt = timeAttr(item, "closedAt")
	if rate, ok := numAttr(item, "paceRate"); ok {
		per, _ := numAttr(item, "pacePer")
		burst, _ := numAttr(item, "paceBurst")
		o := &gate.PaceOverride{Pace: gate.Pace{Rate: int(rate), Per: time.Duration(per), Burst: max(int(burst), 1)},
			Reason: strAttr(item, "paceReason"), By: strAttr(item, "paceBy")}
		if t := timeAttr(item, "paceAt"); t != nil {
			o.At = *t
		}
		st.Override = o
	}
	return st
}

func isCCF(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// claimRing is how many claims Take remembers on the gate item: a claim
// lives in entry hash(claim) mod claimRing (its 32-bit hash and its expiry,
// a few bytes each, so the gate item stays well under 1 KB and every write
// one WCU). Another claim hashing to the same entry overwrites it; then a
// late duplicate takes a slot of its own (wasted, never an extra send: the
// claim on the intent decides who sends).
const claimRing = 32

func claimEntry(claim string) (int, int64) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(claim))
	v := h.Sum32()
	return int(v % claimRing), int64(v)
}

// Take is GCRA in one UpdateItem while the counter is busy ("ADD tat" on
// the condition that it stands at or after the floor), returning the whole
// gate; after an idle spell (the condition failed, and the item it returns
// shows the counter behind the floor) a second one sets it from At on the
// opposite condition. The counter only moves forward, so a third try (the
// busy form again, after another worker moved an idle counter first)
// cannot fail but for the claim (SlotTake.Valid keeps an idle counter's new
// value at or after the floor). A claim adds its ring entry to either
// form, on the condition that the entry does not hold it unexpired.
func (g *Gates) Take(ctx context.Context, key string, r gate.SlotTake) (time.Time, gate.GateState, bool, error) {
	if err := r.Valid(); err != nil {
		return time.Time{}, gate.GateState{}, false, fmt.Errorf("take a slot of %s: %w", key, err)
	}
	var names map[string]string
	claim := map[string]types.AttributeValue{}
	busySet, idleSet, cond := "ADD tat :i", "SET tat = :next", ""
	held := func(map[string]types.AttributeValue) bool { return false }
	if r.Claim != "" {
		i, h := claimEntry(r.Claim)
		now := r.At.UnixMilli()
		names = map[string]string{"#c": fmt.Sprintf("c%02d", i), "#x": fmt.Sprintf("x%02d", i)}
		claim[":h"], claim[":u"], claim[":now"] = avN(h), avN(r.Until.UnixMilli()), avN(now)
		busySet, idleSet = "SET #c = :h, #x = :u ADD tat :i", idleSet+", #c = :h, #x = :u"
		cond = " AND NOT (#c = :h AND #x > :now)"
		// held: the item (a failed condition's) holds this claim unexpired.
		held = func(item map[string]types.AttributeValue) bool {
			c, _ := numAttr(item, names["#c"])
			x, _ := numAttr(item, names["#x"])
			return c == h && x > now
		}
	}
	busy := &dynamodb.UpdateItemInput{UpdateExpression: aws.String(busySet),
		ConditionExpression:       aws.String("tat >= :floor" + cond),
		ExpressionAttributeValues: map[string]types.AttributeValue{":i": avN(int64(r.Interval)), ":floor": avT(r.Floor)}}
	idle := &dynamodb.UpdateItemInput{UpdateExpression: aws.String(idleSet),
		ConditionExpression:       aws.String("(attribute_not_exists(tat) OR tat < :floor)" + cond),
		ExpressionAttributeValues: map[string]types.AttributeValue{":next": avT(r.At.Add(r.Interval)), ":floor": avT(r.Floor)}}
	for _, in := range []*dynamodb.UpdateItemInput{busy, idle, busy} {
		in.TableName, in.Key, in.ExpressionAttributeNames = aws.String(g.table), gateKey(key), names
		in.ReturnValues, in.ReturnValuesOnConditionCheckFailure = types.ReturnValueAllNew, types.ReturnValuesOnConditionCheckFailureAllOld
		maps.Copy(in.ExpressionAttributeValues, claim)
		out, err := g.db.UpdateItem(ctx, in)
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if held(ccf.Item) {
				return time.Time{}, gateState(ccf.Item), true, nil
			}
			continue // the counter's other form
		}
		if err != nil {
			return time.Time{}, gate.GateState{}, false, fmt.Errorf("take a slot of %s: %w", key, err)
		}
		tat, _ := numAttr(out.Attributes, "tat")
		return time.Unix(0, tat-int64(r.Interval)).UTC(), gateState(out.Attributes), false, nil
	}
	return time.Time{}, gate.GateState{}, false, fmt.Errorf("take a slot of %s: the counter moved back", key)
}

// State is one strongly consistent GetItem.
func (g *Gates) State(ctx context.Context, key string) (gate.GateState, error) {
	out, err := g.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(g.table), Key: gateKey(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return gate.GateState{}, fmt.Errorf("read gate %s: %w", key, err)
	}
	return gateState(out.Item), nil
}

// StateFor is one strongly consistent GetItem of the replica of id's
// shard; a dirty replica sends the reader to the gate (State), and a
// reader that then finds the gate clean tidies the replicas.
func (g *Gates) StateFor(ctx context.Context, key, id string, now time.Time) (gate.GateState, error) {
	out, err := g.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(g.table),
		Key: gateReplicaKey(key, shardOf(id, RegistryShards)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return gate.GateState{}, fmt.Errorf("read gate %s: %w", key, err)
	}
	if !boolAttr(out.Item, "dirty") {
		return gate.GateState{}, nil // the gate is clean: nothing to read there
	}
	st, err := g.State(ctx, key)
	if err != nil {
		return st, err
	}
	if gate.CleanGate(st, now) {
		g.tidy(ctx, key, now)
	}
	return st, nil
}

// cleanCond is gate.CleanGate as a condition on the gate item (:cut = now
// less gate.GateCleanSettle).
const cleanCond = "(attribute_not_exists(#o) OR #o = :f)" +
	" AND attribute_not_exists(probeUntil) AND attribute_not_exists(paceRate)" +
	" AND (attribute_not_exists(pausedUntil) OR pausedUntil <= :cut)"

// tidy removes the gate's replica marks once the gate is clean: one
// transaction, conditional on the gate being clean and marked, that removes
// rd and deletes every replica. At most one try per key per second from
// one process; a try that loses (the gate changed, a write collided) only
// leaves the marks for a later reader.
func (g *Gates) tidy(ctx context.Context, key string, now time.Time) {
	wall := time.Now()
	every := g.TidyEvery
	if every <= 0 {
		every = time.Second
	}
	if v, ok := g.tidied.Load(key); ok && wall.Sub(v.(time.Time)) < every {
		return
	}
	g.tidied.Store(key, wall)
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: aws.String(g.table), Key: gateKey(key),
		UpdateExpression:         aws.String("REMOVE rd"),
		ConditionExpression:      aws.String("rd = :t AND " + cleanCond),
		ExpressionAttributeNames: map[string]string{"#o": "open"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": avBool(true), ":f": avBool(false),
			":cut": avT(now.Add(-gate.GateCleanSettle))},
	}}}
	for k := 0; k < RegistryShards; k++ {
		items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(g.table), Key: gateReplicaKey(key, k)}})
	}
	_, _ = g.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
}

// gateChange is a change that may make the gate unclean.
type gateChange struct {
	set, add, remove string // expression clauses without their keyword ("" none)
	cond             string // the change's own condition ("" none)
	names            map[string]string
	vals             map[string]types.AttributeValue
	also             []types.TransactWriteItem // written with the change (an operator event)
}

func (c gateChange) expr(markRD bool) string {
	set := c.set
	if markRD {
		// The first change that makes a gate unclean also lists it for the
		// operators' overview (gsi1 GATES, ListGates): the same write, and
		// an index write only the first time (the keys never change after).
		set = strings.TrimPrefix(set+", rd = :rdt, gsi1pk = :gatesPK, gsi1sk = :gatesSK", ", ")
	}
	var parts []string
	for _, p := range []struct{ kw, clause string }{{"SET ", set}, {"ADD ", c.add}, {"REMOVE ", c.remove}} {
		if p.clause != "" {
			parts = append(parts, p.kw+p.clause)
		}
	}
	return strings.Join(parts, " ")
}

// update is the change as a transaction item on the gate, conditional on
// cond and on the change's own condition.
func (g *Gates) update(key string, c gateChange, markRD bool, cond string) types.TransactWriteItem {
	vals := map[string]types.AttributeValue{":rdt": avBool(true)}
	if markRD {
		vals[":gatesPK"], vals[":gatesSK"] = avS(gatesListing), avS(key)
	}
	for k, v := range c.vals {
		vals[k] = v
	}
	if c.cond != "" {
		cond = "(" + cond + ") AND (" + c.cond + ")"
	}
	upd := &types.Update{TableName: aws.String(g.table), Key: gateKey(key), UpdateExpression: aws.String(c.expr(markRD)),
		ExpressionAttributeValues: vals, ConditionExpression: aws.String(cond),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	if len(c.names) > 0 {
		upd.ExpressionAttributeNames = c.names
	}
	return types.TransactWriteItem{Update: upd}
}

// unclean applies a change that may make the gate unclean, keeping the
// replicas' invariant: the gate's own write when rd is already set (one
// UpdateItem, or a transaction with the change's other items), else one
// transaction that also sets rd and marks every replica dirty. It reports
// whether the change's own condition held.
//
// The marking transaction is conditional on rd being unset: when several
// workers see the same 429 at once, each finds the gate unmarked, but only
// the first marks the replicas (17 items, 34 write units on AWS); the
// others' transactions are cancelled and they go back to the single write.
func (g *Gates) unclean(ctx context.Context, key string, c gateChange) (bool, error) {
	own := append([]types.TransactWriteItem{g.update(key, c, false, "rd = :rdt")}, c.also...)
	marking := append(append([]types.TransactWriteItem{g.update(key, c, true, "attribute_not_exists(rd) OR rd <> :rdt")}, c.also...), g.replicaMarks(key)...)
	for round := 0; round < 4; round++ {
		ok, old, err := g.write(ctx, key, own)
		if err != nil || ok {
			return ok, err
		}
		if boolAttr(old, "rd") {
			return false, nil // marked: the change's own condition failed
		}
		ok, old, err = g.write(ctx, key, marking)
		if err != nil || ok {
			return ok, err
		}
		if !boolAttr(old, "rd") {
			return false, nil // still unmarked: the change's own condition failed
		}
		// Marked by another writer meanwhile: the gate's own write again.
	}
	return false, fmt.Errorf("gate %s: marked and tidied under every try", key)
}

// write runs items — one UpdateItem when the gate's update is all there is,
// else a transaction, tried again (with jitter, a few times) when it
// collided with another write of the same items. When the first item's
// condition fails it reports false and the gate as it was (read when the
// store did not return it).
func (g *Gates) write(ctx context.Context, key string, items []types.TransactWriteItem) (bool, map[string]types.AttributeValue, error) {
	if len(items) == 1 && items[0].Update != nil {
		u := items[0].Update
		_, err := g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key,
			UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return false, g.orRead(ctx, key, ccf.Item), nil
		}
		return err == nil, nil, err
	}
	for try := 0; ; try++ {
		_, err := g.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		var tce *types.TransactionCanceledException
		conflict := false
		if errors.As(err, &tce) {
			for _, r := range tce.CancellationReasons {
				switch aws.ToString(r.Code) {
				case "ConditionalCheckFailed":
					return false, g.orRead(ctx, key, tce.CancellationReasons[0].Item), nil
				case "TransactionConflict":
					conflict = true
				}
			}
		}
		if conflict && try < 8 {
			t := time.NewTimer(time.Duration(5*(try+1))*time.Millisecond + time.Duration(rand.Int64N(int64(10*time.Millisecond))))
			select {
			case <-ctx.Done():
				t.Stop()
				return false, nil, ctx.Err()
			case <-t.C:
			}
			continue
		}
		return err == nil, nil, err
	}
}

// orRead is item, or the gate read now when the store returned none.
func (g *Gates) orRead(ctx context.Context, key string, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item != nil {
		return item
	}
	got, err := g.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(g.table), Key: gateKey(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil
	}
	return got.Item
}

// Pause raises pausedUntil (never lowers it) and moves the slot counter to
// at least until, so every slot handed out afterwards is after the pause.
func (g *Gates) Pause(ctx context.Context, key string, until time.Time) error {
	_, err := g.unclean(ctx, key, gateChange{set: "pausedUntil = :u", cond: "attribute_not_exists(pausedUntil) OR pausedUntil < :u",
		vals: map[string]types.AttributeValue{":u": avT(until)}})
	if err != nil {
		return fmt.Errorf("pause %s: %w", key, err)
	}
	_, err = g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(g.table), Key: gateKey(key),
		UpdateExpression: aws.String("SET tat = :u"), ConditionExpression: aws.String("attribute_not_exists(tat) OR tat < :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": avT(until)},
	})
	if err != nil && !isCCF(err) {
		return fmt.Errorf("pause %s: %w", key, err)
	}
	return nil
}

// Failure adds one to the consecutive failure count: one plain UpdateItem.
// A streak does not change what the gate admits (gate.Admit reads pause,
// open, probe and pace, never the count), so it leaves the replicas alone;
// the open that ends a streak marks them (Open). Successes learn of the
// streak from the worker that counted the failure (gate.Gate), not from
// the replicas.
func (g *Gates) Failure(ctx context.Context, key string) (gate.GateState, error) {
	out, err := g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(g.table), Key: gateKey(key),
		UpdateExpression:          aws.String("ADD failures :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN(1)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return gate.GateState{}, fmt.Errorf("count failure %s: %w", key, err)
	}
	return gateState(out.Attributes), nil
}

// eventPut is ev's operator-event ledger record in key's partition (see
// opevents.go), unpublished and due at once: the move and its event are one
// write, and the event is published once even if this worker dies now.
func (g *Gates) eventPut(key string, gev gate.Event) (*types.Put, error) {
	ev := core.GateOperatorEvent(gev)
	item, err := claimItem(ev, "", ev.At)
	if err != nil {
		return nil, err
	}
	item["pk"] = avS(GatePK(key))
	return &types.Put{TableName: aws.String(g.table), Item: item}, nil
}

// Open opens a closed breaker and records the event with it (marking the
// replicas if they are not: an open is what makes readers look at the
// gate); with reopen it extends an open breaker's cooldown after a failed
// probe.
func (g *Gates) Open(ctx context.Context, key string, until time.Time, reopen bool, ev gate.Event) (bool, error) {
	vals := map[string]types.AttributeValue{":u": avT(until), ":one": avN(1), ":t": avBool(true)}
	names := map[string]string{"#o": "open"}
	if reopen {
		ok, _, err := g.write(ctx, key, []types.TransactWriteItem{{Update: &types.Update{TableName: aws.String(g.table), Key: gateKey(key),
			UpdateExpression: aws.String("SET openUntil = :u ADD opens :one REMOVE probeUntil"), ConditionExpression: aws.String("#o = :t"),
			ExpressionAttributeNames: names, ExpressionAttributeValues: vals}}})
		if err != nil {
			return false, fmt.Errorf("re-open %s: %w", key, err)
		}
		return ok, nil
	}
	vals[":at"] = avT(ev.At)
	put, err := g.eventPut(key, ev)
	if err != nil {
		return false, err
	}
	ok, err := g.unclean(ctx, key, gateChange{set: "#o = :t, openUntil = :u, openedAt = :at", add: "opens :one", remove: "probeUntil",
		cond: "attribute_not_exists(#o) OR #o <> :t", names: names, vals: vals, also: []types.TransactWriteItem{{Put: put}}})
	if err != nil {
		return false, fmt.Errorf("open %s: %w", key, err)
	}
	return ok, nil
}

// TakeProbe lets one caller probe a half-open breaker.
func (g *Gates) TakeProbe(ctx context.Context, key string, now, until time.Time) (bool, error) {
	_, err := g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(g.table), Key: gateKey(key),
		UpdateExpression:          aws.String("SET probeUntil = :u"),
		ConditionExpression:       aws.String("#o = :t AND (attribute_not_exists(openUntil) OR openUntil <= :now) AND (attribute_not_exists(probeUntil) OR probeUntil <= :now)"),
		ExpressionAttributeNames:  map[string]string{"#o": "open"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": avT(until), ":now": avT(now), ":t": &types.AttributeValueMemberBOOL{Value: true}},
	})
	if isCCF(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("take probe %s: %w", key, err)
	}
	return true, nil
}

// Close closes an open breaker (recording ev in the same transaction), or
// else only resets the failure count. The reset comes first, as one write
// conditional on a closed breaker with a streak running: the successes that
// end a streak usually come together (every worker whose read saw the
// streak), and only the first of them needs to write; an open breaker
// (the probe's success) fails it and takes the transaction.
func (g *Gates) Close(ctx context.Context, key string, ev gate.Event) (bool, error) {
	_, err := g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(g.table), Key: gateKey(key),
		UpdateExpression:                    aws.String("SET failures = :zero"),
		ConditionExpression:                 aws.String("(attribute_not_exists(#o) OR #o = :f) AND failures > :zero"),
		ExpressionAttributeNames:            map[string]string{"#o": "open"},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":zero": avN(0), ":f": avBool(false)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return false, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return false, fmt.Errorf("reset failures %s: %w", key, err)
	}
	if !boolAttr(ccf.Item, "open") {
		return false, nil // no streak left to end: another success reset it
	}
	upd := &types.Update{
		TableName: aws.String(g.table), Key: gateKey(key),
		UpdateExpression:          aws.String("SET #o = :f, failures = :zero, opens = :zero, closedAt = :at REMOVE openUntil, probeUntil"),
		ConditionExpression:       aws.String("#o = :t"),
		ExpressionAttributeNames:  map[string]string{"#o": "open"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":f": avBool(false), ":t": avBool(true), ":zero": avN(0), ":at": avT(ev.At)},
	}
	put, err := g.eventPut(key, ev)
	if err != nil {
		return false, err
	}
	ok, _, err := g.write(ctx, key, []types.TransactWriteItem{{Update: upd}, {Put: put}})
	if err != nil {
		return false, fmt.Errorf("close %s: %w", key, err)
	}
	return ok, nil
}

// SetOverride stores or removes the operator's pace.
func (g *Gates) SetOverride(ctx context.Context, key string, o *gate.PaceOverride) error {
	if o != nil {
		// An operator's pace makes the gate unclean: unpaced readers must
		// see it (they then take slots).
		_, err := g.unclean(ctx, key, gateChange{
			set: "paceRate = :r, pacePer = :p, paceBurst = :b, paceReason = :why, paceBy = :by, paceAt = :at",
			vals: map[string]types.AttributeValue{
				":r": avN(int64(o.Pace.Rate)), ":p": avN(int64(o.Pace.Per)), ":b": avN(int64(o.Pace.Burst)),
				":why": avS(o.Reason), ":by": avS(o.By), ":at": avT(o.At),
			}})
		if err != nil {
			return fmt.Errorf("set pace %s: %w", key, err)
		}
		return nil
	}
	in := &dynamodb.UpdateItemInput{TableName: aws.String(g.table), Key: gateKey(key),
		UpdateExpression: aws.String("REMOVE paceRate, pacePer, paceBurst, paceReason, paceBy, paceAt")}
	if _, err := g.db.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("set pace %s: %w", key, err)
	}
	return nil
}

// Events queries the gate's operator-event records, newest first.
func (g *Gates) Events(ctx context.Context, key string, limit int) ([]gate.Event, error) {
	out, err := g.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(g.table),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :e)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": avS(GatePK(key)), ":e": avS(gateEvtPfx),
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, fmt.Errorf("list events %s: %w", key, err)
	}
	evs := make([]gate.Event, 0, len(out.Items))
	for _, item := range out.Items {
		var it opEventItem
		if err := attributevalue.UnmarshalMap(item, &it); err != nil {
			return nil, fmt.Errorf("unmarshal event of %s: %w", key, err)
		}
		ev := it.event()
		evs = append(evs, gate.Event{ID: ev.ID, Kind: ev.Type, At: ev.At, Provider: ev.Provider, Account: ev.Account, Detail: ev.Reason})
	}
	return evs, nil
}

// ListGates lists the gates that were ever unclean (a pause, a breaker
// open, an operator's pace), by key (gate.GateKey), up to limit, with
// whether more exist. One keys-only Query page of the GATES listing per
// 1 MB; the listing grows by one entry per account, once.
func (g *Gates) ListGates(ctx context.Context, limit int) ([]string, bool, error) {
	var keys []string
	var start map[string]types.AttributeValue
	for {
		out, err := g.db.Query(ctx, listingQuery(g.table, gsiName, gatesListing, start, min(max(limit-len(keys), 1)+1, 1000)))
		if err != nil {
			return nil, false, fmt.Errorf("list gates: %w", err)
		}
		for _, it := range out.Items {
			if len(keys) == limit {
				return keys, true, nil
			}
			keys = append(keys, strAttr(it, "gsi1sk"))
		}
		if out.LastEvaluatedKey == nil {
			return keys, false, nil
		}
		start = out.LastEvaluatedKey
	}
}
