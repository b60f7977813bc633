package lambdahost

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/botharness/outbox/adapters/handlers/dispatcher"
)

// fakeStreams is an in-memory DynamoDB Streams API with shard lineage,
// closing shards, expiring iterators and trimming.
type fakeStreams struct {
	mu      sync.Mutex
	arn     string
	order   []string
	shards  map[string]*fakeShard
	seq     int
	pageMax int // DescribeStream page size

	expireNext  int // fail the next N GetRecords with ExpiredIteratorException
	trimmedNext int // fail the next N GetRecords with TrimmedDataAccessException
	getRecords  int
}

type fakeShard struct {
	parent  string
	records []streamtypes.Record
	closed  bool
}

func newFakeStreams() *fakeStreams {
	return &fakeStreams{arn: "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/fake", shards: map[string]*fakeShard{}, pageMax: 2}
}

func (f *fakeStreams) addShard(id, parent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shards[id] = &fakeShard{parent: parent}
	f.order = append(f.order, id)
}

func (f *fakeStreams) closeShard(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shards[id].closed = true
}

// put appends a record for an intent item to a shard and returns its sequence number.
func (f *fakeStreams) put(shard, eventName, pk, sk, status string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	seq := fmt.Sprintf("%021d", f.seq)
	img := map[string]streamtypes.AttributeValue{
		"pk":     &streamtypes.AttributeValueMemberS{Value: pk},
		"sk":     &streamtypes.AttributeValueMemberS{Value: sk},
		"status": &streamtypes.AttributeValueMemberS{Value: status},
	}
	sr := &streamtypes.StreamRecord{
		Keys:           map[string]streamtypes.AttributeValue{"pk": img["pk"], "sk": img["sk"]},
		SequenceNumber: aws.String(seq),
		SizeBytes:      aws.Int64(10),
		StreamViewType: streamtypes.StreamViewTypeNewAndOldImages,
	}
	if eventName == "REMOVE" {
		sr.OldImage = img
	} else {
		sr.NewImage = img
	}
	s := f.shards[shard]
	s.records = append(s.records, streamtypes.Record{
		EventID: aws.String("ev-" + seq), EventName: streamtypes.OperationType(eventName),
		EventSource: aws.String("aws:dynamodb"), AwsRegion: aws.String("ddblocal"), Dynamodb: sr,
	})
	return seq
}

func (f *fakeStreams) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if aws.ToString(in.StreamArn) != f.arn {
		return nil, &streamtypes.ResourceNotFoundException{Message: aws.String("no such stream")}
	}
	startIdx := 0
	if in.ExclusiveStartShardId != nil {
		for i, id := range f.order {
			if id == *in.ExclusiveStartShardId {
				startIdx = i + 1
			}
		}
	}
	desc := &streamtypes.StreamDescription{StreamArn: aws.String(f.arn), StreamStatus: streamtypes.StreamStatusEnabled}
	for i := startIdx; i < len(f.order) && len(desc.Shards) < f.pageMax; i++ {
		id := f.order[i]
		s := f.shards[id]
		sh := streamtypes.Shard{ShardId: aws.String(id), SequenceNumberRange: &streamtypes.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}}
		if s.parent != "" {
			sh.ParentShardId = aws.String(s.parent)
		}
		if s.closed {
			sh.SequenceNumberRange.EndingSequenceNumber = aws.String("9")
		}
		desc.Shards = append(desc.Shards, sh)
		if len(desc.Shards) == f.pageMax && i+1 < len(f.order) {
			desc.LastEvaluatedShardId = aws.String(id)
		}
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: desc}, nil
}

func (f *fakeStreams) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.shards[aws.ToString(in.ShardId)]
	if s == nil {
		return nil, &streamtypes.ResourceNotFoundException{Message: aws.String("no such shard")}
	}
	pos := 0
	switch in.ShardIteratorType {
	case streamtypes.ShardIteratorTypeTrimHorizon:
	case streamtypes.ShardIteratorTypeLatest:
		pos = len(s.records)
	case streamtypes.ShardIteratorTypeAfterSequenceNumber, streamtypes.ShardIteratorTypeAtSequenceNumber:
		pos = -1
		for i, r := range s.records {
			if *r.Dynamodb.SequenceNumber == aws.ToString(in.SequenceNumber) {
				pos = i
				if in.ShardIteratorType == streamtypes.ShardIteratorTypeAfterSequenceNumber {
					pos++
				}
			}
		}
		if pos < 0 {
			return nil, &streamtypes.TrimmedDataAccessException{Message: aws.String("trimmed")}
		}
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(fmt.Sprintf("%s|%d", *in.ShardId, pos))}, nil
}

