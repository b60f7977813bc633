package sqsqueue

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SetupAPI is what EnsureQueues needs.
type SetupAPI interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// QueueURLs are the queues the outbox uses.
type QueueURLs struct {
	Retry    string `json:"retry"`
	RetryDLQ string `json:"retryDlq"`
	Inbox    string `json:"inbox"`
}

// EnsureQueues creates (idempotently) <prefix>-retry with a DLQ after
// maxReceive receives, and <prefix>-inbox. The CDK stack declares the same.
func EnsureQueues(ctx context.Context, c SetupAPI, prefix string, visibilitySeconds, maxReceive int) (QueueURLs, error) {
	var urls QueueURLs
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-retry-dlq")})
	if err != nil {
		return urls, fmt.Errorf("create %s-retry-dlq: %w", prefix, err)
	}
	urls.RetryDLQ = aws.ToString(dlq.QueueUrl)
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return urls, fmt.Errorf("dlq arn: %w", err)
	}
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": attrs.Attributes["QueueArn"], "maxReceiveCount": fmt.Sprint(maxReceive)})
	retry, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(prefix + "-retry"),
		Attributes: map[string]string{
			"RedrivePolicy":     string(redrive),
			"VisibilityTimeout": fmt.Sprint(visibilitySeconds),
		},
	})
	if err != nil {
		return urls, fmt.Errorf("create %s-retry: %w", prefix, err)
	}
	urls.Retry = aws.ToString(retry.QueueUrl)
	inbox, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-inbox")})
	if err != nil {
		return urls, fmt.Errorf("create %s-inbox: %w", prefix, err)
	}
	urls.Inbox = aws.ToString(inbox.QueueUrl)
	return urls, nil
}
