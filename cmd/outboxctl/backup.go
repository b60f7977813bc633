package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/client"
)

type backupCmd struct {
	Create  backupCreateCmd  `cmd:"" help:"Back up one profile (a bot's outbox) to S3 behind a claim barrier."`
	Show    backupShowCmd    `cmd:"" help:"Show a backup's verified manifest."`
	Restore backupRestoreCmd `cmd:"" help:"Verify a snapshot and restore it into this deployment's table."`
}

type backupCreateCmd struct {
	apiFlags
	Profile string `required:"" help:"The bot whose outbox to back up."`
	Direct  bool   `help:"Run here with AWS credentials instead of through the admin API, printing progress (for large profiles that outlast the API's 30 s)."`
	Bucket  string `env:"OUTBOX_BACKUP_BUCKET" default:"outbox-backups" help:"Bucket (with --direct)."`
	// Payloads over 4 KiB live in the payload bucket; the snapshot carries them.
	PayloadBucket string `env:"OUTBOX_PAYLOAD_BUCKET" default:"outbox-payloads" help:"Payload bucket (with --direct)."`
}

func (c *backupCreateCmd) Run(root *cli) error {
	if !c.Direct {
		return call(c.apiFlags, func(ctx context.Context, a *client.Admin) (*client.Manifest, error) {
			return a.CreateBackup(ctx, c.Profile)
		}, c.printManifest)
	}
	ctx := context.Background()
	clients, err := tableClients(ctx)
	if err != nil {
		return err
	}
	cfg, _ := wire.FromEnv()
	cfg.Table, cfg.BackupBucket, cfg.PayloadBucket, cfg.MetricsOut = root.Table, c.Bucket, c.PayloadBucket, os.Stderr
	app, err := wire.New(clients, cfg)
	if err != nil {
		return err
	}
	app.Backups.Progress = func(id string, items int) { fmt.Fprintf(os.Stderr, "%s: %d items captured\n", id, items) }
	m, err := app.Backups.Backup(ctx, c.Profile)
	if err != nil {
		return err
	}
	out, _ := json.Marshal(m)
	var cm client.Manifest
	if err := json.Unmarshal(out, &cm); err != nil {
		return err
	}
	return c.printManifest(&cm)
}

func (a apiFlags) printManifest(m *client.Manifest) error {
	if done, err := a.printJSON(m); done {
		return err
	}
	fmt.Printf("backup    %s\nprofile   %s\nbarrier   %s\nitems     %d (%s, sha256 %s)\nstatuses  %v\n", m.BackupID, m.Profile, m.BarrierAt.Format(time.RFC3339Nano), m.ItemCount, m.ItemsObject, m.ItemsSHA256, m.StatusCounts)
	fmt.Printf("in flight at cutoff: %d\n", len(m.InFlightAtCutoff))
	for _, id := range m.InFlightAtCutoff {
		fmt.Println("  " + id)
	}
	return nil
}

type backupShowCmd struct {
	apiFlags
	ID string `arg:"" help:"Backup id (bk_...)."`
}

func (c *backupShowCmd) Run() error {
	return call(c.apiFlags, func(ctx context.Context, a *client.Admin) (*client.Manifest, error) { return a.Backup(ctx, c.ID) }, c.printManifest)
}

type backupRestoreCmd struct {
	apiFlags
	ID string `arg:"" help:"Backup id (bk_...)."`
}

func (c *backupRestoreCmd) Run() error {
	return call(c.apiFlags, func(ctx context.Context, a *client.Admin) (*client.RestoreReport, error) { return a.Restore(ctx, c.ID) }, showRestore)
}

func showRestore(rep *client.RestoreReport) error {
	fmt.Printf("restored %d of %d items (%d already present, kept)\noutcomes: %v\nreconciled: %d\n", rep.Written, rep.Items, rep.KeptExisting, rep.Outcomes, len(rep.Reconciled))
	return nil
}

// AfterApply skips the API reachability check with --direct, which talks to
// AWS itself.
func (c *backupCreateCmd) AfterApply() error {
	if c.Direct {
		return nil
	}
	return c.apiFlags.AfterApply()
}
