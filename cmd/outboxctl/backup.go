package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/wire"
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
}

func (c *backupCreateCmd) Run(root *cli) error {
	if !c.Direct {
		out, err := c.call("POST", "/v1/admin/backups", map[string]string{"profile": c.Profile}, nil)
		if err != nil {
			return err
		}
		return printManifest(out, c.JSON)
	}
	ctx := context.Background()
	clients, err := awsconfig.LoadClients(ctx)
	if err != nil {
		return err
	}
	cfg, _ := wire.FromEnv()
	cfg.Table, cfg.BackupBucket, cfg.MetricsOut = root.Table, c.Bucket, os.Stderr
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
	return printManifest(out, c.JSON)
}

func printManifest(out []byte, raw bool) error {
	if raw {
		_, err := os.Stdout.Write(out)
		return err
	}
	var m struct {
		BackupID, Profile, ItemsObject, ItemsSha256, BarrierAt string
		ItemCount                                              int
		StatusCounts                                           map[string]int
		InFlightAtCutoff                                       []string
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return err
	}
	fmt.Printf("backup    %s\nprofile   %s\nbarrier   %s\nitems     %d (%s, sha256 %s)\nstatuses  %v\n", m.BackupID, m.Profile, m.BarrierAt, m.ItemCount, m.ItemsObject, m.ItemsSha256, m.StatusCounts)
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
	out, err := c.call("GET", "/v1/admin/backups/"+c.ID, nil, nil)
	if err != nil {
		return err
	}
	return printManifest(out, c.JSON)
}

type backupRestoreCmd struct {
	apiFlags
	ID string `arg:"" help:"Backup id (bk_...)."`
}

func (c *backupRestoreCmd) Run() error {
	out, err := c.call("POST", "/v1/admin/restores", map[string]string{"backupId": c.ID}, nil)
	if err != nil || c.JSON {
		os.Stdout.Write(out)
		return err
	}
	var rep struct {
		Items, Written, KeptExisting int
		Outcomes                     map[string]int
		Reconciled                   []string
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return err
	}
	fmt.Printf("restored %d of %d items (%d already present, kept)\noutcomes: %v\nreconciled: %d\n", rep.Written, rep.Items, rep.KeptExisting, rep.Outcomes, len(rep.Reconciled))
	return nil
}
