// Package wire builds the core services from configuration and AWS clients.
// Every function's main.go, the local host and the integration tests use it,
// so they all run the same assembly.
package wire

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/archive"
	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/backup"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/emf"
	"github.com/botharness/outbox/adapters/payloads"
	"github.com/botharness/outbox/adapters/sqsqueue"
	"github.com/botharness/outbox/adapters/tracing"
	"github.com/botharness/outbox/adapters/ttlcache"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
	"github.com/botharness/outbox/core/botlimit"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/core/gate/pacing"
	"github.com/botharness/outbox/core/notify"
	"github.com/botharness/outbox/core/resolve"
	"github.com/botharness/outbox/core/retention"
)

// Config is everything the functions read from the environment.
type Config struct {
	Table         string
	RetryQueueURL string
	InboxQueueURL string
	BackupBucket  string
	// PayloadBucket holds payloads over core.PayloadInlineMax (claim-check);
	// empty keeps every payload inline in the intent item.
	PayloadBucket  string
	ProviderConfig string // JSON, see ProviderSettings
	// SecretUses is OUTBOX_SECRET_USES: which provider secrets this function
	// reads ("send", "verify", "none"; "" every use). See secrets.go.
	SecretUses string
	// Policy is the attempt policy (core.AttemptPolicy; OUTBOX_ATTEMPT_POLICY,
	// see EnvAttemptPolicy): zero fields take the defaults; New checks it
	// once, against the configured providers too (resolvePolicy).
	Policy core.AttemptPolicy
	// InlineMaxWait caps Prefer: wait on POST /v1/intents (issue 26;
	// default core.DefaultInlineMaxWait).
	InlineMaxWait time.Duration
	// RequestCacheTTL keeps token principals and intake grant reads in
	// memory this long (0: no cache). The dispatcher's own checks never use it.
	RequestCacheTTL time.Duration
	Clock           core.Clock
	Owner           string
	Log             *slog.Logger
	MetricsOut      io.Writer
	// Operator events (issue 14): an SNS topic in AWS, or a signed webhook
	// locally; ConsoleURL is the console's base URL for links in them.
	OperatorTopicArn      string
	OperatorWebhookURL    string
	OperatorWebhookSecret string
	ConsoleURL            string
	// BotLimits are the per-bot rate and open-intent limits (issue 24;
	// OUTBOX_BOT_RATE, OUTBOX_BOT_MAX_OPEN, OUTBOX_BOT_LIMITS). Zero: none.
	BotLimits botlimit.BotLimitConfig
	// BackupKey signs and verifies backup manifests (HMAC-SHA256; locally
	// OUTBOX_BACKUP_KEY). Empty: read the Secrets Manager secret named by
	// BackupKeySecret (OUTBOX_BACKUP_KEY_SECRET), if any (wireBackups).
	BackupKey       string
	BackupKeySecret string
	// WebhookSecrets is the providers' webhook signing secrets document
	// (OUTBOX_WEBHOOK_SECRETS, see EnvWebhookSecrets); ProviderSecrets names
	// Secrets Manager secrets holding more in the same format
	// (OUTBOX_PROVIDER_SECRETS, comma separated).
	WebhookSecrets  string
	ProviderSecrets string
	// Retention (issue 27): an ended intent is kept whole IntentRetention
	// after it ends (its key is honoured at least that long), then its
	// tombstone keeps the key TombstoneRetention. Zero here means the
	// defaults (retention.DefaultRetention); OUTBOX_INTENT_RETENTION and
	// OUTBOX_TOMBSTONE_RETENTION set them as Go durations.
	IntentRetention    time.Duration
	TombstoneRetention time.Duration
	// ArchiveBucket receives pruned intents' records (OUTBOX_ARCHIVE_BUCKET;
	// empty: the archive is off, tombstones only).
	ArchiveBucket string
	// Sharding sets the repair index's shard count (zero:
	// dynamo.DefaultSharding's 64; the other counts are fixed,
	// dynamo.ProfileShards and its neighbours). Never read from the
	// environment: stored keys depend on it, so every process on a table
	// must agree. Tests on small tables lower Repair (a sweep reads every
	// repair shard, four requests each; see docs/decisions.md).
	Sharding dynamo.Sharding

	// Injection points for harnesses (never read from the environment).
	// HTTPClient is the providers' HTTP client (nil: a new http.Client).
	// RetryQueue replaces the SQS retry queue for the dispatcher and the
	// sweeper (chaos routes every message through its own mailbox).
	// WrapProvider wraps each configured provider (chaos's deliberately
	// broken adapters).
	HTTPClient   *http.Client
	RetryQueue   core.RetryQueue
	WrapProvider func(name string, p core.Provider) core.Provider
}

