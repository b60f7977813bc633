package main

import (
	"context"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/botharness/outbox/adapters/dynamo"
)

// meter is an SDK middleware on every DynamoDB client of the run (the stack's
// and the raw baseline's alike, so both pay for it). It asks DynamoDB for the
// consumed capacity of every item operation (ReturnConsumedCapacity=INDEXES,
// which DynamoDB Local honours, GSI writes included) and counts requests and
// capacity by operation. Calls made with uncounted(ctx) (the harness's own
// polling) are neither changed nor counted.
type meter struct {
	mu sync.Mutex
	c  counts
	// keys, when set, counts item accesses by "class pk|sk": class "write"
	// (puts, updates, condition checks, transaction items), "get" (single
	// reads) or "batch" (BatchGetItem: hydration and revalidation).
	keys map[string]int64
}

// trackKeys starts (or stops, with false) counting accesses per item.
func (m *meter) trackKeys(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if on {
		m.keys = map[string]int64{}
	} else {
		m.keys = nil
	}
}

func (m *meter) keyCounts() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.keys)
}

func itemKey(key map[string]types.AttributeValue) string {
	pk, _ := key["pk"].(*types.AttributeValueMemberS)
	sk, _ := key["sk"].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return ""
	}
	return pk.Value + "|" + sk.Value
}

// accessesOf lists the items a request touches, by class.
func accessesOf(params any) []string {
	var out []string
	add := func(class string, key map[string]types.AttributeValue) {
		if k := itemKey(key); k != "" {
			out = append(out, class+" "+k)
		}
	}
	switch p := params.(type) {
	case *dynamodb.PutItemInput:
		add("write", p.Item)
	case *dynamodb.UpdateItemInput:
		add("write", p.Key)
	case *dynamodb.DeleteItemInput:
		add("write", p.Key)
	case *dynamodb.GetItemInput:
		add("get", p.Key)
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				add("write", it.Put.Item)
			case it.Update != nil:
				add("write", it.Update.Key)
			case it.ConditionCheck != nil:
				add("write", it.ConditionCheck.Key)
			case it.Delete != nil:
				add("write", it.Delete.Key)
			}
		}
	case *dynamodb.BatchGetItemInput:
		for _, ka := range p.RequestItems {
			for _, k := range ka.Keys {
				add("batch", k)
			}
		}
	}
	return out
}

// counts is a snapshot of what the meter saw.
type counts struct {
	// Ops counts requests by "Operation:KIND", KIND being the item type from
	// the partition key prefix (INTENT, TOKEN, GRANT, ...) where there is one.
	Ops map[string]int64
	// Time is the total client-side latency by the same labels.
	Time map[string]time.Duration
	// CU is the consumed capacity (read or write units) by the same labels.
	CU map[string]float64
	// GSI is the part of CU spent on GSIs, by label.
	GSI map[string]float64
	WCU float64 // write capacity units (table + GSIs)
	RCU float64 // read capacity units
	// GSIWCU is the part of WCU spent maintaining the GSI.
	GSIWCU float64
}

func newCounts() counts {
	return counts{Ops: map[string]int64{}, Time: map[string]time.Duration{}, CU: map[string]float64{}, GSI: map[string]float64{}}
}

// meanMS is the mean latency of each label in milliseconds.
func (c counts) meanMS() map[string]float64 {
	out := map[string]float64{}
	for k, n := range c.Ops {
		if n > 0 {
			out[k] = round(float64(c.Time[k].Microseconds())/1000/float64(n), 2)
		}
	}
	return out
}

type noCountKey struct{}

// uncounted marks ctx so the meter leaves its calls alone.
func uncounted(ctx context.Context) context.Context {
	return context.WithValue(ctx, noCountKey{}, true)
}

func (m *meter) reset() {
	m.mu.Lock()
	m.c = newCounts()
	m.mu.Unlock()
}

func (m *meter) snapshot() counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := newCounts()
	for k, v := range m.c.Ops {
		s.Ops[k] = v
		s.Time[k] = m.c.Time[k]
		s.CU[k] = m.c.CU[k]
		s.GSI[k] = m.c.GSI[k]
	}
	s.WCU, s.RCU, s.GSIWCU = m.c.WCU, m.c.RCU, m.c.GSIWCU
	return s
}

