package dynamo

// Account gates (issue 15): pace, 429 pauses and the circuit breaker of a
// provider account, shared by every worker.
//
//	GATE#<provider>#<account>, GATE          the gate: next free slot, pause, breaker, operator's pace
//	GATE#<provider>#<account>, EVENT#<time>  an operator event (breaker opened/closed), TTL 90 days
//
// A paced attempt costs one UpdateItem (ADD on the slot counter, which
// returns the whole gate: pause, breaker and the operator's pace come back
// with it); an unpaced attempt one strongly consistent GetItem. Everything
// else (pause, failure count, open, probe, close) is written only when it
// happens. The gate item is per account, so its write rate is the account's
// send rate (plus deferrals): within one partition's 1,000 writes/s for any
// rate a provider allows one account.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// Gates is the DynamoDB GateStore.
type Gates struct {
	db    API
	table string
	// EventTTL is how long operator events are kept (default 90 days).
	EventTTL time.Duration
}

var _ core.GateStore = (*Gates)(nil)

// NewGates returns the gate store over table.
func NewGates(db API, table string) *Gates {
	return &Gates{db: db, table: table, EventTTL: 90 * 24 * time.Hour}
}

const (
	gateSK     = "GATE"
	gateEvtPfx = "EVENT#"
)

// GatePK is the partition key of a gate's items.
func GatePK(key string) string { return "GATE#" + key }

func gateKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": avS(GatePK(key)), "sk": avS(gateSK)}
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

func gateState(item map[string]types.AttributeValue) core.GateState {
	var st core.GateState
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
		o := &core.PaceOverride{Pace: core.Pace{Rate: int(rate), Per: time.Duration(per), Burst: max(int(burst), 1)},
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

// Reserve is one UpdateItem: ADD interval to the slot counter, returning the whole gate.
func (g *Gates) Reserve(ctx context.Context, key string, interval time.Duration) (time.Time, core.GateState, error) {
	out, err := g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.table),
		Key:                       gateKey(key),
		UpdateExpression:          aws.String("ADD tat :i"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":i": avN(int64(interval))},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return time.Time{}, core.GateState{}, fmt.Errorf("reserve %s: %w", key, err)
	}
	tat, _ := numAttr(out.Attributes, "tat")
	return time.Unix(0, tat-int64(interval)).UTC(), gateState(out.Attributes), nil
}

// claimRing is how many claims ReserveOnce remembers on the gate item: a
// claim lives in entry hash(claim) mod claimRing (its 32-bit hash and its
// expiry, a few bytes each, so the gate item stays well under 1 KB and every
// write one WCU). Another claim hashing to the same entry overwrites it;
// then a late duplicate reserves a slot of its own (wasted, never an extra
// send: the claim on the intent decides who sends).
const claimRing = 32

func claimEntry(claim string) (int, int64) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(claim))
	v := h.Sum32()
	return int(v % claimRing), int64(v)
}

// ReserveOnce is Reserve recording the claim in the same UpdateItem, on the
// condition that the claim's entry does not hold it unexpired.
func (g *Gates) ReserveOnce(ctx context.Context, key string, interval time.Duration, claim string, now, until time.Time) (time.Time, core.GateState, bool, error) {
	i, h := claimEntry(claim)
	out, err := g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(g.table),
		Key:                      gateKey(key),
		UpdateExpression:         aws.String("SET #c = :h, #x = :u ADD tat :i"),
		ConditionExpression:      aws.String("NOT (#c = :h AND #x > :now)"),
		ExpressionAttributeNames: map[string]string{"#c": fmt.Sprintf("c%02d", i), "#x": fmt.Sprintf("x%02d", i)},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":i": avN(int64(interval)), ":h": avN(h), ":u": avN(until.UnixMilli()), ":now": avN(now.UnixMilli()),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if isCCF(err) {
		var ccf *types.ConditionalCheckFailedException
		errors.As(err, &ccf)
		return time.Time{}, gateState(ccf.Item), true, nil
	}
	if err != nil {
		return time.Time{}, core.GateState{}, false, fmt.Errorf("reserve %s: %w", key, err)
	}
	tat, _ := numAttr(out.Attributes, "tat")
	return time.Unix(0, tat-int64(interval)).UTC(), gateState(out.Attributes), false, nil
}

// CatchUp sets the slot counter to next if it is still at or before now.
func (g *Gates) CatchUp(ctx context.Context, key string, now, next time.Time) (bool, error) {
	_, err := g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(g.table),
		Key:                       gateKey(key),
		UpdateExpression:          aws.String("SET tat = :next"),
		ConditionExpression:       aws.String("attribute_not_exists(tat) OR tat <= :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":next": avT(next), ":now": avT(now)},
	})
	if isCCF(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("catch up %s: %w", key, err)
	}
	return true, nil
}

// State is one strongly consistent GetItem.
func (g *Gates) State(ctx context.Context, key string) (core.GateState, error) {
	out, err := g.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(g.table), Key: gateKey(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return core.GateState{}, fmt.Errorf("read gate %s: %w", key, err)
	}
	return gateState(out.Item), nil
}

// Pause raises pausedUntil (never lowers it) and moves the slot counter to
// at least until, so every slot handed out afterwards is after the pause.
func (g *Gates) Pause(ctx context.Context, key string, until time.Time) error {
	for _, upd := range []struct{ expr, cond string }{
		{"SET pausedUntil = :u", "attribute_not_exists(pausedUntil) OR pausedUntil < :u"},
		{"SET tat = :u", "attribute_not_exists(tat) OR tat < :u"},
	} {
		_, err := g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(g.table), Key: gateKey(key),
			UpdateExpression: aws.String(upd.expr), ConditionExpression: aws.String(upd.cond),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": avT(until)},
		})
		if err != nil && !isCCF(err) {
			return fmt.Errorf("pause %s: %w", key, err)
		}
	}
	return nil
}