// FromEnv reads OUTBOX_* variables. Missing required values are an error.
func FromEnv(required ...string) (Config, error) {
	var bad []error
	durationEnv := func(name string, def time.Duration) time.Duration {
		d, err := DurationEnv(name, def)
		if err != nil {
			bad = append(bad, err)
		}
		return d
	}
	c := Config{
		Table:           os.Getenv("OUTBOX_TABLE"),
		RetryQueueURL:   os.Getenv("OUTBOX_RETRY_QUEUE_URL"),
		InboxQueueURL:   os.Getenv("OUTBOX_INBOX_QUEUE_URL"),
		BackupBucket:    os.Getenv("OUTBOX_BACKUP_BUCKET"),
		PayloadBucket:   os.Getenv("OUTBOX_PAYLOAD_BUCKET"),
		ProviderConfig:  os.Getenv("OUTBOX_PROVIDER_CONFIG"),
		SecretUses:      os.Getenv(EnvSecretUses),
		RequestCacheTTL: durationEnv("OUTBOX_REQUEST_CACHE_TTL", 5*time.Second),
		InlineMaxWait:   durationEnv("OUTBOX_INLINE_MAX_WAIT", core.DefaultInlineMaxWait),

		OperatorTopicArn:      os.Getenv("OUTBOX_OPERATOR_TOPIC_ARN"),
		OperatorWebhookURL:    os.Getenv("OUTBOX_OPERATOR_WEBHOOK_URL"),
		OperatorWebhookSecret: os.Getenv("OUTBOX_OPERATOR_WEBHOOK_SECRET"),
		ConsoleURL:            os.Getenv("OUTBOX_CONSOLE_URL"),
		BackupKey:             os.Getenv(EnvBackupKey),
		BackupKeySecret:       os.Getenv(EnvBackupKeySecret),
		WebhookSecrets:        os.Getenv(EnvWebhookSecrets),
		ProviderSecrets:       os.Getenv(EnvProviderSecrets),

		IntentRetention:    durationEnv("OUTBOX_INTENT_RETENTION", retention.DefaultIntentRetention),
		TombstoneRetention: durationEnv("OUTBOX_TOMBSTONE_RETENTION", retention.DefaultTombstoneRetention),
		ArchiveBucket:      os.Getenv("OUTBOX_ARCHIVE_BUCKET"),
	}
	if err := errors.Join(bad...); err != nil {
		return c, err
	}
	limits, err := botLimitsFromEnv()
	if err != nil {
		return c, err
	}
	c.BotLimits = limits
	if c.Policy, err = ParseAttemptPolicy(os.Getenv(EnvAttemptPolicy)); err != nil {
		return c, err
	}
	if c.ProviderConfig == "" && os.Getenv("OUTBOX_SANDBOX_URL") != "" {
		c.ProviderConfig = fmt.Sprintf(`{%q:{"baseUrl":%q}}`, localProvider(), os.Getenv("OUTBOX_SANDBOX_URL"))
	}
	vals := map[string]string{
		"OUTBOX_TABLE": c.Table, "OUTBOX_RETRY_QUEUE_URL": c.RetryQueueURL, "OUTBOX_INBOX_QUEUE_URL": c.InboxQueueURL,
		"OUTBOX_BACKUP_BUCKET": c.BackupBucket, "OUTBOX_PROVIDER_CONFIG": c.ProviderConfig,
	}
	for _, r := range required {
		if vals[r] == "" {
			return c, fmt.Errorf("missing required environment variable %s", r)
		}
	}
	return c, nil
}

