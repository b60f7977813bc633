package lambdahost

// Integration tests against DynamoDB Local (Streams) and fauxqs (SQS). They
// skip unless the endpoint variables point at running emulators, e.g.
//
//	eval "$(localstack/emulators.sh env)"   # or export them by hand:
//	AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 AWS_ENDPOINT_URL_SQS=http://127.0.0.1:9324 \
//	AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local go test ./localstack/lambdahost/

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/botharness/outbox/adapters/handlers/dispatcher"
)

// integrationConfig skips the test unless every named endpoint variable is
// set, then loads the SDK configuration from the environment (the SDK reads
// AWS_ENDPOINT_URL_* itself). Region and credentials default to harmless
// local values only when the environment has none, so the SDK never goes
// looking for instance credentials.
func integrationConfig(t *testing.T, vars ...string) aws.Config {
	t.Helper()
	for _, v := range vars {
		if os.Getenv(v) == "" {
			t.Skipf("integration test: %s is not set; start the emulators (localstack/emulators.sh start) and export their endpoints to run it", v)
		}
	}
	var opts []func(*config.LoadOptions) error
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion(DefaultRegion))
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), opts...)
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	return cfg
}

func createStreamTable(t *testing.T, ddb *dynamodb.Client) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("host-it-%d", time.Now().UnixNano())
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange},
		},
		BillingMode:         ddbtypes.BillingModePayPerRequest,
		StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

func putItem(t *testing.T, ddb *dynamodb.Client, table, pk, sk, status string) {
	t.Helper()
	_, err := ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
		"pk":      &ddbtypes.AttributeValueMemberS{Value: pk},
		"sk":      &ddbtypes.AttributeValueMemberS{Value: sk},
		"status":  &ddbtypes.AttributeValueMemberS{Value: status},
		"attempt": &ddbtypes.AttributeValueMemberN{Value: "0"},
		"tags":    &ddbtypes.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"payload": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{"text": &ddbtypes.AttributeValueMemberS{Value: "hi"}}},
	}})
	if err != nil {
		t.Fatalf("put: %v", err)
	}
}

func setStatus(t *testing.T, ddb *dynamodb.Client, table, pk, sk, status string) {
	t.Helper()
	_, err := ddb.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk}},
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "status"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": &ddbtypes.AttributeValueMemberS{Value: status}},
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
}

func deleteItem(t *testing.T, ddb *dynamodb.Client, table, pk, sk string) {
	t.Helper()
	_, err := ddb.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
		TableName: aws.String(table),
		Key:       map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk}},
	})
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
}

