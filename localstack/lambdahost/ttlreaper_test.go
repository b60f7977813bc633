package lambdahost

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"

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
