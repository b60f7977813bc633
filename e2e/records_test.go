package e2e

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/botharness/outbox/localstack/lambdahost"
)

// pendingRecord reads the intent's real INSERT record from the table's stream.
func pendingRecord(t *testing.T, e *env, id string) events.DynamoDBEventRecord {
	t.Helper()
	ctx := context.Background()
	dt, err := e.clients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(e.table)})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(dt.Table.LatestStreamArn)
	ds, err := e.clients.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range ds.StreamDescription.Shards {
		it, err := e.clients.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: "TRIM_HORIZON",
		})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := e.clients.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs.Records {
			ev, err := lambdahost.ConvertStreamRecord(r, arn, "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := ev.Change.NewImage["id"]; ok && v.String() == id && string(r.EventName) == "INSERT" {
				return ev
			}
		}
	}
	t.Fatalf("no INSERT record for %s in the stream", id)
	return events.DynamoDBEventRecord{}
}
