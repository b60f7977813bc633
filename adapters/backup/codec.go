package backup

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/dynamo"
)

// EncodeItem renders an item in DynamoDB's JSON form ({"S": ...}, {"N": ...}),
// so every item type round-trips exactly, not just the ones we model: the
// Lambda event's attribute values marshal to it (dynamo.ImageFromItem).
func EncodeItem(item map[string]types.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	return dynamo.ImageFromItem(item)
}

// DecodeItem is the inverse of EncodeItem.
func DecodeItem(raw map[string]json.RawMessage) (map[string]types.AttributeValue, error) {
	img := make(map[string]events.DynamoDBAttributeValue, len(raw))
	for k, v := range raw {
		var av events.DynamoDBAttributeValue
		if err := json.Unmarshal(v, &av); err != nil {
			return nil, fmt.Errorf("attribute %s: not a DynamoDB JSON value: %w", k, err)
		}
		img[k] = av
	}
	return dynamo.ItemFromImage(img)
}