func (f *fakeStreams) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.getRecords++
	if f.expireNext > 0 {
		f.expireNext--
		return nil, &streamtypes.ExpiredIteratorException{Message: aws.String("expired")}
	}
	if f.trimmedNext > 0 {
		f.trimmedNext--
		return nil, &streamtypes.TrimmedDataAccessException{Message: aws.String("trimmed")}
	}
	id, p, _ := strings.Cut(aws.ToString(in.ShardIterator), "|")
	pos, _ := strconv.Atoi(p)
	s := f.shards[id]
	end := min(len(s.records), pos+int(aws.ToInt32(in.Limit)))
	out := &dynamodbstreams.GetRecordsOutput{Records: append([]streamtypes.Record(nil), s.records[pos:end]...)}
	if !(s.closed && end == len(s.records)) {
		out.NextShardIterator = aws.String(fmt.Sprintf("%s|%d", id, end))
	}
	return out, nil
}

// collector is a StreamHandler that records deliveries and can fail on demand.
type collector struct {
	mu      sync.Mutex
	batches [][]events.DynamoDBEventRecord
	fail    func(batch []events.DynamoDBEventRecord, call int) (events.DynamoDBEventResponse, error)
}

func (c *collector) handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	c.mu.Lock()
	c.batches = append(c.batches, ev.Records)
	call := len(c.batches)
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return fail(ev.Records, call)
	}
	return events.DynamoDBEventResponse{}, nil
}

// pks lists the pk of every delivered record, in delivery order.
func (c *collector) pks() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, b := range c.batches {
		for _, r := range b {
			out = append(out, r.Change.Keys["pk"].String())
		}
	}
	return out
}

