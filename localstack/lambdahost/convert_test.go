package lambdahost

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func TestConvertAttributeValueAllTypes(t *testing.T) {
	in := map[string]streamtypes.AttributeValue{
		"s":    &streamtypes.AttributeValueMemberS{Value: "str"},
		"n":    &streamtypes.AttributeValueMemberN{Value: "12.5"},
		"b":    &streamtypes.AttributeValueMemberB{Value: []byte{1, 2, 3}},
		"bool": &streamtypes.AttributeValueMemberBOOL{Value: true},
		"null": &streamtypes.AttributeValueMemberNULL{Value: true},
		"ss":   &streamtypes.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":   &streamtypes.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs":   &streamtypes.AttributeValueMemberBS{Value: [][]byte{{9}, {8}}},
		"l": &streamtypes.AttributeValueMemberL{Value: []streamtypes.AttributeValue{
			&streamtypes.AttributeValueMemberS{Value: "x"},
			&streamtypes.AttributeValueMemberN{Value: "1"},
		}},
		"m": &streamtypes.AttributeValueMemberM{Value: map[string]streamtypes.AttributeValue{
			"inner": &streamtypes.AttributeValueMemberM{Value: map[string]streamtypes.AttributeValue{
				"deep": &streamtypes.AttributeValueMemberBOOL{Value: false},
			}},
		}},
	}
	out, err := ConvertAttributeMap(in)
	if err != nil {
		t.Fatal(err)
	}
	if out["s"].String() != "str" || out["n"].Number() != "12.5" || string(out["b"].Binary()) != "\x01\x02\x03" ||
		!out["bool"].Boolean() || !out["null"].IsNull() {
		t.Errorf("scalars wrong: %+v", out)
	}
	if ss := out["ss"].StringSet(); len(ss) != 2 || ss[1] != "b" {
		t.Errorf("ss %v", ss)
	}
	if ns := out["ns"].NumberSet(); len(ns) != 2 || ns[0] != "1" {
		t.Errorf("ns %v", ns)
	}
	if bs := out["bs"].BinarySet(); len(bs) != 2 || bs[1][0] != 8 {
		t.Errorf("bs %v", bs)
	}
	if l := out["l"].List(); len(l) != 2 || l[0].String() != "x" || l[1].Number() != "1" {
		t.Errorf("l %v", l)
	}
	if deep := out["m"].Map()["inner"].Map()["deep"]; deep.DataType() != events.DataTypeBoolean || deep.Boolean() {
		t.Errorf("m %v", out["m"])
	}
	// The Lambda wire format (DynamoDB JSON) survives a round trip.
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]events.DynamoDBAttributeValue
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(back)
	if string(b) != string(b2) {
		t.Errorf("round trip changed: %s vs %s", b, b2)
	}
	if _, err := ConvertAttributeValue(nil); err == nil {
		t.Error("nil attribute value must be an error")
	}
	if m, err := ConvertAttributeMap(nil); err != nil || m != nil {
		t.Error("nil map must stay nil")
	}
}

func TestConvertStreamRecord(t *testing.T) {
	when := time.Unix(1700000000, 0).UTC()
	r := streamtypes.Record{
		AwsRegion:    aws.String("ddblocal"),
		EventID:      aws.String("ev-1"),
		EventName:    streamtypes.OperationTypeModify,
		EventSource:  aws.String("aws:dynamodb"),
		EventVersion: aws.String("1.1"),
		UserIdentity: &streamtypes.Identity{Type: aws.String("Service"), PrincipalId: aws.String("dynamodb.amazonaws.com")},
		Dynamodb: &streamtypes.StreamRecord{
			ApproximateCreationDateTime: &when,
			Keys:                        map[string]streamtypes.AttributeValue{"pk": &streamtypes.AttributeValueMemberS{Value: "p"}},
			NewImage:                    map[string]streamtypes.AttributeValue{"status": &streamtypes.AttributeValueMemberS{Value: "pending"}},
			OldImage:                    map[string]streamtypes.AttributeValue{"status": &streamtypes.AttributeValueMemberS{Value: "needs-human"}},
			SequenceNumber:              aws.String("000000000000000000042"),
			SizeBytes:                   aws.Int64(77),
			StreamViewType:              streamtypes.StreamViewTypeNewAndOldImages,
		},
	}
	arn := "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/x"
	ev, err := ConvertStreamRecord(r, arn, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	if ev.AWSRegion != "us-east-1" || ev.EventID != "ev-1" || ev.EventName != "MODIFY" || ev.EventSource != "aws:dynamodb" ||
		ev.EventVersion != "1.1" || ev.EventSourceArn != arn {
		t.Errorf("header fields: %+v", ev)
	}
	if ev.UserIdentity == nil || ev.UserIdentity.Type != "Service" {
		t.Errorf("user identity: %+v", ev.UserIdentity)
	}
	c := ev.Change
	if c.Keys["pk"].String() != "p" || c.NewImage["status"].String() != "pending" || c.OldImage["status"].String() != "needs-human" ||
		c.SequenceNumber != "000000000000000000042" || c.SizeBytes != 77 || c.StreamViewType != "NEW_AND_OLD_IMAGES" ||
		!c.ApproximateCreationDateTime.Equal(when) {
		t.Errorf("change: %+v", c)
	}
	if ev, _ := ConvertStreamRecord(r, arn, ""); ev.AWSRegion != "ddblocal" {
		t.Errorf("without override the record's region stays: %q", ev.AWSRegion)
	}
	// REMOVE: no NewImage.
	r.EventName = streamtypes.OperationTypeRemove
	r.Dynamodb.NewImage = nil
	ev, _ = ConvertStreamRecord(r, arn, "")
	if ev.Change.NewImage != nil {
		t.Errorf("REMOVE must have no NewImage")
	}
}

func TestConvertSQSMessage(t *testing.T) {
	m := sqstypes.Message{
		MessageId:              aws.String("m1"),
		ReceiptHandle:          aws.String("rh"),
		Body:                   aws.String(`{"intent":"x"}`),
		MD5OfBody:              aws.String("md5"),
		MD5OfMessageAttributes: aws.String("md5a"),
		Attributes:             map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"kind": {DataType: aws.String("String"), StringValue: aws.String("retry")},
			"bin":  {DataType: aws.String("Binary"), BinaryValue: []byte{1}},
		},
	}
	ev := ConvertSQSMessage(m, "arn:aws:sqs:us-east-1:000000000000:q", "us-east-1")
	if ev.MessageId != "m1" || ev.ReceiptHandle != "rh" || ev.Body != `{"intent":"x"}` || ev.Md5OfBody != "md5" ||
		ev.Md5OfMessageAttributes != "md5a" || ev.EventSource != "aws:sqs" || ev.EventSourceARN != "arn:aws:sqs:us-east-1:000000000000:q" || ev.AWSRegion != "us-east-1" {
		t.Errorf("fields: %+v", ev)
	}
	if ev.Attributes["ApproximateReceiveCount"] != "1" || ev.Attributes["SentTimestamp"] == "" {
		t.Errorf("attributes: %v", ev.Attributes)
	}
	if a := ev.MessageAttributes["kind"]; a.DataType != "String" || aws.ToString(a.StringValue) != "retry" {
		t.Errorf("kind: %+v", a)
	}
	if a := ev.MessageAttributes["bin"]; a.DataType != "Binary" || len(a.BinaryValue) != 1 {
		t.Errorf("bin: %+v", a)
	}
}