// DurationEnv reads a positive Go duration ("5s") from name; def when the
// variable is unset or empty. Anything else is an error naming the variable
// (a typo never silently runs on the default).
func DurationEnv(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, nil
	}
	return def, fmt.Errorf("%s=%q: want a positive Go duration such as 30s", name, v)
}

// Logger is the JSON logger every function uses.
func Logger() *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("LOG_LEVEL") == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// App is the assembled system.
type App struct {
	Config Config
	Store  *dynamo.Store
	Tokens *dynamo.Tokens
	// Authn resolves bearer tokens for the authorizer (cached per RequestCacheTTL).
	Authn      auth.TokenStore
	Queue      *sqsqueue.Queue
	Providers  core.ProviderMap
	Intake     *core.Intake
	Dispatcher *core.Dispatcher
	Sweeper    *core.Sweeper
	Resolver   *resolve.Resolver
	// AdminExtra holds admin routes beyond intents (grants, capabilities, backups), by route key.
	AdminExtra map[string]func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse
	// Sources serves PUT /v1/sources/{sourceId} on the bot API.
	Sources SourceUpdater
	// Webhook serves POST /v1/webhooks/{provider}/{account} (no authorizer: providers sign).
	Webhook func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	// WebhookSNS serves the SNS subscriptions of the webhook function
	// (provider events published to SNS, e.g. SES event publishing).
	WebhookSNS func(ctx context.Context, ev events.SNSEvent) error
	Clients    awsconfig.Clients
	Backups    *backup.Service
	// Gate is the account gate (pace, pauses, breaker); nil when pacing is off.
	Gate *gate.Gate
	// OperatorEvents publishes operator events (the notifier stream's and
	// the gate's breaker moves) once per id: ledger, log, metric, then SNS
	// or the webhook; never nil after New. See adapters/operatorevents.
	OperatorEvents *notify.OperatorNotifier
	// Payloads is the claim-check store (nil without a payload bucket).
	Payloads *payloads.Store
	// BotLimiter counts new intents against their bot's limits (intake uses
	// it only when a bot has a limit) and reads the counters for operators.
	BotLimiter *dynamo.BotLimiter
	// Archive keeps pruned intents' records (nil: archive off).
	Archive *archive.Store
	Metrics *emf.Writer
	Log     *slog.Logger

	// Tracer continues one trace per intent (adapters/tracing; no-op
	// without OTEL_EXPORTER_OTLP_ENDPOINT).
	Tracer *tracing.Tracer

	// pacedAccounts are the accounts the configuration paces by name
	// (GateKey), for the overview.
	pacedAccounts []string
	// pacing is the operators' view of the gate (nil with the gate off).
	pacing *pacing.Pacing
	// settings is OUTBOX_PROVIDER_CONFIG as parsed, its secrets resolved
	// (the webhook dialects read their accounts from it).
	settings *ProviderSettings
}

