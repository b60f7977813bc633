package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/faultdb"
	"github.com/botharness/outbox/adapters/wire"
)

// Regression, found by chaos (seeds 3385967766, 3385967899, 3385967710 of
// the run with base seed 3385967573): a profile backup whose RaiseBarrier
// write was applied but whose response was lost (the uncertain write window
// of our own store) returned an error without lifting the barrier it had
// raised. Until the barrier's TTL (5 minutes by default) every claim of the
// profile was refused and every other backup answered 409 "another backup
// holds it". A failed backup must leave no barrier behind.
func TestRegressionBackupLiftsBarrierWhenRaiseResponseIsLost(t *testing.T) {
	ctx := context.Background()
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inj := faultdb.New(1)
	inj.Register(&cfg)
	clients := awsconfig.New(cfg)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "chaosbug_" + hex.EncodeToString(b[:])
	if err := dynamo.EnsureTable(ctx, clients.DynamoDB, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = clients.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	bucket := strings.ReplaceAll(name, "_", "-")
	if _, err := clients.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	app, err := wire.New(clients, wire.Config{Table: name, BackupBucket: bucket, RetryQueueURL: "unused", InboxQueueURL: "unused",
		Log: slog.New(slog.DiscardHandler), MetricsOut: io.Discard, BackupKey: "chaos-regression-backup-key"})
	if err != nil {
		t.Fatal(err)
	}
	if app.Backups == nil {
		t.Fatal("wire.New no longer wires Backups: this regression test would check nothing")
	}
	const bot = "bot-b4"
	// The barrier is raised on every shard in one transaction.
	inj.Add(faultdb.Fault{Kind: faultdb.ResponseLostSurfaced, Ops: []string{"TransactWriteItems"}, Match: func(c faultdb.Call) bool {
		in, ok := c.Input.(*dynamodb.TransactWriteItemsInput)
		if !ok || len(in.TransactItems) == 0 || in.TransactItems[0].Put == nil {
			return false
		}
		pk, _ := in.TransactItems[0].Put.Item["pk"].(*types.AttributeValueMemberS)
		return pk != nil && strings.HasPrefix(pk.Value, "BARRIER#")
	}})
	if _, err := app.Backups.Backup(ctx, bot); err == nil {
		t.Fatal("setup: the backup should have failed (its barrier write's response was lost)")
	}
	if inj.Pending() != 0 {
		t.Fatal("setup: the fault did not apply")
	}
	// The failed backup must not leave its barrier up.
	if _, err := app.Backups.Backup(ctx, bot); err != nil {
		t.Fatalf("a backup right after a failed one is refused: %v (the failed backup's barrier still freezes the profile's claims)", err)
	}
}
