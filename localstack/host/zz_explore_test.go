package host

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func TestZZExplore(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil { t.Fatal(err) }
	ddb := dynamodb.NewFromConfig(cfg)
	st := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options){ o.BaseEndpoint = aws.String("http://127.0.0.1:18000") })
	tn := fmt.Sprintf("explore%d", time.Now().UnixNano())
	_, err = ddb.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: &tn,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode: ddbtypes.BillingModePayPerRequest,
		StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages}})
	if err != nil { t.Fatal(err) }
	dt, _ := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &tn})
	arn := dt.Table.LatestStreamArn
	t.Logf("arn %s", *arn)
	ds, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	if err != nil { t.Fatal(err) }
	for _, s := range ds.StreamDescription.Shards { t.Logf("shard %s parent %v range %v-%v", *s.ShardId, s.ParentShardId, aws.ToString(s.SequenceNumberRange.StartingSequenceNumber), aws.ToString(s.SequenceNumberRange.EndingSequenceNumber)) }
	sh := ds.StreamDescription.Shards[0].ShardId
	itL, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh, ShardIteratorType: stypes.ShardIteratorTypeLatest})
	if err != nil { t.Fatal(err) }
	t.Logf("latest iterator %s", aws.ToString(itL.ShardIterator))
	for i := 0; i < 3; i++ {
		ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tn, Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprint(i)}, "n": &ddbtypes.AttributeValueMemberN{Value: "1.50"}, "bs": &ddbtypes.AttributeValueMemberBS{Value: [][]byte{{1}}}}})
	}
	ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &tn, Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "0"}}})
	gr, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: itL.ShardIterator})
	if err != nil { t.Fatal(err) }
	t.Logf("LATEST got %d records, next %v", len(gr.Records), gr.NextShardIterator != nil)
	for _, r := range gr.Records { t.Logf("  %s %s seq %s src %v ver %v region %v t %v size %v view %v", aws.ToString(r.EventID), r.EventName, aws.ToString(r.Dynamodb.SequenceNumber), aws.ToString(r.EventSource), aws.ToString(r.EventVersion), aws.ToString(r.AwsRegion), r.Dynamodb.ApproximateCreationDateTime, aws.ToInt64(r.Dynamodb.SizeBytes), r.Dynamodb.StreamViewType); t.Logf("   new %#v", r.Dynamodb.NewImage["n"]) }
	// reuse iterator
	gr2, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: itL.ShardIterator})
	t.Logf("reuse iterator: %d records err %v", len(gr2.Records), err)
	// next
	gr3, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: gr.NextShardIterator})
	t.Logf("next: %d records err %v next nil=%v", len(gr3.Records), err, gr3.NextShardIterator == nil)
	itT, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	gr4, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: itT.ShardIterator, Limit: aws.Int32(2)})
	t.Logf("trim horizon limit2: %d err %v", len(gr4.Records), err)
	_, err = st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("garbage")})
	t.Logf("garbage iterator err: %v", err)
	_, err = st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh, ShardIteratorType: stypes.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String("1")})
	t.Logf("after seq 1 err: %v", err)
	ds, _ = st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	t.Logf("shards now %d, view %v status %v", len(ds.StreamDescription.Shards), ds.StreamDescription.StreamViewType, ds.StreamDescription.StreamStatus)
	itL2, _ := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh, ShardIteratorType: stypes.ShardIteratorTypeLatest})
	gr5, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: itL2.ShardIterator})
	t.Logf("LATEST after writes: %d err %v", len(gr5.Records), err)
	ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tn, Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "late"}}})
	gr5, err = st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: gr5.NextShardIterator})
	t.Logf("LATEST after writes, then one more: %d err %v", len(gr5.Records), err)
	start := time.Now()
	for i := 0; i < 1500; i++ {
		ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tn, Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprint("m", i)}}})
	}
	t.Logf("1500 puts in %v", time.Since(start))
	ds, _ = st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	for _, s := range ds.StreamDescription.Shards { t.Logf("shard %s parent %v range %v-%v", *s.ShardId, aws.ToString(s.ParentShardId), aws.ToString(s.SequenceNumberRange.StartingSequenceNumber), aws.ToString(s.SequenceNumberRange.EndingSequenceNumber)) }
	itT, _ = st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	n := 0
	it := itT.ShardIterator
	for it != nil && n < 5000 {
		g, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil { t.Fatal(err) }
		n += len(g.Records)
		if len(g.Records) == 0 { break }
		it = g.NextShardIterator
	}
	t.Logf("read %d records from shard 0 by default limit, it nil %v", n, it == nil)
	// disable stream
	_, err = ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: &tn, StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(false)}})
	t.Logf("disable err %v", err)
	ds, err = st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	t.Logf("after disable describe err %v", err)
	if err == nil { t.Logf("status %v", ds.StreamDescription.StreamStatus); for _, s := range ds.StreamDescription.Shards { t.Logf("shard %s parent %v range %v-%v", *s.ShardId, aws.ToString(s.ParentShardId), aws.ToString(s.SequenceNumberRange.StartingSequenceNumber), aws.ToString(s.SequenceNumberRange.EndingSequenceNumber)) } }
	g, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
	if err == nil { t.Logf("after disable getrecords %d next nil %v", len(g.Records), g.NextShardIterator == nil) } else { t.Logf("after disable getrecords err %v", err) }
}