func waitForLong(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestIntegrationStreamPollerDynamoDBLocal(t *testing.T) {
	cfg := integrationConfig(t, "AWS_ENDPOINT_URL_DYNAMODB")
	ddb := dynamodb.NewFromConfig(cfg)
	table := createStreamTable(t, ddb)

	c := &collector{}
	var failedOnce sync.Once
	c.fail = func(batch []events.DynamoDBEventRecord, call int) (events.DynamoDBEventResponse, error) {
		var resp events.DynamoDBEventResponse
		for _, r := range batch {
			if r.Change.Keys["pk"].String() == "k3" {
				failedOnce.Do(func() {
					resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: r.Change.SequenceNumber}}
				})
			}
		}
		return resp, nil
	}
	p, err := NewStreamPoller(StreamPollerConfig{
		DynamoDB:         ddb,
		Streams:          NewStreamsClient(cfg),
		TableName:        table,
		FilterPattern:    dispatcher.StreamFilterPattern,
		BatchSize:        10,
		StartingPosition: StartTrimHorizon,
		PollInterval:     100 * time.Millisecond,
		RetryDelay:       10 * time.Millisecond,
		Region:           "us-east-1",
		Handler:          c.handle,
		Logger:           quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Written before Start: TRIM_HORIZON still sees it.
	putItem(t, ddb, table, "k1", "INTENT", "pending")
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()

	putItem(t, ddb, table, "k1", "ATTEMPT#0001", "pending") // not an intent item
	setStatus(t, ddb, table, "k1", "INTENT", "in-flight")   // claim: filtered out
	setStatus(t, ddb, table, "k1", "INTENT", "needs-human") // filtered out
	setStatus(t, ddb, table, "k1", "INTENT", "pending")     // human re-queue: delivered
	putItem(t, ddb, table, "k2", "INTENT", "pending")
	deleteItem(t, ddb, table, "k2", "INTENT") // REMOVE: filtered out

	waitForLong(t, "three matching records", 10*time.Second, func() bool { return len(c.pks()) >= 3 })
	time.Sleep(800 * time.Millisecond) // several more polls: nothing may come twice
	if got := c.pks(); !equalStrings(got, []string{"k1", "k1", "k2"}) {
		t.Fatalf("delivered %v, want [k1 k1 k2]", got)
	}
	c.mu.Lock()
	var all []events.DynamoDBEventRecord
	for _, b := range c.batches {
		all = append(all, b...)
	}
	c.mu.Unlock()
	if all[0].EventName != "INSERT" || all[1].EventName != "MODIFY" || all[2].EventName != "INSERT" {
		t.Errorf("event names: %s %s %s", all[0].EventName, all[1].EventName, all[2].EventName)
	}
	if all[1].Change.OldImage["status"].String() != "needs-human" || all[1].Change.NewImage["status"].String() != "pending" {
		t.Errorf("MODIFY images: %+v", all[1].Change)
	}
	r := all[0]
	if r.EventSource != "aws:dynamodb" || r.EventSourceArn != p.StreamArn() || r.AWSRegion != "us-east-1" || r.EventID == "" ||
		r.Change.SequenceNumber == "" || r.Change.StreamViewType != "NEW_AND_OLD_IMAGES" || r.Change.ApproximateCreationDateTime.IsZero() ||
		r.Change.NewImage["attempt"].Number() != "0" || len(r.Change.NewImage["tags"].StringSet()) != 2 ||
		r.Change.NewImage["payload"].Map()["text"].String() != "hi" {
		t.Errorf("converted record: %+v", r)
	}

	// ReportBatchItemFailures: k3 fails once and comes back; k4 is never
	// delivered before the retry of k3.
	putItem(t, ddb, table, "k3", "INTENT", "pending")
	putItem(t, ddb, table, "k4", "INTENT", "pending")
	waitForLong(t, "k3 retried and k4 delivered", 10*time.Second, func() bool {
		n3, last3, last4 := 0, -1, -1
		for i, pk := range c.pks() {
			switch pk {
			case "k3":
				n3++
				last3 = i
			case "k4":
				last4 = i
			}
		}
		return n3 == 2 && last4 > last3
	})

	// Duplicate delivery: replaying records already delivered reaches the
	// handler again.
	before := len(c.pks())
	if err := p.Deliver(context.Background(), all[:1]); err != nil {
		t.Fatal(err)
	}
	if got := c.pks(); len(got) != before+1 || got[len(got)-1] != "k1" {
		t.Fatalf("replay: %v", got)
	}
}

func TestIntegrationStreamPollerLatest(t *testing.T) {
	cfg := integrationConfig(t, "AWS_ENDPOINT_URL_DYNAMODB")
	ddb := dynamodb.NewFromConfig(cfg)
	table := createStreamTable(t, ddb)
	putItem(t, ddb, table, "before", "INTENT", "pending")
	c := &collector{}
	p, err := NewStreamPoller(StreamPollerConfig{
		DynamoDB: ddb, Streams: NewStreamsClient(cfg), TableName: table,
		StartingPosition: StartLatest, PollInterval: 100 * time.Millisecond,
		Handler: c.handle, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	putItem(t, ddb, table, "after", "INTENT", "pending")
	waitForLong(t, "record written after Start", 10*time.Second, func() bool { return len(c.pks()) >= 1 })
	time.Sleep(500 * time.Millisecond)
	if got := c.pks(); !equalStrings(got, []string{"after"}) {
		t.Fatalf("LATEST delivered %v", got)
	}
}

func createQueue(t *testing.T, client *sqs.Client, visibility int) (string, string) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("host-it-%d", time.Now().UnixNano())
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
		"VisibilityTimeout": strconv.Itoa(visibility),
	}})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl), attrs.Attributes["QueueArn"]
}

func queueDepth(t *testing.T, client *sqs.Client, url string) (visible, inflight int) {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	inflight, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return visible, inflight
}

type sqsSeen struct {
	mu      sync.Mutex
	records []events.SQSMessage
}

