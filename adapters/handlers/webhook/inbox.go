package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/botharness/outbox/core/webhook"
)

// SQSAPI is the part of the SQS client the inbox uses.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// SQSInbox forwards inbound events to the bot's inbox queue. Every message
// carries the provider event id (body and attribute "eventId") so a consumer
// can drop the rare copy a crash between send and mark produces; on a FIFO
// queue (URL ending in .fifo) SQS drops it itself within its five-minute
// deduplication window.
type SQSInbox struct {
	Client SQSAPI
	URL    string
}

var _ webhook.Inbox = (*SQSInbox)(nil)

// Forward sends one inbox message.
func (q *SQSInbox) Forward(ctx context.Context, msg webhook.InboxMessage) error {
	if q.URL == "" {
		return fmt.Errorf("no inbox queue configured (OUTBOX_INBOX_QUEUE_URL)")
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode inbox message: %w", err)
	}
	in := &sqs.SendMessageInput{
		QueueUrl:    aws.String(q.URL),
		MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"eventId":  {DataType: aws.String("String"), StringValue: aws.String(msg.EventID)},
			"provider": {DataType: aws.String("String"), StringValue: aws.String(msg.Provider)},
			"account":  {DataType: aws.String("String"), StringValue: aws.String(msg.Account)},
		},
	}
	if strings.HasSuffix(q.URL, ".fifo") {
		sum := sha256.Sum256([]byte(msg.Provider + "\x00" + msg.Account + "\x00" + msg.EventID))
		in.MessageDeduplicationId = aws.String(hex.EncodeToString(sum[:]))
		in.MessageGroupId = aws.String(msg.Provider + "/" + msg.Account)
	}
	if _, err := q.Client.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("send inbox message %s: %w", msg.EventID, err)
	}
	return nil
}
