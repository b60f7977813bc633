package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/botharness/outbox/core"
)

// BatchAPI is the part of the SQS client batch sends use.
type BatchAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ core.BatchQueue = (*Queue)(nil)

// EnqueueBatch sends msgs ten to a request (SQS's SendMessageBatch limit),
// in order. failed lists the messages SQS did not accept; err joins the
// request errors (the messages of a failed request are all in failed).
func (q *Queue) EnqueueBatch(ctx context.Context, msgs []core.QueuedMessage) ([]int, error) {
	b, ok := q.client.(BatchAPI)
	if !ok {
		return allIndexes(len(msgs)), errors.New("sqs client cannot send batches")
	}
	var failed []int
	var errs []error
	for start := 0; start < len(msgs); start += 10 {
		end := min(start+10, len(msgs))
		entries := make([]types.SendMessageBatchRequestEntry, 0, end-start)
		for i := start; i < end; i++ {
			body, err := json.Marshal(msgs[i].Msg)
			if err != nil {
				return nil, fmt.Errorf("encode retry message: %w", err)
			}
			entries = append(entries, types.SendMessageBatchRequestEntry{
				Id:           aws.String(strconv.Itoa(i)),
				MessageBody:  aws.String(string(body)),
				DelaySeconds: DelaySeconds(msgs[i].Delay),
			})
		}
		out, err := b.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		if err != nil {
			errs = append(errs, fmt.Errorf("send %d retry messages: %w", len(entries), err))
			for i := start; i < end; i++ {
				failed = append(failed, i)
			}
			continue
		}
		for _, f := range out.Failed {
			if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil {
				failed = append(failed, i)
			}
		}
	}
	return failed, errors.Join(errs...)
}

func allIndexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
