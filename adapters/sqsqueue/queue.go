// Package sqsqueue implements core.RetryQueue on Amazon SQS.
package sqsqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botharness/outbox/core"
)

// API is the part of the SQS client the queue uses.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Queue sends retry messages with DelaySeconds (SQS caps it at 900 s; the
// retrier re-delays messages that arrive before the intent is due).
type Queue struct {
	client API
	url    string
}

var _ core.RetryQueue = (*Queue)(nil)

// New returns a queue for url.
func New(client API, url string) *Queue { return &Queue{client: client, url: url} }

// Enqueue sends msg to be delivered after delay.
func (q *Queue) Enqueue(ctx context.Context, msg core.RetryMessage, delay time.Duration) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode retry message: %w", err)
	}
	_, err = q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(q.url),
		MessageBody:  aws.String(string(body)),
		DelaySeconds: DelaySeconds(delay),
	})
	if err != nil {
		return fmt.Errorf("send retry message for %s: %w", msg.IntentID, err)
	}
	return nil
}

// DelaySeconds rounds delay up to whole seconds within SQS's 0..900 range.
func DelaySeconds(delay time.Duration) int32 {
	s := math.Ceil(delay.Seconds())
	switch {
	case s < 0:
		return 0
	case s > core.MaxQueueDelay.Seconds():
		return int32(core.MaxQueueDelay.Seconds())
	}
	return int32(s)
}
