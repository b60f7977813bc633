package streamfilter

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/botharness/outbox/adapters/handlers/dispatcher"
)

func mustEvent(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test event: %v", err)
	}
	return m
}

func TestMatchOperators(t *testing.T) {
	ev := `{"a":"hello","n":3,"f":2.5,"b":true,"z":null,"arr":["x","y"],"nums":[1,7],
	        "obj":{"inner":"v","deep":{"k":"w"}},"empty":""}`
	cases := []struct {
		name    string
		pattern string
		want    bool
	}{
		{"exact string", `{"a":["hello"]}`, true},
		{"exact string OR", `{"a":["nope","hello"]}`, true},
		{"exact string miss", `{"a":["nope"]}`, false},
		{"string is not number", `{"a":[3]}`, false},
		{"number exact", `{"n":[3]}`, true},
		{"number exact float form", `{"n":[3.0]}`, true},
		{"number is not string", `{"n":["3"]}`, false},
		{"bool", `{"b":[true]}`, true},
		{"bool miss", `{"b":[false]}`, false},
		{"null", `{"z":[null]}`, true},
		{"null miss", `{"a":[null]}`, false},
		{"missing key literal", `{"nokey":["x"]}`, false},
		{"exists true", `{"a":[{"exists":true}]}`, true},
		{"exists true on null", `{"z":[{"exists":true}]}`, true},
		{"exists true missing", `{"nokey":[{"exists":true}]}`, false},
		{"exists false missing", `{"nokey":[{"exists":false}]}`, true},
		{"exists false present", `{"a":[{"exists":false}]}`, false},
		{"exists true on object is not leaf", `{"obj":[{"exists":true}]}`, false},
		{"exists false under missing parent", `{"nope":{"k":[{"exists":false}]}}`, true},
		{"exists true under missing parent", `{"nope":{"k":[{"exists":true}]}}`, false},
		{"prefix", `{"a":[{"prefix":"hel"}]}`, true},
		{"prefix miss", `{"a":[{"prefix":"xhel"}]}`, false},
		{"prefix empty string", `{"empty":[{"prefix":""}]}`, true},
		{"prefix on number", `{"n":[{"prefix":"3"}]}`, false},
		{"suffix", `{"a":[{"suffix":"llo"}]}`, true},
		{"equals-ignore-case", `{"a":[{"equals-ignore-case":"HeLLo"}]}`, true},
		{"anything-but list", `{"a":[{"anything-but":["x","y"]}]}`, true},
		{"anything-but list hit", `{"a":[{"anything-but":["x","hello"]}]}`, false},
		{"anything-but single", `{"a":[{"anything-but":"hello"}]}`, false},
		{"anything-but number", `{"n":[{"anything-but":[4,5]}]}`, true},
		{"anything-but number hit", `{"n":[{"anything-but":[3]}]}`, false},
		{"anything-but missing key", `{"nokey":[{"anything-but":["x"]}]}`, false},
		{"anything-but prefix", `{"a":[{"anything-but":{"prefix":"he"}}]}`, false},
		{"anything-but prefix other", `{"a":[{"anything-but":{"prefix":"zz"}}]}`, true},
		{"numeric range", `{"n":[{"numeric":[">",0,"<=",5]}]}`, true},
		{"numeric range miss", `{"n":[{"numeric":[">",3,"<=",5]}]}`, false},
		{"numeric upper bound inclusive", `{"n":[{"numeric":["<=",3]}]}`, true},
		{"numeric eq", `{"f":[{"numeric":["=",2.5]}]}`, true},
		{"numeric on string", `{"a":[{"numeric":[">",0]}]}`, false},
		{"numeric on missing", `{"nokey":[{"numeric":[">",0]}]}`, false},
		{"array value any element", `{"arr":["y"]}`, true},
		{"array value no element", `{"arr":["q"]}`, false},
		{"array value numeric", `{"nums":[{"numeric":[">",5]}]}`, true},
		{"nested object", `{"obj":{"inner":["v"],"deep":{"k":["w"]}}}`, true},
		{"nested object miss", `{"obj":{"deep":{"k":["nope"]}}}`, false},
		{"nested pattern on scalar", `{"a":{"inner":["v"]}}`, false},
		{"literal pattern on object", `{"obj":["v"]}`, false},
		{"AND across keys", `{"a":["hello"],"n":[4]}`, false},
		{"OR mixes operators", `{"a":[{"prefix":"zz"},"hello"]}`, true},
	}
	event := mustEvent(t, ev)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Match(tc.pattern, event)
			if err != nil {
				t.Fatalf("Match(%s): %v", tc.pattern, err)
			}
			if got != tc.want {
				t.Fatalf("Match(%s) = %v, want %v", tc.pattern, got, tc.want)
			}
		})
	}
}

