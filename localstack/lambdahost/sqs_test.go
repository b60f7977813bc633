package lambdahost

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fakeSQS hands out a fixed set of messages once and records what the poller
// does with them.
type fakeSQS struct {
	mu       sync.Mutex
	pending  []sqstypes.Message
	received []*sqs.ReceiveMessageInput
	deleted  []string
	released []string
	attrErr  error
}

func (f *fakeSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	f.received = append(f.received, in)
	n := min(len(f.pending), int(in.MaxNumberOfMessages))
	out := f.pending[:n]
	f.pending = f.pending[n:]
	f.mu.Unlock()
	if n == 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return &sqs.ReceiveMessageOutput{Messages: out}, nil
}

func (f *fakeSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		f.deleted = append(f.deleted, aws.ToString(e.ReceiptHandle))
		out.Successful = append(out.Successful, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range in.Entries {
		f.released = append(f.released, aws.ToString(e.ReceiptHandle))
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if f.attrErr != nil {
		return nil, f.attrErr
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"QueueArn": "arn:aws:sqs:us-east-1:000000000000:q"}}, nil
}

func (f *fakeSQS) add(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	base := len(f.pending) + len(f.deleted)
	for i := 0; i < n; i++ {
		id := "m" + strconv.Itoa(base+i)
		f.pending = append(f.pending, sqstypes.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String("{}")})
	}
}

func (f *fakeSQS) deletedSorted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]string(nil), f.deleted...)
	sort.Strings(out)
	return out
}

func newFakeSQSPoller(t *testing.T, f *fakeSQS, h SQSHandler, mod func(*SQSPollerConfig)) *SQSPoller {
	t.Helper()
	cfg := SQSPollerConfig{Client: f, QueueURL: "http://q", BatchSize: 10, WaitTime: -1, PollInterval: time.Millisecond, Handler: h, Logger: quietLogger()}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewSQSPoller(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSQSPollerDeletesAllButReportedFailures(t *testing.T) {
	f := &fakeSQS{}
	f.add(3)
	var got events.SQSEvent
	p := newFakeSQSPoller(t, f, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		got = ev
		return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "m1"}}}, nil
	}, nil)
	n, err := p.PollOnce(context.Background())
	if err != nil || n != 3 {
		t.Fatalf("PollOnce = %d, %v", n, err)
	}
	if d := f.deletedSorted(); !equalStrings(d, []string{"rh-m0", "rh-m2"}) {
		t.Fatalf("deleted %v", d)
	}
	if len(got.Records) != 3 || got.Records[0].EventSource != "aws:sqs" || got.Records[0].EventSourceARN != "arn:aws:sqs:us-east-1:000000000000:q" || got.Records[0].AWSRegion != DefaultRegion {
		t.Fatalf("event: %+v", got.Records)
	}
	in := f.received[0]
	if len(in.MessageSystemAttributeNames) != 1 || in.MessageSystemAttributeNames[0] != sqstypes.MessageSystemAttributeNameAll ||
		len(in.MessageAttributeNames) != 1 || in.MessageAttributeNames[0] != "All" || in.MaxNumberOfMessages != 10 {
		t.Fatalf("receive input: %+v", in)
	}
}

func TestSQSPollerFailuresDeleteNothing(t *testing.T) {
	cases := map[string]SQSHandler{
		"error": func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, errors.New("boom")
		},
		"panic": func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { panic("boom") },
		"empty identifier": func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: ""}}}, nil
		},
		"unknown identifier": func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "m0"}, {ItemIdentifier: "zzz"}}}, nil
		},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakeSQS{}
			f.add(2)
			p := newFakeSQSPoller(t, f, h, nil)
			if _, err := p.PollOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			if d := f.deletedSorted(); len(d) != 0 {
				t.Fatalf("deleted %v", d)
			}
		})
	}
}

func TestSQSPollerBackgroundConcurrency(t *testing.T) {
	f := &fakeSQS{}
	f.add(25)
	var mu sync.Mutex
	seen := map[string]int{}
	p := newFakeSQSPoller(t, f, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range ev.Records {
			seen[r.MessageId]++
		}
		return events.SQSEventResponse{}, nil
	}, func(c *SQSPollerConfig) { c.Concurrency = 3; c.BatchSize = 4 })
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all deleted", func() bool { return len(f.deletedSorted()) == 25 })
	p.Stop()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 25 {
		t.Fatalf("seen %d messages", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s delivered %d times", id, n)
		}
	}
	for _, in := range f.received {
		if in.MaxNumberOfMessages != 4 {
			t.Fatalf("batch size %d", in.MaxNumberOfMessages)
		}
	}
}

// MaxConcurrency: a batch that hangs holds an invocation, not the receive
// loop, so the other messages are received and handled meanwhile (up to the
// bound); without it a loop waits for its batch.
func TestSQSPollerMaxConcurrencyKeepsReceivingBesideASlowBatch(t *testing.T) {
	for _, c := range []struct {
		max, want int
	}{{0, 1}, {3, 3}} {
		f := &fakeSQS{}
		f.add(6)
		release := make(chan struct{})
		var inFlight, peak atomic.Int64
		p := newFakeSQSPoller(t, f, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			<-release
			return events.SQSEventResponse{}, nil
		}, func(cfg *SQSPollerConfig) { cfg.Concurrency, cfg.MaxConcurrency, cfg.BatchSize = 1, c.max, 1 })
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("max %d: %d invocations in flight", c.max, c.want), func() bool { return peak.Load() == int64(c.want) })
		// No more than the bound, however long the batches hang.
		for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
			if got := peak.Load(); got != int64(c.want) {
				t.Fatalf("max %d: %d invocations at once, want %d", c.max, got, c.want)
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(release)
		waitFor(t, "all deleted", func() bool { return len(f.deletedSorted()) == 6 })
		p.Stop()
	}
}

func TestSQSPollerReleasesMessagesReceivedWhileStopping(t *testing.T) {
	f := &fakeSQS{}
	f.add(2)
	called := false
	p := newFakeSQSPoller(t, f, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		called = true
		return events.SQSEventResponse{}, nil
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := p.resolveArn(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := p.poll(ctx); err != nil {
		t.Fatal(err)
	}
	if called || len(f.deletedSorted()) != 0 || len(f.released) != 2 {
		t.Fatalf("called=%v deleted=%v released=%v", called, f.deleted, f.released)
	}
}

func TestSQSPollerConfig(t *testing.T) {
	h := func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	}
	f := &fakeSQS{}
	for i, cfg := range []SQSPollerConfig{
		{QueueURL: "q", Handler: h},
		{Client: f, Handler: h},
		{Client: f, QueueURL: "q"},
		{Client: f, QueueURL: "q", Handler: h, BatchSize: 11},
		{Client: f, QueueURL: "q", Handler: h, WaitTime: 21 * time.Second},
		{Client: f, QueueURL: "q", Handler: h, Concurrency: -1},
	} {
		if _, err := NewSQSPoller(cfg); err == nil {
			t.Errorf("config %d: expected an error", i)
		}
	}
	f.attrErr = errors.New("no queue")
	p, _ := NewSQSPoller(SQSPollerConfig{Client: f, QueueURL: "q", Handler: h, Logger: quietLogger()})
	if err := p.Start(context.Background()); err == nil {
		t.Fatal("Start must fail when the queue ARN cannot be read")
	}
}
