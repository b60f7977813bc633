package wire

import (
	"time"

	"github.com/botharness/outbox/adapters/backup"
	"github.com/botharness/outbox/adapters/handlers/admin"
)

// wireBackups installs profile backup and managed restore when a bucket is configured.
func wireBackups(a *App) error {
	if a.Config.BackupBucket == "" || a.Clients.S3 == nil {
		return nil
	}
	a.Backups = &backup.Service{
		Store: a.Store, S3: a.Clients.S3, Bucket: a.Config.BackupBucket, Dispatcher: a.Dispatcher,
		Clock: a.Config.Clock, BarrierTTL: 5 * time.Minute, Log: a.Log,
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