func TestMatchGoNumericTypes(t *testing.T) {
	ev := map[string]any{"i": 3, "i64": int64(4), "num": json.Number("5")}
	for _, p := range []string{`{"i":[3]}`, `{"i64":[{"numeric":[">=",4]}]}`, `{"num":[5]}`} {
		ok, err := Match(p, ev)
		if err != nil || !ok {
			t.Errorf("Match(%s) = %v, %v; want true", p, ok, err)
		}
	}
}

func TestInvalidPatterns(t *testing.T) {
	bad := []string{
		``,
		`[]`,
		`"x"`,
		`{}`,
		`{"a":"x"}`,
		`{"a":5}`,
		`{"a":[]}`,
		`{"a":{}}`,
		`{"a":{"prefix":"x"}}`,
		`{"a":[{"prefix":1}]}`,
		`{"a":[{"exists":"yes"}]}`,
		`{"a":[{"numeric":[">"]}]}`,
		`{"a":[{"numeric":["!=",1]}]}`,
		`{"a":[{"numeric":[">","1"]}]}`,
		`{"a":[{"unknown-op":1}]}`,
		`{"a":[{"prefix":"x","suffix":"y"}]}`,
		`{"a":[{"anything-but":[]}]}`,
		`{"a":[["nested"]]}`,
		`{"a":["x"]} {"b":["y"]}`,
	}
	for _, p := range bad {
		if _, err := Match(p, map[string]any{"a": "x"}); err == nil {
			t.Errorf("Match(%q): expected an error", p)
		}
	}
}

func intentRecord(eventName string, newImage, oldImage map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	keys := map[string]events.DynamoDBAttributeValue{
		"pk": events.NewStringAttribute("BOT#b1#KEY#k1"),
		"sk": events.NewStringAttribute("INTENT"),
	}
	return events.DynamoDBEventRecord{
		AWSRegion:      "us-east-1",
		EventID:        "e1",
		EventName:      eventName,
		EventSource:    "aws:dynamodb",
		EventVersion:   "1.1",
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/outbox/stream/2026-01-01T00:00:00.000",
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Unix(1700000000, 0)},
			Keys:                        keys,
			NewImage:                    newImage,
			OldImage:                    oldImage,
			SequenceNumber:              "100000000000000000001",
			SizeBytes:                   120,
			StreamViewType:              "NEW_AND_OLD_IMAGES",
		},
	}
}

func image(sk, status string) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{
		"pk":      events.NewStringAttribute("BOT#b1#KEY#k1"),
		"sk":      events.NewStringAttribute(sk),
		"status":  events.NewStringAttribute(status),
		"attempt": events.NewNumberAttribute("0"),
		"payload": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
			"text": events.NewStringAttribute("hi"),
		}),
	}
}