func (s *sqsSeen) add(ev events.SQSEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, ev.Records...)
}

func (s *sqsSeen) byBody() map[string][]events.SQSMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]events.SQSMessage{}
	for _, r := range s.records {
		out[r.Body] = append(out[r.Body], r)
	}
	return out
}

func TestIntegrationSQSPollerFauxqs(t *testing.T) {
	cfg := integrationConfig(t, "AWS_ENDPOINT_URL_SQS")
	client := sqs.NewFromConfig(cfg)
	url, arn := createQueue(t, client, 1)
	ctx := context.Background()
	for _, body := range []string{"ok-1", "fail-once", "ok-2"} {
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("retry")}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := &sqsSeen{}
	var failedOnce sync.Once
	p, err := NewSQSPoller(SQSPollerConfig{
		Client: client, QueueURL: url, BatchSize: 10, WaitTime: time.Second, VisibilityTimeout: time.Second,
		Concurrency: 2, Logger: quietLogger(),
		Handler: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			seen.add(ev)
			var resp events.SQSEventResponse
			for _, r := range ev.Records {
				if r.Body == "fail-once" {
					failedOnce.Do(func() {
						resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
					})
				}
			}
			return resp, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitForLong(t, "retry of the failed message", 15*time.Second, func() bool { return len(seen.byBody()["fail-once"]) == 2 })
	waitForLong(t, "empty queue", 10*time.Second, func() bool { v, f := queueDepth(t, client, url); return v == 0 && f == 0 })
	p.Stop()

	by := seen.byBody()
	if len(by["ok-1"]) != 1 || len(by["ok-2"]) != 1 {
		t.Fatalf("successful messages delivered %d and %d times", len(by["ok-1"]), len(by["ok-2"]))
	}
	first, second := by["fail-once"][0], by["fail-once"][1]
	if first.MessageId != second.MessageId || first.Attributes["ApproximateReceiveCount"] != "1" || second.Attributes["ApproximateReceiveCount"] != "2" {
		t.Errorf("redelivery: %v / %v", first.Attributes, second.Attributes)
	}
	m := by["ok-1"][0]
	if m.EventSource != "aws:sqs" || m.EventSourceARN != arn || m.AWSRegion == "" || m.ReceiptHandle == "" || m.Md5OfBody == "" ||
		m.Attributes["SentTimestamp"] == "" || aws.ToString(m.MessageAttributes["kind"].StringValue) != "retry" {
		t.Errorf("converted message: %+v", m)
	}
}

func TestIntegrationSQSPollerHandlerErrorDeletesNothing(t *testing.T) {
	cfg := integrationConfig(t, "AWS_ENDPOINT_URL_SQS")
	client := sqs.NewFromConfig(cfg)
	url, _ := createQueue(t, client, 1)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("m" + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	seen := &sqsSeen{}
	var mu sync.Mutex
	var failedBatch map[string]bool
	p, err := NewSQSPoller(SQSPollerConfig{
		Client: client, QueueURL: url, WaitTime: time.Second, Logger: quietLogger(),
		Handler: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			seen.add(ev)
			mu.Lock()
			defer mu.Unlock()
			if failedBatch == nil {
				failedBatch = map[string]bool{}
				for _, r := range ev.Records {
					failedBatch[r.Body] = true
				}
				return events.SQSEventResponse{}, fmt.Errorf("function error")
			}
			return events.SQSEventResponse{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	waitForLong(t, "every message handled", 15*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		by := seen.byBody()
		for i := 0; i < 3; i++ {
			body := "m" + strconv.Itoa(i)
			want := 1
			if failedBatch[body] {
				want = 2
			}
			if len(by[body]) < want {
				return false
			}
		}
		return true
	})
	waitForLong(t, "empty queue", 10*time.Second, func() bool { v, f := queueDepth(t, client, url); return v == 0 && f == 0 })
	mu.Lock()
	defer mu.Unlock()
	for body, recs := range seen.byBody() {
		want := 1
		if failedBatch[body] {
			want = 2
		}
		if len(recs) != want || recs[len(recs)-1].Attributes["ApproximateReceiveCount"] != strconv.Itoa(want) {
			t.Errorf("%s: %d deliveries, want %d", body, len(recs), want)
		}
	}
}
