package infra

import (
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// suppress records a cdk-nag suppression, with its reason, on construct and
// its children. appliesTo narrows it to specific findings (for IAM5, the
// exact wildcard resource), given as "/regex/" or a literal.
func suppress(construct interface{}, id, reason string, appliesTo ...string) {
	s := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		at := make([]interface{}, 0, len(appliesTo))
		for _, a := range appliesTo {
			if len(a) > 1 && a[0] == '/' {
				at = append(at, &cdknag.RegexAppliesTo{Regex: jsii.String(a)})
			} else {
				at = append(at, a)
			}
		}
		s.AppliesTo = &at
	}
	cdknag.NagSuppressions_AddResourceSuppressions(construct, &[]*cdknag.NagPackSuppression{s}, jsii.Bool(true))
}

// suppressions lists every accepted cdk-nag finding and why. Route-level
// ones are added where the route is created (httpAPI).
func (o *outbox) suppressions() {
	for _, s := range o.r.functions {
		role := o.roles[s.Name]
		suppress(role, "AwsSolutions-IAM5",
			"X-Ray active tracing (issue 30): xray:PutTraceSegments and xray:PutTelemetryRecords do not support resource-level permissions (AWS requires Resource \"*\"); the CDK grants exactly these two for Tracing ACTIVE.",
			"Resource::*")
		if s.Trigger == TriggerStream {
			suppress(role, "AwsSolutions-IAM5",
				"dynamodb:ListStreams does not support resource-level permissions (AWS requires Resource \"*\"); the Lambda stream event source mapping needs it. GetRecords/GetShardIterator/DescribeStream are scoped to this table's stream ARN.",
				"Resource::*")
		}
		if s.Needs.Has(NeedBackupBucket) {
			suppress(role, "AwsSolutions-IAM5",
				"Backup object keys are generated per backup (backups/<backup-id>/...), so GetObject/PutObject are granted on the backup bucket's objects under backups/ only; no other bucket or prefix, and no delete.",
				`/^Resource::<BackupBucket[A-Za-z0-9]+\.Arn>\/backups\/\*$/`)
		}
		if s.Needs.Has(NeedPayloadRead) || s.Needs.Has(NeedPayloadWrite) {
			suppress(role, "AwsSolutions-IAM5",
				"Payload objects are content-addressed (payloads/sha256/<hash of the payload>): their keys are not known before intake, so GetObject (attempting functions) or PutObject (intake, restore) is granted on payloads/* of the payload bucket only; no other prefix or bucket, no list, no delete.",
				`/^Resource::<PayloadBucket[A-Za-z0-9]+\.Arn>\/payloads\/\*$/`)
		}
	}
	suppress(o.backupKey, "AwsSolutions-SMG4",
		"The backup key signs snapshot manifests (HMAC); an automatic rotation would make every earlier snapshot unrestorable. It is rotated by hand, keeping the previous version to restore older snapshots (docs/decisions.md).")
	suppress(o.dispatchFailures, "AwsSolutions-SQS3",
		"This queue is the dispatcher stream mapping's on-failure destination, i.e. it already is the dead-letter destination; nothing consumes it automatically (an alarm fires on any message).")
}