// Failure adds one to the consecutive failure count.
func (g *Gates) Failure(ctx context.Context, key string) (core.GateState, error) {
	out, err := g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(g.table), Key: gateKey(key),
		UpdateExpression:          aws.String("ADD failures :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN(1)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return core.GateState{}, fmt.Errorf("count failure %s: %w", key, err)
	}
	return gateState(out.Attributes), nil
}

func (g *Gates) eventPut(key string, ev core.OperatorEvent) *types.Put {
	return &types.Put{
		TableName: aws.String(g.table),
		Item: map[string]types.AttributeValue{
			"pk": avS(GatePK(key)), "sk": avS(gateEvtPfx + ev.At.UTC().Format(timeKey) + "#" + ev.Kind),
			"kind": avS(ev.Kind), "provider": avS(ev.Provider), "account": avS(ev.Account),
			"at": avT(ev.At), "detail": avS(ev.Detail),
			"expiresAt": avN(ev.At.Add(g.EventTTL).Unix()),
		},
	}
}

// transact runs items and reports false when the condition of the first failed.
func (g *Gates) transact(ctx context.Context, items []types.TransactWriteItem) (bool, error) {
	_, err := g.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return false, nil
			}
		}
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// Open opens a closed breaker and records the event in one transaction; with
// reopen it extends an open breaker's cooldown after a failed probe.
func (g *Gates) Open(ctx context.Context, key string, until time.Time, reopen bool, ev core.OperatorEvent) (bool, error) {
	vals := map[string]types.AttributeValue{":u": avT(until), ":one": avN(1), ":t": &types.AttributeValueMemberBOOL{Value: true}}
	upd := &types.Update{TableName: aws.String(g.table), Key: gateKey(key), ExpressionAttributeValues: vals}
	if reopen {
		upd.UpdateExpression = aws.String("SET openUntil = :u ADD opens :one REMOVE probeUntil")
		upd.ConditionExpression = aws.String("#o = :t")
		upd.ExpressionAttributeNames = map[string]string{"#o": "open"}
		ok, err := g.transact(ctx, []types.TransactWriteItem{{Update: upd}})
		if err != nil {
			return false, fmt.Errorf("re-open %s: %w", key, err)
		}
		return ok, nil
	}
	vals[":at"] = avT(ev.At)
	upd.UpdateExpression = aws.String("SET #o = :t, openUntil = :u, openedAt = :at ADD opens :one REMOVE probeUntil")
	upd.ConditionExpression = aws.String("attribute_not_exists(#o) OR #o <> :t")
	upd.ExpressionAttributeNames = map[string]string{"#o": "open"}
	ok, err := g.transact(ctx, []types.TransactWriteItem{{Update: upd}, {Put: g.eventPut(key, ev)}})
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
// else only resets the failure count.
func (g *Gates) Close(ctx context.Context, key string, ev core.OperatorEvent) (bool, error) {
	upd := &types.Update{
		TableName: aws.String(g.table), Key: gateKey(key),
		UpdateExpression:          aws.String("SET #o = :f, failures = :zero, opens = :zero, closedAt = :at REMOVE openUntil, probeUntil"),
		ConditionExpression:       aws.String("#o = :t"),
		ExpressionAttributeNames:  map[string]string{"#o": "open"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":f": &types.AttributeValueMemberBOOL{Value: false}, ":t": &types.AttributeValueMemberBOOL{Value: true}, ":zero": avN(0), ":at": avT(ev.At)},
	}
	ok, err := g.transact(ctx, []types.TransactWriteItem{{Update: upd}, {Put: g.eventPut(key, ev)}})
	if err != nil {
		return false, fmt.Errorf("close %s: %w", key, err)
	}
	if ok {
		return true, nil
	}
	_, err = g.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(g.table), Key: gateKey(key),
		UpdateExpression:          aws.String("SET failures = :zero"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":zero": avN(0)},
	})
	if err != nil {
		return false, fmt.Errorf("reset failures %s: %w", key, err)
	}
	return false, nil
}

// SetOverride stores or removes the operator's pace.
func (g *Gates) SetOverride(ctx context.Context, key string, o *core.PaceOverride) error {
	in := &dynamodb.UpdateItemInput{TableName: aws.String(g.table), Key: gateKey(key)}
	if o == nil {
		in.UpdateExpression = aws.String("REMOVE paceRate, pacePer, paceBurst, paceReason, paceBy, paceAt")
	} else {
		in.UpdateExpression = aws.String("SET paceRate = :r, pacePer = :p, paceBurst = :b, paceReason = :why, paceBy = :by, paceAt = :at")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":r": avN(int64(o.Pace.Rate)), ":p": avN(int64(o.Pace.Per)), ":b": avN(int64(o.Pace.Burst)),
			":why": avS(o.Reason), ":by": avS(o.By), ":at": avT(o.At),
		}
	}
	if _, err := g.db.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("set pace %s: %w", key, err)
	}
	return nil
}

// Events queries the gate's event items, newest first.
func (g *Gates) Events(ctx context.Context, key string, limit int) ([]core.OperatorEvent, error) {
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
	evs := make([]core.OperatorEvent, 0, len(out.Items))
	for _, it := range out.Items {
		ev := core.OperatorEvent{Kind: strAttr(it, "kind"), Provider: strAttr(it, "provider"), Account: strAttr(it, "account"), Detail: strAttr(it, "detail")}
		if t := timeAttr(it, "at"); t != nil {
			ev.At = *t
		}
		evs = append(evs, ev)
	}
	return evs, nil
}
