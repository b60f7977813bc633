package lambdahost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of the SQS client the poller uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// SQSPollerConfig configures an SQSPoller.
type SQSPollerConfig struct {
	Client   SQSAPI
	QueueURL string
	// BatchSize is MaxNumberOfMessages per receive, 1..10 (default 10).
	BatchSize int
	// WaitTime is the long-poll wait per receive, whole seconds up to 20
	// (default 1s; negative means short polling with PollInterval pauses).
	// Stop waits for the receive in flight, so it takes up to WaitTime.
	WaitTime time.Duration
	// PollInterval is the pause after an empty short poll (default 100ms).
	PollInterval time.Duration
	// VisibilityTimeout for received messages (default: the queue's).
	VisibilityTimeout time.Duration
	// Concurrency is the number of receive loops (default 1).
	Concurrency int
	// MaxConcurrency bounds the invocations in flight across all receive
	// loops: the mapping's maximum concurrency. Above Concurrency, a loop
	// hands each batch to an invocation of its own and receives again, so
	// a slow batch holds one invocation, not a receive loop — as Lambda
	// scales its SQS pollers with the backlog up to the maximum
	// concurrency. 0 (or at most Concurrency): one invocation per loop, the
	// loop waits for it.
	MaxConcurrency int
	// ErrorBackoff is the pause after a failed receive (default 1s).
	ErrorBackoff time.Duration

	Handler SQSHandler

	Region          string // default DefaultRegion
	AccountID       string // default DefaultAccountID
	FunctionName    string
	FunctionTimeout time.Duration
	Logger          *slog.Logger
}

// SQSPoller plays an SQS event source mapping with ReportBatchItemFailures:
// it receives batches (with all system and message attributes), invokes the
// handler with events.SQSEvent, deletes every message not listed in
// batchItemFailures, and deletes nothing when the handler fails (the
// messages come back after their visibility timeout, like in AWS).
type SQSPoller struct {
	cfg SQSPollerConfig
	log *slog.Logger

	slots chan struct{} // invocations in flight (MaxConcurrency), nil: one per loop

	lifecycle
	queueArn string // guarded by mu
}

// NewSQSPoller validates cfg and returns a stopped poller.
func NewSQSPoller(cfg SQSPollerConfig) (*SQSPoller, error) {
	if cfg.Client == nil || cfg.QueueURL == "" || cfg.Handler == nil {
		return nil, errors.New("host: SQSPollerConfig needs Client, QueueURL and Handler")
	}
	cfg.BatchSize = orDefault(cfg.BatchSize, 10)
	if cfg.BatchSize < 1 || cfg.BatchSize > 10 {
		return nil, fmt.Errorf("host: SQS BatchSize %d out of range 1..10", cfg.BatchSize)
	}
	cfg.WaitTime = orDefault(cfg.WaitTime, time.Second)
	if cfg.WaitTime > 20*time.Second {
		return nil, fmt.Errorf("host: SQS WaitTime %v above 20s", cfg.WaitTime)
	}
	if cfg.VisibilityTimeout < 0 || cfg.VisibilityTimeout > 12*time.Hour {
		return nil, fmt.Errorf("host: SQS VisibilityTimeout %v out of range", cfg.VisibilityTimeout)
	}
	cfg.PollInterval = orDefault(cfg.PollInterval, 100*time.Millisecond)
	cfg.Concurrency = orDefault(cfg.Concurrency, 1)
	if cfg.Concurrency < 1 {
		return nil, fmt.Errorf("host: SQS Concurrency %d must be positive", cfg.Concurrency)
	}
	cfg.ErrorBackoff = orDefault(cfg.ErrorBackoff, time.Second)
	cfg.Region = orDefault(cfg.Region, DefaultRegion)
	cfg.AccountID = orDefault(cfg.AccountID, DefaultAccountID)
	p := &SQSPoller{cfg: cfg, log: loggerOr(cfg.Logger).With("component", "sqs-poller", "queue", cfg.QueueURL)}
	if cfg.MaxConcurrency > cfg.Concurrency {
		p.slots = make(chan struct{}, cfg.MaxConcurrency)
	}
	return p, nil
}

// QueueArn returns the queue's ARN (known after Start or PollOnce).
func (p *SQSPoller) QueueArn() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queueArn
}

func (p *SQSPoller) resolveArn(ctx context.Context) (string, error) {
	if arn := p.QueueArn(); arn != "" {
		return arn, nil
	}
	out, err := p.cfg.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(p.cfg.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("host: get queue attributes: %w", err)
	}
	arn := out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", errors.New("host: queue has no QueueArn attribute")
	}
	p.mu.Lock()
	p.queueArn = arn
	p.mu.Unlock()
	return arn, nil
}

// Start looks up the queue ARN and starts the receive loops in the
// background until ctx is done or Stop is called.
func (p *SQSPoller) Start(ctx context.Context) error {
	// A Stop during the ARN lookup aborts the start.
	runCtx, abort, err := p.begin(ctx, "SQS poller")
	if err != nil {
		return err
	}
	if _, err := p.resolveArn(runCtx); err != nil {
		return abort(err)
	}
	for i := 0; i < p.cfg.Concurrency; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.loop(runCtx)
		}()
	}
	p.log.Info("sqs poller started", "concurrency", p.cfg.Concurrency, "max_concurrency", max(p.cfg.MaxConcurrency, p.cfg.Concurrency), "batch_size", p.cfg.BatchSize)
	return nil
}

