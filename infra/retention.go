package infra

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/botharness/outbox/adapters/archive"
	"github.com/botharness/outbox/adapters/handlers/pruner"
	"github.com/botharness/outbox/core/retention"
)

// Retention (issue 27): the stated idempotency window, the tombstones and
// the archive. Kept apart from the rest of the stack on purpose.

// Environment variables of the retention settings.
const (
	EnvIntentRetention    = "OUTBOX_INTENT_RETENTION"
	EnvTombstoneRetention = "OUTBOX_TOMBSTONE_RETENTION"
	EnvArchiveBucket      = "OUTBOX_ARCHIVE_BUCKET"
)

// The pruner's stream mapping (pruner.MappingBatchSize and
// MappingBatchingWindow: the same settings the local host and the bench's
// archive_s3_puts_per_1000_pruned use).
const (
	PrunerBatchSize             = pruner.MappingBatchSize
	PrunerBatchingWindowSeconds = float64(pruner.MappingBatchingWindow / time.Second)
)

// ActionsArchiveWrite: the pruner writes batch objects (HeadObject is
// s3:GetObject, to leave a retried batch's object alone).
var ActionsArchiveWrite = []string{"s3:GetObject", "s3:PutObject"}

// RetentionProps are the retention stack props (embedded in OutboxStackProps).
type RetentionProps struct {
	// IntentRetention is how long an ended intent is kept whole after it
	// ends: its key is honoured (replays answer it) at least this long.
	// Default 7 days. Non-terminal intents never expire.
	IntentRetention time.Duration
	// TombstoneRetention is how long a pruned intent's tombstone then keeps
	// its key (a replay still gets the original outcome). Default 90 days.
	TombstoneRetention time.Duration
	// ArchiveOff turns the archive of pruned intents' records off (the
	// tombstones stay). Default: archive on.
	ArchiveOff bool
	// ArchiveRetentionDays is the archive bucket's own lifecycle: archived
	// records expire this many days after they were written. Default 400.
	ArchiveRetentionDays float64
}

func (r *resolved) resolveRetention() error {
	if r.IntentRetention == 0 {
		r.IntentRetention = retention.DefaultIntentRetention
	}
	if r.TombstoneRetention == 0 {
		r.TombstoneRetention = retention.DefaultTombstoneRetention
	}
	if r.IntentRetention < time.Second || r.TombstoneRetention < time.Second {
		return errors.New("OutboxStackProps.IntentRetention and TombstoneRetention must be at least a second")
	}
	if r.ArchiveRetentionDays == 0 {
		r.ArchiveRetentionDays = 400
	}
	if r.ArchiveRetentionDays < 1 {
		return fmt.Errorf("OutboxStackProps.ArchiveRetentionDays %v: want at least 1", r.ArchiveRetentionDays)
	}
	// A claim-checked payload object is renewed only by intake puts, so it
	// must outlive the intent's window at least.
	if time.Duration(r.PayloadRetentionDays*24*float64(time.Hour)) < r.IntentRetention {
		return fmt.Errorf("OutboxStackProps.PayloadRetentionDays %v is shorter than IntentRetention %v", r.PayloadRetentionDays, r.IntentRetention)
	}
	return nil
}

// retentionData creates the archive bucket (private, encrypted, logged, its
// own lifecycle) unless the archive is off.
func (o *outbox) retentionData() {
	if o.r.ArchiveOff {
		return
	}
	ap := o.loggedBucketProps("archive-bucket/")
	ap.LifecycleRules = expiringUnder("expire-archive", archive.Prefix, o.r.ArchiveRetentionDays)
	o.archiveBucket = awss3.NewBucket(o.stack, jsii.String("ArchiveBucket"), ap)
	awscdk.NewCfnOutput(o.stack, jsii.String("ArchiveBucketName"), &awscdk.CfnOutputProps{
		Value: o.archiveBucket.BucketName(), Description: jsii.String("archived records of pruned intents (gzip JSON Lines under intents/dt=YYYY-MM-DD/)"),
	})
}

// retentionAccess gives a function its retention settings: every function
// that writes intents stamps their TTL (OUTBOX_INTENT_RETENTION); the pruner
// also gets the tombstone window and the archive bucket.
func (o *outbox) retentionAccess(spec FunctionSpec, role awsiam.Role, env map[string]*string) {
	if spec.Needs.Has(NeedTableWrite) {
		env[EnvIntentRetention] = jsii.String(o.r.IntentRetention.String())
	}
	if spec.Needs.Has(NeedArchiveWrite) {
		env[EnvTombstoneRetention] = jsii.String(o.r.TombstoneRetention.String())
		if o.archiveBucket != nil {
			role.AddToPrincipalPolicy(allow(ActionsArchiveWrite, o.archiveBucket.ArnForObjects(jsii.String(archive.Prefix+"*"))))
			env[EnvArchiveBucket] = o.archiveBucket.BucketName()
		}
	}
}

// retentionSuppressions: the archive grant is on the archive prefix.
func (o *outbox) retentionSuppressions() {
	for _, s := range o.r.functions {
		if s.Needs.Has(NeedArchiveWrite) && o.archiveBucket != nil {
			suppress(o.roles[s.Name], "AwsSolutions-IAM5",
				"Archive objects are named per stream batch (intents/dt=<day>/<batch>.jsonl.gz), so the pruner's GetObject (HeadObject of a retried batch) and PutObject are granted on intents/* of the archive bucket only; no other prefix or bucket, no list, no delete.",
				`/^Resource::<ArchiveBucket[A-Za-z0-9]+\.Arn>\/intents\/\*$/`)
		}
	}
}
