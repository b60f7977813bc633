// Command outboxctl is the operator CLI: create the tables and queues, and
// issue, list, revoke and rotate bearer tokens (only their hashes are stored).
package main

import (
	"context"
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
)

type cli struct {
	Table string `default:"outbox" env:"OUTBOX_TABLE" help:"DynamoDB table name."`

	Setup setupCmd `cmd:"" help:"Create the table, queues and backup bucket if missing (idempotent)."`
	Token struct {
		Issue  tokenIssueCmd  `cmd:"" help:"Issue a bearer token (shown once; only its hash is stored). Never replaces a token."`
		List   tokenListCmd   `cmd:"" help:"List tokens: id, kind, owner, created, expires, revoked (never secrets or hashes)."`
		Revoke tokenRevokeCmd `cmd:"" help:"Revoke a token by id (refused by the authorizer within its cache TTL)."`
		Rotate tokenRotateCmd `cmd:"" help:"Issue a successor for the same owner and kind; the old token expires after --overlap."`
		Adopt  tokenAdoptCmd  `cmd:"" help:"Give tokens issued before token ids an id, so they can be listed, revoked and rotated (one table scan)."`
	} `cmd:"" help:"Bearer tokens, read and written directly in the table (AWS credentials; works before any operator token exists)."`

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
	clients, err := tableClients(ctx)
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

func main() {
	var c cli
	k := kong.Parse(&c, kong.Name("outboxctl"), kong.Description("Operate the outbox."),
		kong.Vars{"api_url": client.BaseURLFromEnv()})
	k.FatalIfErrorf(explain(k.Run(&c)))
}

// tableClients are the AWS clients of the commands that read and write the
// table directly (token, setup, backup --direct). Their credentials are
// checked first, so that a shell without any (the SDK's last resort is the
// EC2 instance metadata: "no EC2 IMDS role found") learns what to set.
func tableClients(ctx context.Context) (awsconfig.Clients, error) {
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return awsconfig.Clients{}, err
	}
	if cfg.Credentials != nil {
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			return awsconfig.Clients{}, fmt.Errorf("no AWS credentials: this command reads and writes the table directly. "+
				"Against make run, paste the banner's export lines (OUTBOX_TABLE and the AWS_ ones point at the emulators); "+
				"against a deployed stack, use your AWS profile or credentials and set OUTBOX_TABLE (or --table) to the stack's TableName output (infra/README.md, Deploy): %w", err)
		}
	}
	return awsconfig.New(cfg), nil
}
