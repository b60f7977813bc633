package wire

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/botharness/outbox/adapters/backup"
	"github.com/botharness/outbox/adapters/handlers/admin"
)

// EnvBackupKey holds the backup signing key locally (like
// OUTBOX_WEBHOOK_SECRETS); EnvBackupKeySecret names the Secrets Manager
// secret holding it in AWS (the stack creates it and grants read to the
// functions that back up and restore).
const (
	EnvBackupKey       = "OUTBOX_BACKUP_KEY"
	EnvBackupKeySecret = "OUTBOX_BACKUP_KEY_SECRET"
)

// wireBackups installs profile backup and managed restore when a bucket is configured.
func wireBackups(a *App) error {
	if a.Config.BackupBucket == "" || a.Clients.S3 == nil {
		return nil
	}
	key := a.Config.BackupKey
	if name := a.Config.BackupKeySecret; key == "" && name != "" && a.Clients.Secrets != nil {
		// Read once per cold start, like the webhook secrets.
		out, err := a.Clients.Secrets.GetSecretValue(context.Background(), &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
		if err != nil {
			return fmt.Errorf("read backup key %s: %w", name, err)
		}
		key = aws.ToString(out.SecretString)
	}
	if key != "" && len(key) < backup.MinKeyBytes {
		return fmt.Errorf("the backup key is shorter than %d bytes", backup.MinKeyBytes)
	}
	a.Backups = &backup.Service{
		Store: a.Store, S3: a.Clients.S3, Bucket: a.Config.BackupBucket, Dispatcher: a.Dispatcher,
		Clock: a.Config.Clock, BarrierTTL: 5 * time.Minute, Log: a.Log, Key: []byte(key),
		Progress: func(id string, items int) { a.Log.Info("backup progress", "backup", id, "items", items) },
	}
	if a.Payloads != nil {
		a.Backups.Payloads = a.Payloads
	}
	for k, f := range admin.BackupRoutes(a.Backups, a.Log) {
		a.AdminExtra[k] = f
	}
	return nil
}
