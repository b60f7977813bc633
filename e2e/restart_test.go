package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
)

// `make run` keeps DynamoDB's data on disk across restarts, but the queue
// emulator keeps its messages in memory: a restart loses every delayed
// retry. The intents are still in the table (retryable-failure, due at T);
// the sweeper of the restarted process finds them and queues their retries.
// Without the sweeper they would stay stuck (checked first). The sweeper
// finds a lost retry at the intent's repair entry, which a retryable outcome
// leaves where intake filed it when it is due no later than the retry +
// lease + grace (core.RetryEntryBounds): that is the recovery bound.
func TestSweeperRecoversRetriesLostAcrossRestart(t *testing.T) {
	t.Parallel()
	backoff := core.BackoffPolicy{Base: 2 * time.Second, Cap: 2 * time.Second, MaxAttempts: 3, MaxAge: time.Hour}
	const lease, grace = 3 * time.Second, time.Second
	policy := core.AttemptPolicy{Backoff: backoff, Lease: lease, SweepGrace: grace}
	before := newEnv(t, options{Config: wire.Config{Policy: policy}})
	before.faults(`{"account":"acct-restart","faults":[{"kind":"unavailable"},{"kind":"unavailable"}]}`)
	ids := []string{
		before.mustSubmit("restart-1", intentBody("acct-restart", "chan-1", "one")),
		before.mustSubmit("restart-2", intentBody("acct-restart", "chan-2", "two")),
	}
	for _, id := range ids {
		before.waitStatus(id, 10*time.Second, core.StatusRetryableFailure)
	}
	// The process stops; the queue emulator restarts empty.
	before.stop()
	ctx := context.Background()
	if _, err := before.clients.SQS.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(before.st.Queues.Retry)}); err != nil {
		t.Fatal(err)
	}
	attrs, err := before.clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(before.st.Queues.Retry),
		AttributeNames: []sqsAttr{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesNotVisible"}})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range attrs.Attributes {
		if v != "0" {
			t.Fatalf("the retry queue still holds messages after the loss: %s=%s", k, v)
		}
	}

	// The restarted process, first without its sweeper: the retries are due
	// and nothing picks them up.
	after := before.join(options{Config: wire.Config{Policy: policy}})
	var due time.Time
	for _, id := range ids {
		in := after.intent(id)
		if in.NextAttemptAt == nil || in.RepairAt.IsZero() {
			t.Fatalf("%s: no retry time (%v) or no repair entry (%v)", id, in.NextAttemptAt, in.RepairAt)
		}
		if in.RepairAt.After(in.NextAttemptAt.Add(lease + grace)) {
			t.Fatalf("%s: repair entry due %v, after the bound retry + lease + grace (%v)", id, in.RepairAt, in.NextAttemptAt.Add(lease+grace))
		}
		for _, at := range []time.Time{in.NextAttemptAt.Add(1500 * time.Millisecond), in.RepairAt} {
			if at.After(due) {
				due = at
			}
		}
	}
	for time.Now().Before(due) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, id := range ids {
		if in := after.intent(id); in.Status != core.StatusRetryableFailure || in.AttemptCount != 1 {
			t.Fatalf("%s: %s after %d attempts; with its message lost it should still wait", id, in.Status, in.AttemptCount)
		}
	}
	// The sweeper's pass re-queues them; they are delivered once each.
	after.sweep()
	for _, id := range ids {
		in := after.waitStatus(id, 15*time.Second, core.StatusSucceeded)
		if in.AttemptCount != 2 {
			t.Fatalf("%s: %d attempts, want 2 (the failed one, then the swept retry)", id, in.AttemptCount)
		}
		after.assertEffectsStay(id, 1, 0)
	}
}
