package lambdahost

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/handlers/pruner"
	"github.com/botharness/outbox/localstack/lambdahost/streamfilter"
)

// The pruner's filter selects exactly what AWS's TTL service writes for an
// ended intent; AWSShape turns the local TTL deletes (the reaper's, and
// DynamoDB Local's own "UNKNOWN_TO_SDK_VERSION" record) into that shape and
// leaves every other record alone.
func TestAWSShapeAndThePrunerFilter(t *testing.T) {
	f, err := streamfilter.Compile(pruner.StreamFilterPattern)
	if err != nil {
		t.Fatal(err)
	}
	s := events.NewStringAttribute
	keys := map[string]events.DynamoDBAttributeValue{"pk": s("INTENT#it_x"), "sk": s("INTENT")}
	intent := map[string]events.DynamoDBAttributeValue{"pk": s("INTENT#it_x"), "sk": s("INTENT"), "status": s("succeeded"), "expiresAt": events.NewNumberAttribute("100")}
	live := map[string]events.DynamoDBAttributeValue{"pk": s("INTENT#it_x"), "sk": s("INTENT"), "status": s("needs-human"), "expiresAt": events.NewNumberAttribute("100")}
	tomb := map[string]events.DynamoDBAttributeValue{"pk": s("INTENT#it_x"), "sk": s("INTENT"), "ps": s("succeeded"), "expiresAt": events.NewNumberAttribute("100")}
	page := map[string]events.DynamoDBAttributeValue{"pk": s("INTENT#it_x"), "sk": s("HIST#000001"), "expiresAt": events.NewNumberAttribute("100")}
	rec := func(name string, old map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{EventName: name, Change: events.DynamoDBStreamRecord{Keys: keys, OldImage: old}}
	}
	reaped := func(events.DynamoDBEventRecord) bool { return true }
	cases := []struct {
		name string
		in   events.DynamoDBEventRecord
		ttl  func(events.DynamoDBEventRecord) bool
		want bool
	}{
		{"DynamoDB Local's own TTL record of an ended intent", rec("UNKNOWN_TO_SDK_VERSION", intent), nil, true},
		{"the reaper's delete of an ended intent", rec("REMOVE", intent), reaped, true},
		{"a user's delete (not the reaper's)", rec("REMOVE", intent), func(events.DynamoDBEventRecord) bool { return false }, false},
		{"a delete with no reaper at all", rec("REMOVE", intent), nil, false},
		{"a tombstone's own expiry", rec("REMOVE", tomb), reaped, false},
		{"a history page's expiry", rec("REMOVE", page), reaped, false},
		{"a non-terminal intent (never expires; never pruned)", rec("REMOVE", live), reaped, false},
		{"an outcome write", events.DynamoDBEventRecord{EventName: "MODIFY", Change: events.DynamoDBStreamRecord{Keys: keys, NewImage: intent, OldImage: live}}, reaped, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := AWSShape(c.in, c.ttl)
			if m := f.Match(streamfilter.RecordForFilter(got)); m != c.want {
				t.Fatalf("pruner filter matched %v, want %v (record %+v, identity %+v)", m, c.want, got.EventName, got.UserIdentity)
			}
			if c.want && !pruner.IsTTLDelete(got) {
				t.Fatalf("%+v is not a TTL delete to the pruner", got)
			}
		})
	}
}

// inFlight counts the reaper's deletes in flight against the real emulator.
type inFlight struct {
	*dynamodb.Client
	mu        sync.Mutex
	now, peak int
}

func (c *inFlight) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.mu.Lock()
	c.now++
	c.peak = max(c.peak, c.now)
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.now--; c.mu.Unlock() }()
	return c.Client.DeleteItem(ctx, in, optFns...)
}

// A sweep's deletes go out side by side (DefaultTTLDeleters), so its stream
// records come as one burst inside the pruner mapping's batching window, as
// AWS's TTL service deletes in bursts: one by one, a loaded machine spread
// a sweep over more than the window and the pruner wrote an archive object
// per fragment. Only expired items go, and an item rewritten after the scan
// is left alone.
func TestReaperSweepIsOneBurst(t *testing.T) {
	cfg := integrationConfig(t, "AWS_ENDPOINT_URL_DYNAMODB")
	ddb := dynamodb.NewFromConfig(cfg)
	table := createStreamTable(t, ddb)
	ctx := context.Background()
	now := time.Now()
	put := func(pk string, exp time.Time) {
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: "INTENT"},
			"expiresAt": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(exp.Unix(), 10)},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	const expired = 64
	for i := 0; i < expired; i++ {
		put(fmt.Sprintf("INTENT#old-%d", i), now.Add(-time.Minute))
	}
	put("INTENT#young", now.Add(time.Hour))
	c := &inFlight{Client: ddb}
	r, err := NewTTLReaper(TTLReaperConfig{DynamoDB: c, TableName: table, Attribute: "expiresAt", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.ReapOnce(ctx)
	if err != nil || n != expired {
		t.Fatalf("reaped %d (%v), want %d", n, err, expired)
	}
	if c.peak < 4 {
		t.Fatalf("at most %d deletes in flight at once, want the sweep side by side (up to %d)", c.peak, DefaultTTLDeleters)
	}
	out, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil || len(out.Items) != 1 {
		t.Fatalf("after the sweep %d items (%v), want only the unexpired one", len(out.Items), err)
	}
	t.Logf("%d deletes, at most %d in flight", n, c.peak)
}
