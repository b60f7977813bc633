package dynamo

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// IntentFromImage reads an intent from a stream record's image (the Lambda
// event's attribute values), as UnmarshalIntent reads a stored item: the
// stream consumers (notifier, pruner) read the rows this package writes.
func IntentFromImage(img map[string]events.DynamoDBAttributeValue) (*core.Intent, error) {
	item, err := ItemFromImage(img)
	if err != nil {
		return nil, err
	}
	return UnmarshalIntent(item)
}

// ItemFromImage converts an item in the Lambda event's attribute values (a
// stream image, or DynamoDB JSON decoded into them) to the SDK's.
func ItemFromImage(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	return convertMap(img, toSDK)
}

// ImageFromItem is the inverse of ItemFromImage; the image marshals to
// DynamoDB JSON ({"S": ...}, {"N": ...}).
func ImageFromItem(item map[string]types.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	return convertMap(item, fromSDK)
}

// convertMap converts every attribute of an item with conv; an error names
// the attribute.
func convertMap[A, B any](in map[string]A, conv func(A) (B, error)) (map[string]B, error) {
	out := make(map[string]B, len(in))
	for k, v := range in {
		c, err := conv(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = c
	}
	return out, nil
}

// convertList converts every element of a list attribute with conv.
func convertList[A, B any](in []A, conv func(A) (B, error)) ([]B, error) {
	out := make([]B, len(in))
	for i, v := range in {
		c, err := conv(v)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// fromSDK converts an SDK attribute value to the Lambda event's type.
func fromSDK(v types.AttributeValue) (events.DynamoDBAttributeValue, error) {
	switch t := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(t.Value), nil
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(t.Value), nil
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(t.Value), nil
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(t.Value), nil
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute(), nil
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(t.Value), nil
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(t.Value), nil
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(t.Value), nil
	case *types.AttributeValueMemberL:
		l, err := convertList(t.Value, fromSDK)
		if err != nil {
			return events.DynamoDBAttributeValue{}, err
		}
		return events.NewListAttribute(l), nil
	case *types.AttributeValueMemberM:
		m, err := ImageFromItem(t.Value)
		if err != nil {
			return events.DynamoDBAttributeValue{}, err
		}
		return events.NewMapAttribute(m), nil
	}
	return events.DynamoDBAttributeValue{}, fmt.Errorf("unsupported attribute type %T", v)
}

// toSDK converts a Lambda event attribute value to the SDK's type.
func toSDK(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		l, err := convertList(v.List(), toSDK)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case events.DataTypeMap:
		m, err := ItemFromImage(v.Map())
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unsupported attribute type %v", v.DataType())
}
