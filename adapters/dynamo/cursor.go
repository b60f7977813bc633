package dynamo

import (
	"encoding/base64"
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// encodeCursor turns a query's LastEvaluatedKey into an opaque page cursor
// ("" when there is no next page).
func encodeCursor(last map[string]types.AttributeValue) string {
	if len(last) == 0 {
		return ""
	}
	keys := map[string]string{}
	for k, v := range last {
		if sv, ok := v.(*types.AttributeValueMemberS); ok {
			keys[k] = sv.Value
		}
	}
	b, _ := json.Marshal(keys)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reverses encodeCursor. A cursor whose partition attribute
// (partitionAttr) does not hold wantPartition was made for another listing
// and is refused, so a cursor can never widen what a caller may page through.
func decodeCursor(cursor, partitionAttr, wantPartition string) (map[string]types.AttributeValue, error) {
	if cursor == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	var keys map[string]string
	if err == nil {
		err = json.Unmarshal(raw, &keys)
	}
	if err != nil || keys[partitionAttr] != wantPartition {
		return nil, &core.ValidationError{Code: core.CodeInvalidField, Field: "cursor", Message: "the cursor is not valid for this listing"}
	}
	start := map[string]types.AttributeValue{}
	for k, v := range keys {
		start[k] = &types.AttributeValueMemberS{Value: v}
	}
	return start, nil
}
