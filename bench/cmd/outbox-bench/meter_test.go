package main

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A write transaction is metered by AWS's rule (two units per KB of every
// item), not by DynamoDB Local's figure (2 for any transaction).
func TestTransactWCUByAWSRule(t *testing.T) {
	small := func() types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{TableName: aws.String("t")}}
	}
	bigPut := types.TransactWriteItem{Put: &types.Put{TableName: aws.String("t"), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "INTENT#1"}, "body": &types.AttributeValueMemberS{Value: strings.Repeat("x", 2500)},
	}}}
	reported := []types.ConsumedCapacity{{TableName: aws.String("t"), CapacityUnits: aws.Float64(2)}}
	seventeen := make([]types.TransactWriteItem, 17)
	for i := range seventeen {
		seventeen[i] = small()
	}
	for _, c := range []struct {
		name  string
		items []types.TransactWriteItem
		want  float64
	}{
		{"one small update", []types.TransactWriteItem{small()}, 2},
		{"the gate and its 16 replicas", seventeen, 34},
		{"a 2.5 KB put and a small update", []types.TransactWriteItem{bigPut, small()}, 8},
	} {
		got := transactWCU(&dynamodb.TransactWriteItemsInput{TransactItems: c.items}, reported)
		if len(got) != 1 || *got[0].CapacityUnits != c.want {
			t.Errorf("%s: %v units, want %v", c.name, *got[0].CapacityUnits, c.want)
		}
	}
}