var writeOps = []string{"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
var readOps = []string{"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}

// Labels are "<caller> <Operation>[:KIND]": caller "api" for requests made
// while serving the HTTP API (authorizer, intake), "worker" for everything
// else (stream and queue pollers: claim, revalidation, outcome).
type callerKey struct{}

func withCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

func callerOf(ctx context.Context) string {
	if c, ok := ctx.Value(callerKey{}).(string); ok {
		return c
	}
	return "worker"
}

func splitLabel(label string) (caller, op string) {
	caller, rest, _ := strings.Cut(label, " ")
	op, _, _ = strings.Cut(rest, ":")
	return caller, op
}

func (c counts) sum(ops []string, caller string) int64 {
	var n int64
	for label, v := range c.Ops {
		who, op := splitLabel(label)
		if (caller == "" || caller == who) && slices.Contains(ops, op) {
			n += v
		}
	}
	return n
}

// writes counts write requests of every caller.
func (c counts) writes() int64 { return c.sum(writeOps, "") }

// sqsRequests counts the SQS requests of every caller (receives that
// returned messages only; a batch is one request).
func (c counts) sqsRequests() int64 {
	return c.sum([]string{"SQS.SendMessage", "SQS.SendMessageBatch", "SQS.DeleteMessage", "SQS.DeleteMessageBatch", "SQS.ReceiveMessage"}, "")
}

// s3Requests counts S3 object requests of every caller.
func (c counts) s3Requests() int64 { return c.sum([]string{"S3.PutObject", "S3.GetObject"}, "") }

// workerReads counts the reads of the delivery side (claim, revalidation, outcome).
func (c counts) workerReads() int64 { return c.sum(readOps, "worker") }

// byOp merges the callers: "GetItem:TOKEN" -> n.
func (c counts) byOp() map[string]int64 {
	out := map[string]int64{}
	for label, v := range c.Ops {
		_, rest, _ := strings.Cut(label, " ")
		out[rest] += v
	}
	return out
}

// kindOf is the item type in a key: "INTENT" for "INTENT#it_x".
func kindOf(key map[string]types.AttributeValue) string {
	if k, ok := key["pk"].(*types.AttributeValueMemberS); ok {
		kind, _, _ := strings.Cut(k.Value, "#")
		return kind
	}
	return ""
}

func label(op, kind string) string {
	if kind == "" {
		return op
	}
	return op + ":" + kind
}

func (m *meter) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("benchMeter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if v, _ := ctx.Value(noCountKey{}).(bool); v {
				return next.HandleInitialize(ctx, in)
			}
			op, write := "", false
			const rc = types.ReturnConsumedCapacityIndexes
			switch p := in.Parameters.(type) {
			case *dynamodb.PutItemInput:
				op, write, p.ReturnConsumedCapacity = label("PutItem", kindOf(p.Item)), true, rc
			case *dynamodb.UpdateItemInput:
				op, write, p.ReturnConsumedCapacity = label("UpdateItem", kindOf(p.Key)), true, rc
			case *dynamodb.DeleteItemInput:
				op, write, p.ReturnConsumedCapacity = label("DeleteItem", kindOf(p.Key)), true, rc
			case *dynamodb.TransactWriteItemsInput:
				op, write, p.ReturnConsumedCapacity = "TransactWriteItems", true, rc
			case *dynamodb.BatchWriteItemInput:
				op, write, p.ReturnConsumedCapacity = "BatchWriteItem", true, rc
			case *dynamodb.GetItemInput:
				op, p.ReturnConsumedCapacity = label("GetItem", kindOf(p.Key)), rc
			case *dynamodb.QueryInput:
				op, p.ReturnConsumedCapacity = label("Query", aws.ToString(p.IndexName)), rc
			case *dynamodb.ScanInput:
				op, p.ReturnConsumedCapacity = "Scan", rc
			case *dynamodb.BatchGetItemInput:
				op, p.ReturnConsumedCapacity = "BatchGetItem", rc
			case *dynamodb.TransactGetItemsInput:
				op, p.ReturnConsumedCapacity = "TransactGetItems", rc
			case *dynamodbstreams.GetRecordsInput:
				op = "Streams.GetRecords" // the stream poller: no capacity, counted to show its cost
			case *s3.PutObjectInput:
				op = "S3.PutObject" // claim-checked payloads (and backups)
			case *s3.GetObjectInput:
				op = "S3.GetObject"
			case *sqs.SendMessageInput:
				op = "SQS.SendMessage" // requests billed by SQS (the cost model, inline.go)
			case *sqs.SendMessageBatchInput:
				op = "SQS.SendMessageBatch"
			case *sqs.DeleteMessageInput:
				op = "SQS.DeleteMessage"
			case *sqs.DeleteMessageBatchInput:
				op = "SQS.DeleteMessageBatch"
			case *sqs.ReceiveMessageInput:
				op = "SQS.ReceiveMessage" // counted only when it returned messages (below)
			default:
				return next.HandleInitialize(ctx, in)
			}
			op = callerOf(ctx) + " " + op
			t0 := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			took := time.Since(t0)
			var cc []types.ConsumedCapacity
			switch r := out.Result.(type) {
			case *dynamodb.PutItemOutput:
				cc = one(r.ConsumedCapacity)
			case *dynamodb.UpdateItemOutput:
				cc = one(r.ConsumedCapacity)
			case *dynamodb.DeleteItemOutput:
				cc = one(r.ConsumedCapacity)
			case *dynamodb.TransactWriteItemsOutput:
				cc = r.ConsumedCapacity
				if p, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput); ok {
					cc = transactWCU(p, cc)
				}
			case *dynamodb.BatchWriteItemOutput:
				cc = r.ConsumedCapacity
			case *dynamodb.GetItemOutput:
				cc = one(r.ConsumedCapacity)
			case *dynamodb.QueryOutput:
				cc = one(r.ConsumedCapacity)
			case *dynamodb.ScanOutput:
				cc = one(r.ConsumedCapacity)
			case *dynamodb.BatchGetItemOutput:
				cc = r.ConsumedCapacity
			case *dynamodb.TransactGetItemsOutput:
				cc = r.ConsumedCapacity
			}
			if rm, ok := out.Result.(*sqs.ReceiveMessageOutput); op == callerOf(ctx)+" SQS.ReceiveMessage" && (!ok || len(rm.Messages) == 0) {
				// An empty long poll: a fixed cost of the pollers (in AWS, of
				// the event source mapping), not of a delivered intent.
				return out, md, err
			}
			// A failed conditional write still consumes capacity on AWS, but
			// the SDK drops the body, so failed calls count as requests only.
			m.mu.Lock()
			if m.c.Ops == nil {
				m.c = newCounts()
			}
			if m.keys != nil && err == nil {
				for _, a := range accessesOf(in.Parameters) {
					m.keys[callerOf(ctx)+":"+a]++
				}
			}
			m.c.Ops[op]++
			m.c.Time[op] += took
			for _, c := range cc {
				units := deref(c.CapacityUnits)
				m.c.CU[op] += units
				if write {
					m.c.WCU += units
					for _, g := range c.GlobalSecondaryIndexes {
						m.c.GSIWCU += deref(g.CapacityUnits)
					}
				} else {
					m.c.RCU += units
				}
				for _, g := range c.GlobalSecondaryIndexes {
					m.c.GSI[op] += deref(g.CapacityUnits)
				}
			}
			m.mu.Unlock()
			return out, md, err
		}), middleware.After)
}

