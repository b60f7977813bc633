package system

import (
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/sqsqueue"
	"github.com/botharness/outbox/adapters/wire"
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
	if c.Lease != 60*time.Second || c.SweepGrace != 30*time.Second || c.RequestCacheTTL != 0 {
		t.Fatalf("default durations: lease %v grace %v cache %v", c.Lease, c.SweepGrace, c.RequestCacheTTL)
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
		Lease: 5 * time.Second, RetryQueueURL: "ignored"}}
	c = o.withDefaults().withDefaults().wireConfig(queues)
	if c.Table != "t1" || c.Lease != 5*time.Second || c.SweepGrace != 30*time.Second {
		t.Fatalf("set values: table %q lease %v grace %v", c.Table, c.Lease, c.SweepGrace)
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