func (c *collector) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.batches)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// startFakePoller is newFakePoller, started; it stops with the test.
func startFakePoller(t *testing.T, f *fakeStreams, c *collector, mod func(*StreamPollerConfig)) *StreamPoller {
	t.Helper()
	p := newFakePoller(t, f, c, mod)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// wantDeliveries fails unless c saw exactly want (partition keys, in order).
func wantDeliveries(t *testing.T, c *collector, want []string) {
	t.Helper()
	if got := c.pks(); !equalStrings(got, want) {
		t.Fatalf("deliveries %v, want %v", got, want)
	}
}

func newFakePoller(t *testing.T, f *fakeStreams, c *collector, mod func(*StreamPollerConfig)) *StreamPoller {
	t.Helper()
	cfg := StreamPollerConfig{
		Streams:              f,
		StreamArn:            f.arn,
		FilterPattern:        dispatcher.StreamFilterPattern,
		BatchSize:            10,
		StartingPosition:     StartTrimHorizon,
		PollInterval:         2 * time.Millisecond,
		ShardRefreshInterval: 10 * time.Millisecond,
		RetryDelay:           time.Millisecond,
		Handler:              c.handle,
		Region:               "us-east-1",
		Logger:               quietLogger(),
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewStreamPoller(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

func TestStreamPollerFilterAndExactlyOnce(t *testing.T) {
	f := newFakeStreams()
	f.addShard("s1", "")
	f.put("s1", "INSERT", "a", "INTENT", "pending")
	f.put("s1", "INSERT", "a", "ATTEMPT#1", "pending") // not an intent item
	f.put("s1", "MODIFY", "a", "INTENT", "in-flight")  // claim
	f.put("s1", "REMOVE", "a", "INTENT", "pending")    // removal
	f.put("s1", "MODIFY", "b", "INTENT", "pending")    // human re-queue
	c := &collector{}
	startFakePoller(t, f, c, nil)
	waitFor(t, "two deliveries", func() bool { return len(c.pks()) >= 2 })
	f.put("s1", "INSERT", "c", "INTENT", "pending")
	waitFor(t, "third delivery", func() bool { return len(c.pks()) >= 3 })
	time.Sleep(50 * time.Millisecond) // many more empty polls
	if got := c.pks(); !equalStrings(got, []string{"a", "b", "c"}) {
		t.Fatalf("delivered %v, want [a b c] once each", got)
	}
	c.mu.Lock()
	r := c.batches[0][0]
	c.mu.Unlock()
	if r.EventSourceArn != f.arn || r.AWSRegion != "us-east-1" || r.EventSource != "aws:dynamodb" || r.EventName != "INSERT" {
		t.Errorf("record fields: %+v", r)
	}
}

func TestStreamPollerParentBeforeChildAndNewShards(t *testing.T) {
	f := newFakeStreams()
	// Lineage: p -> c1 -> g1, and an unrelated root r; listed child-first to
	// make sure order comes from lineage, not listing.
	f.addShard("g1", "c1")
	f.addShard("c1", "p")
	f.addShard("p", "")
	f.addShard("r", "")
	f.put("p", "INSERT", "p1", "INTENT", "pending")
	f.put("p", "INSERT", "p2", "INTENT", "pending")
	f.put("c1", "INSERT", "c1", "INTENT", "pending")
	f.put("g1", "INSERT", "g1", "INTENT", "pending")
	f.put("r", "INSERT", "r1", "INTENT", "pending")
	f.closeShard("p")
	f.closeShard("c1")
	c := &collector{}
	startFakePoller(t, f, c, func(cfg *StreamPollerConfig) { cfg.BatchSize = 1 })
	waitFor(t, "initial records", func() bool { return len(c.pks()) >= 5 })
	got := c.pks()
	idx := map[string]int{}
	for i, pk := range got {
		idx[pk] = i
	}
	if !(idx["p1"] < idx["p2"] && idx["p2"] < idx["c1"] && idx["c1"] < idx["g1"]) {
		t.Fatalf("lineage order broken: %v", got)
	}

	// The open leaf closes and splits; the new child appears later and is
	// read from its beginning.
	f.put("g1", "INSERT", "g1b", "INTENT", "pending")
	f.addShard("h1", "g1")
	f.put("h1", "INSERT", "h1", "INTENT", "pending")
	f.closeShard("g1")
	waitFor(t, "records of the new shard", func() bool { return len(c.pks()) >= 7 })
	got = c.pks()
	if got[5] != "g1b" || got[6] != "h1" {
		t.Fatalf("new shard order: %v", got)
	}
	time.Sleep(30 * time.Millisecond)
	if n := len(c.pks()); n != 7 {
		t.Fatalf("redelivery: %v", c.pks())
	}
}

func TestStreamPollerLatestSkipsHistory(t *testing.T) {
	f := newFakeStreams()
	f.addShard("old", "")
	f.put("old", "INSERT", "old1", "INTENT", "pending")
	f.closeShard("old")
	f.addShard("cur", "old")
	f.put("cur", "INSERT", "before", "INTENT", "pending")
	c := &collector{}
	startFakePoller(t, f, c, func(cfg *StreamPollerConfig) { cfg.StartingPosition = StartLatest })
	f.put("cur", "INSERT", "after", "INTENT", "pending")
	waitFor(t, "record after start", func() bool { return len(c.pks()) >= 1 })
	time.Sleep(30 * time.Millisecond)
	if got := c.pks(); !equalStrings(got, []string{"after"}) {
		t.Fatalf("LATEST delivered %v", got)
	}
}

func TestStreamPollerBatchItemFailures(t *testing.T) {
	f := newFakeStreams()
	f.addShard("s1", "")
	var seqB string
	f.put("s1", "INSERT", "a", "INTENT", "pending")
	seqB = f.put("s1", "INSERT", "b", "INTENT", "pending")
	f.put("s1", "INSERT", "c", "INTENT", "pending")
	c := &collector{}
	c.fail = func(batch []events.DynamoDBEventRecord, call int) (events.DynamoDBEventResponse, error) {
		if call == 1 { // b fails once: Lambda retries from b (b and c).
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: seqB}}}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	}
	startFakePoller(t, f, c, nil)
	waitFor(t, "retry", func() bool { return c.calls() >= 2 })
	time.Sleep(30 * time.Millisecond)
	if got := c.pks(); !equalStrings(got, []string{"a", "b", "c", "b", "c"}) {
		t.Fatalf("deliveries %v, want a b c then b c", got)
	}
}

func TestStreamPollerBoundedRetriesAndOnFailure(t *testing.T) {
	f := newFakeStreams()
	f.addShard("s1", "")
	f.put("s1", "INSERT", "a", "INTENT", "pending")
	seqB := f.put("s1", "INSERT", "b", "INTENT", "pending")
	f.put("s1", "INSERT", "c", "INTENT", "pending")
	c := &collector{}
	c.fail = func(batch []events.DynamoDBEventRecord, call int) (events.DynamoDBEventResponse, error) {
		for _, r := range batch {
			if r.Change.SequenceNumber == seqB {
				return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: seqB}}}, nil
			}
		}
		return events.DynamoDBEventResponse{}, nil
	}
	var mu sync.Mutex
	var failures []StreamFailure
	p := newFakePoller(t, f, c, func(cfg *StreamPollerConfig) {
		cfg.MaxRetryAttempts = 2
		cfg.OnFailure = func(_ context.Context, sf StreamFailure) {
			mu.Lock()
			failures = append(failures, sf)
			mu.Unlock()
		}
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	waitFor(t, "on-failure", func() bool { mu.Lock(); defer mu.Unlock(); return len(failures) == 1 })
	f.put("s1", "INSERT", "d", "INTENT", "pending")
	waitFor(t, "shard moves on", func() bool { pks := c.pks(); return len(pks) > 0 && pks[len(pks)-1] == "d" })
	// 1 first call + 2 retries, each from b.
	wantDeliveries(t, c, []string{"a", "b", "c", "b", "c", "b", "c", "d"})
	mu.Lock()
	defer mu.Unlock()
	sf := failures[0]
	if sf.ShardID != "s1" || sf.Attempts != 3 || len(sf.Records) != 2 || sf.Records[0].Change.SequenceNumber != seqB || sf.StreamArn != f.arn {
		t.Fatalf("failure: %+v", sf)
	}
}

func TestStreamPollerHandlerErrorRetriesWholeBatch(t *testing.T) {
	f := newFakeStreams()
	f.addShard("s1", "")
	f.put("s1", "INSERT", "a", "INTENT", "pending")
	f.put("s1", "INSERT", "b", "INTENT", "pending")
	c := &collector{}
	c.fail = func(batch []events.DynamoDBEventRecord, call int) (events.DynamoDBEventResponse, error) {
		switch call {
		case 1:
			return events.DynamoDBEventResponse{}, errors.New("transient")
		case 2:
			panic("handler panic is a function error too")
		case 3: // unknown identifier: the whole batch failed
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: "nope"}}}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	}
	startFakePoller(t, f, c, nil)
	waitFor(t, "success", func() bool { return c.calls() >= 4 })
	time.Sleep(20 * time.Millisecond)
	wantDeliveries(t, c, []string{"a", "b", "a", "b", "a", "b", "a", "b"})
}