func TestDispatcherPattern(t *testing.T) {
	cases := []struct {
		name string
		rec  events.DynamoDBEventRecord
		want bool
	}{
		{"INSERT pending intent", intentRecord("INSERT", image("INTENT", "pending"), nil), true},
		{"MODIFY back to pending (human re-queue)", intentRecord("MODIFY", image("INTENT", "pending"), image("INTENT", "needs-human")), true},
		{"MODIFY to in-flight (claim)", intentRecord("MODIFY", image("INTENT", "in-flight"), image("INTENT", "pending")), false},
		// Inline delivery (issue 26): the intake inserts the intent already
		// claimed; its attempt is the intake's, never the dispatcher's too.
		{"INSERT in-flight (inline intake)", intentRecord("INSERT", image("INTENT", "in-flight"), nil), false},
		{"MODIFY in-flight to succeeded (inline outcome)", intentRecord("MODIFY", image("INTENT", "succeeded"), image("INTENT", "in-flight")), false},
		{"MODIFY to succeeded", intentRecord("MODIFY", image("INTENT", "succeeded"), image("INTENT", "in-flight")), false},
		{"INSERT non-INTENT sk", intentRecord("INSERT", image("ATTEMPT#0001", "pending"), nil), false},
		{"INSERT uniqueness item without status", intentRecord("INSERT", map[string]events.DynamoDBAttributeValue{
			"pk": events.NewStringAttribute("EVENT#p#1"), "sk": events.NewStringAttribute("UNIQUE"),
		}, nil), false},
		{"REMOVE of a pending intent", intentRecord("REMOVE", nil, image("INTENT", "pending")), false},
		{"INSERT with INTENT as a prefix only", intentRecord("INSERT", image("INTENT#2", "pending"), nil), false},
		{"status stored as a number type", intentRecord("INSERT", map[string]events.DynamoDBAttributeValue{
			"sk": events.NewStringAttribute("INTENT"), "status": events.NewNumberAttribute("1"),
		}, nil), false},
	}
	p, err := Compile(dispatcher.StreamFilterPattern)
	if err != nil {
		t.Fatalf("StreamFilterPattern does not compile: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := RecordForFilter(tc.rec)
			if got := p.Match(doc); got != tc.want {
				b, _ := json.Marshal(doc)
				t.Fatalf("match = %v, want %v; document %s", got, tc.want, b)
			}
			got, err := Match(dispatcher.StreamFilterPattern, doc)
			if err != nil || got != tc.want {
				t.Fatalf("Match() = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestRecordForFilterShape(t *testing.T) {
	rec := intentRecord("MODIFY", image("INTENT", "pending"), image("INTENT", "in-flight"))
	rec.Change.NewImage["flags"] = events.NewStringSetAttribute([]string{"a"})
	rec.Change.NewImage["blob"] = events.NewBinaryAttribute([]byte{1, 2})
	rec.Change.NewImage["ok"] = events.NewBooleanAttribute(true)
	rec.Change.NewImage["nothing"] = events.NewNullAttribute()
	rec.Change.NewImage["list"] = events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewNumberAttribute("7")})
	doc := RecordForFilter(rec)

	if doc["eventName"] != "MODIFY" || doc["eventSource"] != "aws:dynamodb" || doc["eventSourceARN"] == nil {
		t.Fatalf("top-level fields wrong: %v", doc)
	}
	dyn, ok := doc["dynamodb"].(map[string]any)
	if !ok {
		t.Fatalf("no dynamodb object: %v", doc)
	}
	newImg := dyn["NewImage"].(map[string]any)
	if got := newImg["status"]; !jsonEqual(got, map[string]any{"S": "pending"}) {
		t.Errorf("status = %v", got)
	}
	if got := newImg["attempt"]; !jsonEqual(got, map[string]any{"N": "0"}) {
		t.Errorf("attempt = %v (numbers stay strings in DynamoDB JSON)", got)
	}
	if got := newImg["ok"]; !jsonEqual(got, map[string]any{"BOOL": true}) {
		t.Errorf("ok = %v", got)
	}
	if got := newImg["nothing"]; !jsonEqual(got, map[string]any{"NULL": true}) {
		t.Errorf("nothing = %v", got)
	}
	if got := newImg["list"]; !jsonEqual(got, map[string]any{"L": []any{map[string]any{"N": "7"}}}) {
		t.Errorf("list = %v", got)
	}
	if got := newImg["payload"]; !jsonEqual(got, map[string]any{"M": map[string]any{"text": map[string]any{"S": "hi"}}}) {
		t.Errorf("payload = %v", got)
	}
	if got := newImg["blob"]; !jsonEqual(got, map[string]any{"B": "AQI="}) {
		t.Errorf("blob = %v", got)
	}
	if _, ok := dyn["OldImage"].(map[string]any); !ok {
		t.Errorf("OldImage missing")
	}
	if _, ok := dyn["Keys"].(map[string]any); !ok {
		t.Errorf("Keys missing")
	}

	// Images a record does not carry are absent, so {"exists": false} works.
	ins := RecordForFilter(intentRecord("INSERT", image("INTENT", "pending"), nil))
	ok, err := Match(`{"dynamodb":{"OldImage":{"status":[{"exists":false}]}}}`, ins)
	if err != nil || !ok {
		t.Errorf("OldImage absence on INSERT: %v %v", ok, err)
	}
	ok, err = Match(`{"dynamodb":{"OldImage":{"status":{"S":[{"anything-but":["pending"]}]}}}}`, doc)
	if err != nil || !ok {
		t.Errorf("OldImage anything-but: %v %v", ok, err)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
