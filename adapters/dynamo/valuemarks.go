package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// ValueMarks is the DynamoDB core.ValueMarks: one item per set-to-value
// target, holding the newest intent whose send went out. MarkSent is one
// conditional UpdateItem ("keep the greater"); Newest one strongly
// consistent GetItem. The item expires core.ValueMarkTTL after its last mark.
type ValueMarks struct {
	db    API
	table string
}

var _ core.ValueMarks = (*ValueMarks)(nil)

// NewValueMarks returns the marks over table.
func NewValueMarks(db API, table string) *ValueMarks { return &ValueMarks{db: db, table: table} }

const valueMarkSK = "VALUE"

// ValueMarkPK is the partition key of a target's mark.
func ValueMarkPK(k string) string { return "VALUE#" + keyPart(k) }

// MarkSent records seq unless a greater one is stored; it answers the newest.
func (m *ValueMarks) MarkSent(ctx context.Context, k, seq string, now time.Time) (string, error) {
	_, err := m.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(m.table),
		Key:                      key(ValueMarkPK(k), valueMarkSK),
		UpdateExpression:         aws.String("SET #s = :s, #x = :x"),
		ConditionExpression:      aws.String("attribute_not_exists(#s) OR #s < :s"),
		ExpressionAttributeNames: map[string]string{"#s": "seq", "#x": TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":s": avS(seq), ":x": avN(now.Add(core.ValueMarkTTL).Unix()),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return seq, nil
	}
	ccf, ok := regCCF(err)
	if !ok {
		return "", fmt.Errorf("mark value %s: %w", k, err)
	}
	if s, ok := ccf.Item["seq"].(*types.AttributeValueMemberS); ok {
		return s.Value, nil
	}
	return m.Newest(ctx, k)
}

// Newest is the newest seq stored for k ("" for none).
func (m *ValueMarks) Newest(ctx context.Context, k string) (string, error) {
	out, err := m.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(m.table), Key: key(ValueMarkPK(k), valueMarkSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", fmt.Errorf("read value mark %s: %w", k, err)
	}
	if s, ok := out.Item["seq"].(*types.AttributeValueMemberS); ok {
		return s.Value, nil
	}
	return "", nil
}