func TestStreamPollerExpiredAndTrimmed(t *testing.T) {
	f := newFakeStreams()
	f.addShard("s1", "")
	f.put("s1", "INSERT", "a", "INTENT", "pending")
	c := &collector{}
	startFakePoller(t, f, c, nil)
	waitFor(t, "first", func() bool { return len(c.pks()) == 1 })
	f.mu.Lock()
	f.expireNext = 2
	f.mu.Unlock()
	f.put("s1", "INSERT", "b", "INTENT", "pending")
	waitFor(t, "after expiry", func() bool { return len(c.pks()) == 2 })
	f.mu.Lock()
	f.trimmedNext = 1
	f.mu.Unlock()
	f.put("s1", "INSERT", "c", "INTENT", "pending")
	waitFor(t, "after trim", func() bool { return len(c.pks()) == 3 })
	time.Sleep(30 * time.Millisecond)
	wantDeliveries(t, c, []string{"a", "b", "c"})
}

func TestStreamPollerRestartResumesAfterCheckpoint(t *testing.T) {
	f := newFakeStreams()
	f.addShard("s1", "")
	f.put("s1", "INSERT", "a", "INTENT", "pending")
	c := &collector{}
	p := newFakePoller(t, f, c, nil)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "first", func() bool { return len(c.pks()) == 1 })
	p.Stop()
	f.put("s1", "INSERT", "b", "INTENT", "pending")
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	waitFor(t, "second", func() bool { return len(c.pks()) == 2 })
	time.Sleep(20 * time.Millisecond)
	wantDeliveries(t, c, []string{"a", "b"})
	if err := p.Start(context.Background()); err == nil {
		t.Fatal("second Start while running must fail")
	}
}

