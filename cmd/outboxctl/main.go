// Command outboxctl is the operator CLI: create the tables and queues, and
// issue bearer tokens (only their hashes are stored).
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"

	"github.com/alecthomas/kong"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/sqsqueue"
	"github.com/botharness/outbox/client"
	"github.com/botharness/outbox/core"
)

type cli struct {
	Table string `default:"outbox" env:"OUTBOX_TABLE" help:"DynamoDB table name."`

	Setup setupCmd `cmd:"" help:"Create the table, queues and backup bucket if missing (idempotent)."`
	Token tokenCmd `cmd:"" help:"Issue a bearer token for a principal and store its hash."`

	Intents struct {
		List intentsListCmd `cmd:"" help:"List intents by status (default needs-human), with the evidence summary."`
		Show intentsShowCmd `cmd:"" help:"Show an intent: every attempt, its evidence, recommendations and decisions."`
	} `cmd:"" help:"Inspect intents through the admin API."`
	Resolve   resolveCmd   `cmd:"" help:"Record a human decision on a needs-human intent."`
	Recommend recommendCmd `cmd:"" help:"Attach a recommendation (orchestrators and operators); changes no state."`
	Backup    backupCmd    `cmd:"" help:"Profile backups and managed restore."`
	Pace      struct {
		Show paceShowCmd `cmd:"" help:"Show an account's pace (declared, override, effective), pause, circuit breaker and its events."`
		Set  paceSetCmd  `cmd:"" help:"Override an account's pace (or, without --rate/--per, return to the declared one), with a reason."`
	} `cmd:"" help:"Pacing and circuit breaker per provider account."`
}

type setupCmd struct {
	QueuePrefix string `default:"outbox" help:"Queue name prefix."`
	Bucket      string `default:"outbox-backups" env:"OUTBOX_BACKUP_BUCKET" help:"Backup bucket name."`
}

func (c *setupCmd) Run(root *cli) error {
	ctx := context.Background()
	clients, err := awsconfig.LoadClients(ctx)
	if err != nil {
		return err
	}
	if err := dynamo.EnsureTable(ctx, clients.DynamoDB, root.Table); err != nil {
		return err
	}
	urls, err := sqsqueue.EnsureQueues(ctx, clients.SQS, c.QueuePrefix, 360, 5)
	if err != nil {
		return err
	}
	if _, err := clients.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(c.Bucket)}); err != nil {
		fmt.Fprintf(os.Stderr, "bucket %s: %v (continuing: it may already exist)\n", c.Bucket, err)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"table": root.Table, "queues": urls, "bucket": c.Bucket})
}

type tokenCmd struct {
	Kind  string `required:"" enum:"bot,operator,orchestrator" help:"Principal kind: bot, operator or orchestrator."`
	Name  string `required:"" help:"Principal name (a bot's name scopes its intents)."`
	Token string `help:"Use this token instead of generating one (dev only)." env:"OUTBOX_TOKEN"`
}

func (c *tokenCmd) Run(root *cli) error {
	ctx := context.Background()
	clients, err := awsconfig.LoadClients(ctx)
	if err != nil {
		return err
	}
	tok := c.Token
	if tok == "" {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		tok = "obx_" + base64.RawURLEncoding.EncodeToString(b[:])
	}
	store := dynamo.NewTokens(clients.DynamoDB, root.Table)
	if err := store.PutToken(ctx, core.TokenHash(tok), core.Principal{Kind: c.Kind, Name: c.Name}); err != nil {
		return err
	}
	// The token is shown once, to the operator who asked for it; it is never logged or stored.
	fmt.Println(tok)
	return nil
}

func main() {
	var c cli
	k := kong.Parse(&c, kong.Name("outboxctl"), kong.Description("Operate the outbox."),
		kong.Vars{"api_url": client.BaseURLFromEnv()})
	k.FatalIfErrorf(explain(k.Run(&c)))
}
