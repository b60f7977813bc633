package lambdahost

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// ConvertAttributeValue converts a DynamoDB Streams SDK attribute value to the
// Lambda event representation. All types are supported: S N B BOOL NULL L M
// SS NS BS.
func ConvertAttributeValue(av streamtypes.AttributeValue) (events.DynamoDBAttributeValue, error) {
	switch v := av.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute(), nil
	case *streamtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(append([]string(nil), v.Value...)), nil
	case *streamtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(append([]string(nil), v.Value...)), nil
	case *streamtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(append([][]byte(nil), v.Value...)), nil
	case *streamtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			c, err := ConvertAttributeValue(e)
			if err != nil {
				return events.DynamoDBAttributeValue{}, fmt.Errorf("[%d]: %w", i, err)
			}
			l[i] = c
		}
		return events.NewListAttribute(l), nil
	case *streamtypes.AttributeValueMemberM:
		m, err := ConvertAttributeMap(v.Value)
		if err != nil {
			return events.DynamoDBAttributeValue{}, err
		}
		return events.NewMapAttribute(m), nil
	case nil:
		return events.DynamoDBAttributeValue{}, fmt.Errorf("nil attribute value")
	default:
		return events.DynamoDBAttributeValue{}, fmt.Errorf("unsupported attribute value type %T", av)
	}
}

// ConvertAttributeMap converts an item image or key map; nil stays nil.
func ConvertAttributeMap(m map[string]streamtypes.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		c, err := ConvertAttributeValue(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = c
	}
	return out, nil
}

// ConvertStreamRecord converts a DynamoDB Streams SDK record to the record a
// Lambda event source mapping delivers. streamArn becomes eventSourceARN; a
// non-empty region overrides the record's awsRegion (DynamoDB Local reports
// "ddblocal").
func ConvertStreamRecord(r streamtypes.Record, streamArn, region string) (events.DynamoDBEventRecord, error) {
	out := events.DynamoDBEventRecord{
		AWSRegion:      orDefault(region, aws.ToString(r.AwsRegion)),
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventSource:    "aws:dynamodb",
		EventVersion:   orDefault(aws.ToString(r.EventVersion), "1.1"),
		EventSourceArn: streamArn,
	}
	if r.UserIdentity != nil {
		out.UserIdentity = &events.DynamoDBUserIdentity{
			Type:        aws.ToString(r.UserIdentity.Type),
			PrincipalID: aws.ToString(r.UserIdentity.PrincipalId),
		}
	}
	if sr := r.Dynamodb; sr != nil {
		var err error
		if out.Change.Keys, err = ConvertAttributeMap(sr.Keys); err != nil {
			return out, fmt.Errorf("Keys.%w", err)
		}
		if out.Change.NewImage, err = ConvertAttributeMap(sr.NewImage); err != nil {
			return out, fmt.Errorf("NewImage.%w", err)
		}
		if out.Change.OldImage, err = ConvertAttributeMap(sr.OldImage); err != nil {
			return out, fmt.Errorf("OldImage.%w", err)
		}
		if sr.ApproximateCreationDateTime != nil {
			out.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *sr.ApproximateCreationDateTime}
		}
		out.Change.SequenceNumber = aws.ToString(sr.SequenceNumber)
		out.Change.SizeBytes = aws.ToInt64(sr.SizeBytes)
		out.Change.StreamViewType = string(sr.StreamViewType)
	}
	return out, nil
}

// ConvertSQSMessage converts an SQS SDK message to the record an SQS event
// source mapping delivers.
func ConvertSQSMessage(m sqstypes.Message, queueArn, region string) events.SQSMessage {
	out := events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             map[string]string{},
		MessageAttributes:      map[string]events.SQSMessageAttribute{},
		EventSourceARN:         queueArn,
		EventSource:            "aws:sqs",
		AWSRegion:              region,
	}
	for k, v := range m.Attributes {
		out.Attributes[k] = v
	}
	for k, v := range m.MessageAttributes {
		a := events.SQSMessageAttribute{
			StringValue:      v.StringValue,
			BinaryValue:      v.BinaryValue,
			StringListValues: append([]string{}, v.StringListValues...),
			BinaryListValues: append([][]byte{}, v.BinaryListValues...),
			DataType:         aws.ToString(v.DataType),
		}
		out.MessageAttributes[k] = a
	}
	return out
}