func TestStreamPollerDeliverReplays(t *testing.T) {
	c := &collector{}
	p, err := NewStreamPoller(StreamPollerConfig{
		Streams: newFakeStreams(), StreamArn: "arn:x", FilterPattern: dispatcher.StreamFilterPattern,
		BatchSize: 2, Handler: c.handle, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(pk, status string) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
			SequenceNumber: pk,
			Keys:           map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk)},
			NewImage: map[string]events.DynamoDBAttributeValue{
				"sk": events.NewStringAttribute("INTENT"), "status": events.NewStringAttribute(status),
			},
		}}
	}
	records := []events.DynamoDBEventRecord{rec("a", "pending"), rec("x", "in-flight"), rec("b", "pending"), rec("c", "pending")}
	for i := 0; i < 2; i++ {
		if err := p.Deliver(context.Background(), records); err != nil {
			t.Fatal(err)
		}
	}
	wantDeliveries(t, c, []string{"a", "b", "c", "a", "b", "c"})
	if c.calls() != 4 { // batches of 2 after filtering: [a b] [c], twice
		t.Fatalf("calls %d", c.calls())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Deliver(ctx, records); err == nil {
		t.Fatal("Deliver with a cancelled context must fail")
	}
}

type fakeDescribeTable struct{ arn string }

func (f fakeDescribeTable) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if f.arn == "" {
		return &dynamodb.DescribeTableOutput{Table: &ddbtypes.TableDescription{TableName: in.TableName}}, nil
	}
	return &dynamodb.DescribeTableOutput{Table: &ddbtypes.TableDescription{TableName: in.TableName, LatestStreamArn: aws.String(f.arn)}}, nil
}

func TestStreamPollerConfigAndTableLookup(t *testing.T) {
	c := &collector{}
	f := newFakeStreams()
	bad := []StreamPollerConfig{
		{Streams: f, StreamArn: "x"},
		{Handler: c.handle, StreamArn: "x"},
		{Handler: c.handle, Streams: f},
		{Handler: c.handle, Streams: f, StreamArn: "x", BatchSize: 10001},
		{Handler: c.handle, Streams: f, StreamArn: "x", StartingPosition: "AT_TIMESTAMP"},
		{Handler: c.handle, Streams: f, StreamArn: "x", FilterPattern: `{"eventName":"INSERT"}`},
	}
	for i, cfg := range bad {
		if _, err := NewStreamPoller(cfg); err == nil {
			t.Errorf("config %d: expected an error", i)
		}
	}
	p, _ := NewStreamPoller(StreamPollerConfig{Handler: c.handle, Streams: f, DynamoDB: fakeDescribeTable{}, TableName: "t", Logger: quietLogger()})
	if err := p.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "no stream") {
		t.Errorf("table without stream: %v", err)
	}
	f.addShard("s1", "")
	p, _ = NewStreamPoller(StreamPollerConfig{Handler: c.handle, Streams: f, DynamoDB: fakeDescribeTable{arn: f.arn}, TableName: "t", Logger: quietLogger()})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	if p.StreamArn() != f.arn {
		t.Errorf("StreamArn %q", p.StreamArn())
	}
}

func TestSeqLess(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"000000000000000000001", "000000000000000000002", true},
		{"000000000000000000010", "000000000000000000009", false},
		{"9", "10", true},
		{"100", "100", false},
		{"49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692540925702759324208523137515618", true},
	}
	for _, tc := range cases {
		if got := seqLess(tc.a, tc.b); got != tc.want {
			t.Errorf("seqLess(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

// A batching window gathers matching records across pages into one batch
// (the pruner's mapping: one archive object per batch); without it every
// page is delivered as read.
func TestStreamPollerBatchingWindow(t *testing.T) {
	for _, c := range []struct {
		window time.Duration
		one    bool
	}{{300 * time.Millisecond, true}, {0, false}} {
		f := newFakeStreams()
		f.addShard("s1", "")
		col := &collector{}
		p := newFakePoller(t, f, col, func(cfg *StreamPollerConfig) { cfg.BatchingWindow = c.window })
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			f.put("s1", "INSERT", fmt.Sprintf("p%d", i), "INTENT", "pending")
			for j := 0; j < 4; j++ {
				f.put("s1", "MODIFY", fmt.Sprintf("p%d", i), "INTENT", "in-flight") // filtered out
			}
			time.Sleep(20 * time.Millisecond)
		}
		waitFor(t, "five deliveries", func() bool { return len(col.pks()) >= 5 })
		p.Stop()
		col.mu.Lock()
		n := len(col.batches)
		col.mu.Unlock()
		if c.one && n != 1 {
			t.Fatalf("window %v: %d batches, want 1", c.window, n)
		}
		if !c.one && n < 2 {
			t.Fatalf("no window: %d batch, want one per page", n)
		}
		if got := col.pks(); len(got) != 5 {
			t.Fatalf("window %v: delivered %v", c.window, got)
		}
	}
}
