package sqsqueue

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botharness/outbox/core"
)

func TestDelaySecondsRoundsUpAndCaps(t *testing.T) {
	for _, c := range []struct {
		in   time.Duration
		want int32
	}{{-time.Second, 0}, {0, 0}, {100 * time.Millisecond, 1}, {1500 * time.Millisecond, 2}, {15 * time.Minute, 900}, {2 * time.Hour, 900}} {
		if got := DelaySeconds(c.in); got != c.want {
			t.Errorf("DelaySeconds(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}

type capture struct{ in *sqs.SendMessageInput }

func (c *capture) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.in = in
	return &sqs.SendMessageOutput{}, nil
}

func TestEnqueueSendsTheMessageWithItsDelay(t *testing.T) {
	c := &capture{}
	q := New(c, "https://queue")
	if err := q.Enqueue(context.Background(), core.RetryMessage{IntentID: "it_1", Attempt: 2, Op: core.OpReconcile}, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	var m core.RetryMessage
	if err := json.Unmarshal([]byte(aws.ToString(c.in.MessageBody)), &m); err != nil {
		t.Fatal(err)
	}
	if m.IntentID != "it_1" || m.Attempt != 2 || m.Op != core.OpReconcile || c.in.DelaySeconds != 3 || aws.ToString(c.in.QueueUrl) != "https://queue" {
		t.Fatalf("sent %+v delay %d", m, c.in.DelaySeconds)
	}
}