func one(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

// routeTimer wraps the sandbox to time its requests server-side, by route.
type routeTimer struct {
	h  http.Handler
	mu sync.Mutex
	n  map[string]int64
	t  map[string]time.Duration
}

func (rt *routeTimer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	t0 := time.Now()
	rt.h.ServeHTTP(w, req)
	took := time.Since(t0)
	key := req.Method + " " + req.URL.Path
	if i := strings.LastIndexByte(req.URL.Path, '/'); i >= 0 {
		key = req.Method + " " + req.URL.Path[i+1:]
	}
	rt.mu.Lock()
	if rt.n == nil {
		rt.n, rt.t = map[string]int64{}, map[string]time.Duration{}
	}
	rt.n[key]++
	rt.t[key] += took
	rt.mu.Unlock()
}

func (rt *routeTimer) reset() {
	rt.mu.Lock()
	rt.n, rt.t = nil, nil
	rt.mu.Unlock()
}

// meanMS is the mean server-side time per route in milliseconds, and the count.
func (rt *routeTimer) summary() map[string]any {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := map[string]any{}
	for k, n := range rt.n {
		out[k] = map[string]any{"n": n, "mean_ms": round(float64(rt.t[k].Microseconds())/1000/float64(n), 3)}
	}
	return out
}

// transactWCU is a write transaction's capacity by AWS's rule: two write
// units per KB (rounded up) of every item it writes or checks. DynamoDB
// Local reports 2 for a whole transaction whatever its items (17 small
// items: 2, where AWS charges 34), which would hide what multi-item
// transactions cost. The size of an item an Update, Delete or ConditionCheck
// touches is not in the request: counted as one KB (the gate and its
// replicas, the only such items, are far below it).
func transactWCU(in *dynamodb.TransactWriteItemsInput, reported []types.ConsumedCapacity) []types.ConsumedCapacity {
	units := 0.0
	var table *string
	for _, it := range in.TransactItems {
		kb := 1.0
		switch {
		case it.Put != nil:
			table = it.Put.TableName
			kb = math.Max(1, math.Ceil(float64(dynamo.ItemSize(it.Put.Item, dynamo.NumberBytesDynamoDB))/1024))
		case it.Update != nil:
			table = it.Update.TableName
		case it.Delete != nil:
			table = it.Delete.TableName
		case it.ConditionCheck != nil:
			table = it.ConditionCheck.TableName
		}
		units += 2 * kb
	}
	out := []types.ConsumedCapacity{{TableName: table, CapacityUnits: &units}}
	for _, c := range reported { // keep what the emulator says of the indexes
		if len(c.GlobalSecondaryIndexes) > 0 {
			out[0].GlobalSecondaryIndexes = c.GlobalSecondaryIndexes
		}
	}
	return out
}
