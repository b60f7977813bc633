package dispatcher

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

func rec(img map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{NewImage: img, SequenceNumber: "1"}}
}

func TestIntentOfOnlyPendingIntentItems(t *testing.T) {
	s := events.NewStringAttribute
	cases := []struct {
		name string
		img  map[string]events.DynamoDBAttributeValue
		id   string
		ok   bool
	}{
		{"pending intent", map[string]events.DynamoDBAttributeValue{"sk": s("INTENT"), "status": s("pending"), "id": s("it_1")}, "it_1", true},
		{"in-flight intent", map[string]events.DynamoDBAttributeValue{"sk": s("INTENT"), "status": s("in-flight"), "id": s("it_1")}, "", false},
		{"other item", map[string]events.DynamoDBAttributeValue{"sk": s("GRANT"), "status": s("pending"), "id": s("g")}, "", false},
		{"status not a string", map[string]events.DynamoDBAttributeValue{"sk": s("INTENT"), "status": events.NewNumberAttribute("1"), "id": s("it_1")}, "", false},
		{"no id", map[string]events.DynamoDBAttributeValue{"sk": s("INTENT"), "status": s("pending")}, "", false},
		{"removed", nil, "", false},
	}
	for _, c := range cases {
		id, ok := intentOf(rec(c.img))
		if id != c.id || ok != c.ok {
			t.Errorf("%s: got %q %v", c.name, id, ok)
		}
	}
}