// New assembles the app.
func New(clients awsconfig.Clients, cfg Config) (*App, error) {
	if cfg.Log == nil {
		cfg.Log = Logger()
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock
	}
	if cfg.Owner == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		host, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.MetricsOut == nil {
		cfg.MetricsOut = os.Stdout
	}
	if cfg.IntentRetention <= 0 {
		cfg.IntentRetention = retention.DefaultIntentRetention
	}
	if cfg.TombstoneRetention <= 0 {
		cfg.TombstoneRetention = retention.DefaultTombstoneRetention
	}
	uses, err := ParseSecretUses(cfg.SecretUses)
	if err != nil {
		return nil, err
	}
	res := &SecretResolver{Uses: uses}
	if clients.Secrets != nil {
		res.Reader = clients.Secrets
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	settings, err := ParseProviderSettings(cfg.ProviderConfig) // the one read of the document
	if err != nil {
		return nil, err
	}
	// The attempt policy's one check; every part of the app reads its
	// timings from the result (the dispatcher's Policy, the gate's breaker).
	policy, err := resolvePolicy(cfg.Policy, settings)
	if err != nil {
		return nil, err
	}
	cfg.Policy = policy
	providers, err := providersFrom(context.Background(), settings, httpClient, res)
	if err != nil {
		return nil, err
	}
	if cfg.WrapProvider != nil {
		for name, p := range providers {
			providers[name] = cfg.WrapProvider(name, p)
		}
	}
	pacing := settings.Pacing
	store := dynamo.New(clients.DynamoDB, cfg.Table)
	store.Shards = cfg.Sharding
	// A new intent's repair entry is due once its normal path (claim within
	// the lease) has had its grace: the sweeper never races the stream.
	store.RepairDelay, store.RepairGrace = policy.Lease+policy.SweepGrace, policy.SweepGrace
	store.Retention = cfg.IntentRetention
	metrics := emf.New(cfg.MetricsOut)
	queue := sqsqueue.New(clients.SQS, cfg.RetryQueueURL)
	var retries core.RetryQueue = queue
	var batch core.BatchQueue = queue
	if cfg.RetryQueue != nil {
		retries, batch = cfg.RetryQueue, nil // the sweeper's messages go one by one to it
	}
	d := &core.Dispatcher{
		Store: store, Queue: retries, Providers: providers, Clock: cfg.Clock,
		Policy: policy, Owner: cfg.Owner,
		Barrier: store, Metrics: metrics, Log: cfg.Log,
		Marks: dynamo.NewValueMarks(clients.DynamoDB, cfg.Table),
	}
	app := &App{
		Config:     cfg,
		settings:   settings,
		Store:      store,
		Tokens:     dynamo.NewTokens(clients.DynamoDB, cfg.Table),
		Queue:      queue,
		Providers:  providers,
		Intake:     &core.Intake{Store: store, Providers: providers, Clock: cfg.Clock},
		Dispatcher: d,
		Sweeper:    &core.Sweeper{D: d, Index: store, Batch: batch, Gauges: metrics.Gauge},
		Resolver:   &resolve.Resolver{Store: d.Store, Pages: store, Reconcile: d, Clock: d.Clock, Log: d.Log},
		Metrics:    metrics,
		Log:        cfg.Log,
		Clients:    clients,
		AdminExtra: map[string]func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse{},
	}
	app.Authn = app.Tokens
	// The sweeper recounts bot-limit open counters a lost give-back left
	// too high (issue 24; dynamo.OpenRecount).
	app.Sweeper.OpenCounts = dynamo.NewOpenRecount(store, app.Tokens)
	// Inline delivery (issue 26): the intake makes a first attempt that asks
	// to wait through this same dispatcher (its lease owner is this process).
	app.Intake.Inline = &core.Inline{D: d, MaxWait: cfg.InlineMaxWait}
	if cfg.PayloadBucket != "" && clients.S3 != nil {
		// 64 cached payloads of at most 256 KiB: 16 MiB per instance.
		app.Payloads = payloads.New(clients.S3, cfg.PayloadBucket, 64)
		app.Intake.Payloads, d.Payloads = app.Payloads, app.Payloads
	}
	if cfg.ArchiveBucket != "" && clients.S3 != nil {
		app.Archive = archive.New(clients.S3, cfg.ArchiveBucket)
	}
	if cfg.RequestCacheTTL > 0 {
		app.Authn = ttlcache.NewTokens(app.Tokens, cfg.RequestCacheTTL)
	}
	tracer, err := tracing.New(context.Background(), "outbox")
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	app.Tracer, d.Tracer = tracer, tracer
	wirePacing(app, pacing) // before revalidation: the capability GET shows the pacing
	if err := wireRevalidation(app); err != nil {
		return nil, err
	}
	wireBotLimits(app)
	if err := wireWebhooks(app); err != nil {
		return nil, err
	}
	if err := wireBackups(app); err != nil {
		return nil, err
	}
	if err := wireOperatorEvents(app); err != nil {
		return nil, err
	}
	wireTokens(app)
	wireConsole(app)
	return app, nil
}

// SourceUpdater records a source's current revision (PUT /v1/sources/{sourceId}).
type SourceUpdater interface {
	PutSourceRevision(ctx context.Context, p core.Principal, sourceID string, body []byte) (any, error)
}
