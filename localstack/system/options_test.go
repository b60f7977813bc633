package system

import (
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/sqsqueue"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
)

// The local defaults, filled in one place, reach the app's configuration;
// the queue URLs are the created queues'; "-" turns a bucket off (wire's
// ""), also when the defaults are filled twice (Start, then Assemble).
func TestOptionsBuildTheWireConfigWithTheLocalDefaults(t *testing.T) {
	t.Setenv(wire.EnvBackupKey, "")
	queues := sqsqueue.QueueURLs{Retry: "http://q/retry", Inbox: "http://q/inbox"}

	c := Options{}.withDefaults().wireConfig(queues)
	if c.Table != "outbox" || c.BackupBucket != "outbox-backups" || c.PayloadBucket != "outbox-payloads" || c.ArchiveBucket != "outbox-archive" {
		t.Fatalf("default names: table %q buckets %q %q %q", c.Table, c.BackupBucket, c.PayloadBucket, c.ArchiveBucket)
	}
	if c.Policy.Lease != 0 || c.RequestCacheTTL != 0 {
		// The attempt policy's defaults are wire's (core.AttemptPolicy.Resolve).
		t.Fatalf("default durations: lease %v cache %v", c.Policy.Lease, c.RequestCacheTTL)
	}
	if c.BackupKey == "" || c.BackupKey != (Options{}).withDefaults().BackupKey || c.Log == nil {
		t.Fatalf("backup key %q (one per process) or logger %v unset", c.BackupKey, c.Log)
	}
	if c.RetryQueueURL != queues.Retry || c.InboxQueueURL != queues.Inbox {
		t.Fatalf("queue URLs %q %q", c.RetryQueueURL, c.InboxQueueURL)
	}
	if o := (Options{}).withDefaults(); o.QueuePrefix != "outbox" || o.PollInterval != 100*time.Millisecond {
		t.Fatalf("local defaults: prefix %q poll %v", o.QueuePrefix, o.PollInterval)
	}

	o := Options{Config: wire.Config{Table: "t1", BackupBucket: "-", PayloadBucket: "-", ArchiveBucket: "-",
		Policy: core.AttemptPolicy{Lease: 5 * time.Second}, RetryQueueURL: "ignored"}}
	c = o.withDefaults().withDefaults().wireConfig(queues)
	if c.Table != "t1" || c.Policy.Lease != 5*time.Second || c.Policy.SweepGrace != 0 {
		t.Fatalf("set values: table %q lease %v grace %v", c.Table, c.Policy.Lease, c.Policy.SweepGrace)
	}
	if c.BackupBucket != "" || c.PayloadBucket != "" || c.ArchiveBucket != "" {
		t.Fatalf(`"-" buckets not off: %q %q %q`, c.BackupBucket, c.PayloadBucket, c.ArchiveBucket)
	}
	if c.RetryQueueURL != queues.Retry {
		t.Fatalf("retry queue %q, not the created queue's", c.RetryQueueURL)
	}

	t.Setenv(wire.EnvBackupKey, "env-key")
	if k := (Options{}).withDefaults().BackupKey; k != "env-key" {
		t.Fatalf("backup key %q, not %s's", k, wire.EnvBackupKey)
	}
}