// Stop stops receiving and waits for the receives and invocations in flight.
func (p *SQSPoller) Stop() { p.stop(nil) }

func (p *SQSPoller) loop(ctx context.Context) {
	for ctx.Err() == nil {
		var n int
		var err error
		if p.slots != nil {
			// A free invocation first, then the receive: never more
			// batches held than invocations to run them.
			select {
			case p.slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			handed := false
			n, err = p.receive(ctx, func(msgs []sqstypes.Message) {
				handed = true
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					defer func() { <-p.slots }()
					p.handle(ctx, msgs)
				}()
			})
			if !handed {
				<-p.slots
			}
		} else {
			n, err = p.poll(ctx)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.Warn("sqs receive failed", "error", err)
			sleepCtx(ctx, p.cfg.ErrorBackoff)
		case n == 0 && p.cfg.WaitTime < time.Second:
			sleepCtx(ctx, p.cfg.PollInterval)
		}
	}
}

// PollOnce receives one batch and handles it synchronously, returning the
// number of messages received. Useful for deterministic tests without Start.
func (p *SQSPoller) PollOnce(ctx context.Context) (int, error) {
	if _, err := p.resolveArn(ctx); err != nil {
		return 0, err
	}
	return p.poll(ctx)
}

func (p *SQSPoller) poll(ctx context.Context) (int, error) {
	return p.receive(ctx, func(msgs []sqstypes.Message) { p.handle(ctx, msgs) })
}

// receive receives one batch and passes it to handle (none: no call).
func (p *SQSPoller) receive(ctx context.Context, handle func([]sqstypes.Message)) (int, error) {
	wait := int32(0)
	if p.cfg.WaitTime > 0 {
		wait = int32(math.Ceil(p.cfg.WaitTime.Seconds()))
	}
	in := &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.cfg.QueueURL),
		MaxNumberOfMessages:         int32(p.cfg.BatchSize),
		WaitTimeSeconds:             wait,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}
	if p.cfg.VisibilityTimeout > 0 {
		in.VisibilityTimeout = int32(math.Ceil(p.cfg.VisibilityTimeout.Seconds()))
	}
	// The receive is not cancelled by Stop: abandoning a long poll can
	// leave a message received by nobody (hidden until its visibility
	// timeout), in AWS and in fauxqs alike. It is bounded instead.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(wait)*time.Second+15*time.Second)
	out, err := p.cfg.Client.ReceiveMessage(rctx, in)
	cancel()
	if err != nil {
		return 0, err
	}
	if len(out.Messages) == 0 {
		return 0, nil
	}
	if ctx.Err() != nil {
		p.release(out.Messages)
		return len(out.Messages), nil
	}
	handle(out.Messages)
	return len(out.Messages), nil
}

// release makes messages received while stopping visible again at once.
func (p *SQSPoller) release(msgs []sqstypes.Message) {
	entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.cfg.Client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(p.cfg.QueueURL), Entries: entries}); err != nil {
		p.log.Warn("could not release messages received while stopping", "count", len(msgs), "error", err)
	}
}

func (p *SQSPoller) handle(ctx context.Context, msgs []sqstypes.Message) {
	arn := p.QueueArn()
	records := make([]events.SQSMessage, len(msgs))
	for i, m := range msgs {
		records[i] = ConvertSQSMessage(m, arn, p.cfg.Region)
	}
	resp, err := p.invoke(ctx, records)
	p.log.Debug("sqs batch delivered", "messages", len(records))
	if err != nil {
		p.log.Warn("sqs handler failed; messages return after their visibility timeout", "messages", len(msgs), "error", err)
		return
	}
	failed := map[string]bool{}
	known := map[string]bool{}
	for _, r := range records {
		known[r.MessageId] = true
	}
	for _, f := range resp.BatchItemFailures {
		if f.ItemIdentifier == "" || !known[f.ItemIdentifier] {
			p.log.Warn("sqs handler returned an invalid itemIdentifier; treating the whole batch as failed", "messages", len(msgs))
			return
		}
		failed[f.ItemIdentifier] = true
	}
	var entries []sqstypes.DeleteMessageBatchRequestEntry
	for i, r := range records {
		if !failed[r.MessageId] {
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.ReceiptHandle)})
		}
	}
	if len(failed) > 0 {
		p.log.Info("sqs handler reported batch item failures", "messages", len(msgs), "failures", len(failed))
	}
	if len(entries) == 0 {
		return
	}
	// Deleting what was handled must not be skipped because Stop was called.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	out, err := p.cfg.Client.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.cfg.QueueURL), Entries: entries})
	if err != nil {
		p.log.Error("sqs delete failed; handled messages will be delivered again", "count", len(entries), "error", err)
		return
	}
	for _, f := range out.Failed {
		p.log.Error("sqs delete of one message failed; it will be delivered again", "entry", aws.ToString(f.Id), "code", aws.ToString(f.Code))
	}
}

func (p *SQSPoller) invoke(ctx context.Context, records []events.SQSMessage) (events.SQSEventResponse, error) {
	return invokeBatch(ctx, p.cfg.FunctionTimeout, functionArn(p.cfg.Region, p.cfg.AccountID, p.cfg.FunctionName),
		events.SQSEvent{Records: records}, p.cfg.Handler)
}
