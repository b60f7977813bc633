// Command outbox-local runs the whole outbox on this machine against the
// emulators: the HTTP API (real handlers behind a local API Gateway), the
// stream-triggered dispatcher, the SQS retrier, the sweeper's schedule and,
// unless OUTBOX_SANDBOX_URL points elsewhere, the sandbox provider.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/client"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/system"
	"github.com/botharness/outbox/sandbox"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// DevBackupKey signs make run's backups unless OUTBOX_BACKUP_KEY is set.
const DevBackupKey = "dev-backup-key-not-secret"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "outbox-local:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Quiet by default in the foreground: warnings and errors only, so the
	// banner stays on screen; LOG_LEVEL=info brings back the request and
	// sweep lines and the EMF metric lines, LOG_LEVEL=debug more.
	level := slog.LevelWarn
	if v := os.Getenv("LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", v)
		}
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var metricsOut io.Writer = os.Stdout
	if level > slog.LevelInfo {
		metricsOut = io.Discard
	}
	httpAddr := env("OUTBOX_HTTP_ADDR", "127.0.0.1:4000")
	sandboxURL := os.Getenv("OUTBOX_SANDBOX_URL")
	sandboxState := ""
	if sandboxURL == "" {
		addr := env("OUTBOX_SANDBOX_ADDR", "127.0.0.1:4100")
		ln, err := sandbox.Listen(addr)
		if err != nil {
			return fmt.Errorf("sandbox provider: %w", err)
		}
		// Under make run the sandbox keeps its effects, accounts and id
		// counters in the data directory (sandbox/persist.go); without
		// OUTBOX_SANDBOX_STATE_FILE it lives in memory.
		var sb *sandbox.Server
		if sandboxState = os.Getenv("OUTBOX_SANDBOX_STATE_FILE"); sandboxState != "" {
			if sb, err = sandbox.Open(sandboxState, time.Now, sandbox.WithLogger(log)); err != nil {
				return err
			}
		} else {
			sb = sandbox.New(time.Now, sandbox.WithLogger(log))
		}
		defer sb.Close()
		srv := &http.Server{Handler: sb, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		sandboxURL = "http://" + ln.Addr().String()
	}
	clients, err := awsconfig.LoadClients(ctx)
	if err != nil {
		return err
	}
	tokens := map[string]core.Principal{
		env("OUTBOX_DEV_BOT_TOKEN", "dev-bot-token"):                   {Kind: core.PrincipalBot, Name: env("OUTBOX_DEV_BOT_NAME", "dev-bot")},
		env("OUTBOX_DEV_OPERATOR_TOKEN", "dev-operator-token"):         {Kind: core.PrincipalOperator, Name: "dev-operator"},
		env("OUTBOX_DEV_ORCHESTRATOR_TOKEN", "dev-orchestrator-token"): {Kind: core.PrincipalOrchestrator, Name: "dev-orchestrator"},
	}
	// OUTBOX_PROVIDER_CONFIG adds providers beside the sandbox ("sandbox":
	// null in it turns the sandbox off; a "sandbox" block replaces it).
	providerCfg, err := wire.WithSandbox(os.Getenv("OUTBOX_PROVIDER_CONFIG"), sandboxURL, 3000)
	if err != nil {
		return err
	}
	providers, err := wire.DescribeProviders(providerCfg)
	if err != nil {
		return err
	}
	// The same configuration variables as the functions (OUTBOX_ATTEMPT_POLICY,
	// OUTBOX_REQUEST_CACHE_TTL, with the same defaults),
	// plus the sweeper's schedule, which in AWS is the stack's rule.
	cfg, err := wire.FromEnv()
	if err != nil {
		return err
	}
	sweepInterval, err := wire.DurationEnv("OUTBOX_SWEEP_INTERVAL", 15*time.Second)
	if err != nil {
		return err
	}
	reaperInterval, err := wire.DurationEnv("OUTBOX_TTL_REAPER_INTERVAL", 15*time.Second)
	if err != nil {
		return err
	}
	table := env("OUTBOX_TABLE", "outbox")
	st, err := system.Start(ctx, clients, system.Options{
		Config: wire.Config{
			Table: table, ProviderConfig: providerCfg,
			Policy: cfg.Policy, RequestCacheTTL: cfg.RequestCacheTTL, InlineMaxWait: cfg.InlineMaxWait,
			Log: log, MetricsOut: metricsOut,
			// The dev backup key (make run); outboxctl backup --direct reads the
			// same variable. In AWS it is a Secrets Manager secret.
			BackupKey: env(wire.EnvBackupKey, DevBackupKey),
			// Operator events as signed POSTs, when a subscriber URL is given.
			OperatorWebhookURL:    os.Getenv("OUTBOX_OPERATOR_WEBHOOK_URL"),
			OperatorWebhookSecret: os.Getenv("OUTBOX_OPERATOR_WEBHOOK_SECRET"),
			ConsoleURL:            env("OUTBOX_CONSOLE_URL", "http://"+httpAddr+"/console"),
			// OUTBOX_BOT_RATE, OUTBOX_BOT_MAX_OPEN, OUTBOX_BOT_LIMITS.
			BotLimits: cfg.BotLimits,
			// OUTBOX_WEBHOOK_SECRETS: the providers' webhook signing secrets.
			WebhookSecrets: cfg.WebhookSecrets,
			// Retention (issue 27): OUTBOX_INTENT_RETENTION / OUTBOX_TOMBSTONE_RETENTION.
			IntentRetention: cfg.IntentRetention, TombstoneRetention: cfg.TombstoneRetention,
		},
		QueuePrefix:   env("OUTBOX_QUEUE_PREFIX", table),
		SweepInterval: sweepInterval, Tokens: tokens,
		// A permissive dev grant so the printed curl works; real grants are
		// managed through PUT /v1/admin/grants/{grantId}.
		Grants: []core.Grant{{ID: "dev-grant", Version: 1, Bot: "*", Provider: "sandbox", Account: "*",
			Actions: []string{"*"}, Targets: []string{"*"}}},
		// DynamoDB Local's own TTL deletes, but not dependably: the reaper does.
		TTLReaperInterval: reaperInterval, PruneBatchingWindow: 5 * time.Second,
		APIURL: "http://" + httpAddr,
	})
	if err != nil {
		return err
	}
	defer st.Stop()
	errc := make(chan error, 1)
	go func() { errc <- st.Gateway.ListenAndServe(ctx, httpAddr) }()
	// The banner comes last, once the API answers, so it is the last thing
	// on screen (and a failed listen is reported instead of it).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", httpAddr, time.Second); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-errc:
			return fmt.Errorf("HTTP API on %s: %w", httpAddr, err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("HTTP API on %s: not listening after 10s", httpAddr)
		}
	}
	fmt.Print(banner(bannerInfo{
		API: "http://" + httpAddr, Sandbox: sandboxURL, SandboxState: sandboxState, DataDir: os.Getenv("OUTBOX_DDB_DATA_DIR"),
		BotToken: keyOf(tokens, core.PrincipalBot), OperatorToken: keyOf(tokens, core.PrincipalOperator),
		OrchestratorToken: keyOf(tokens, core.PrincipalOrchestrator), Providers: providers, Level: level,
		Table: table, AWSExports: emulatorExports(),
	}))
	err = <-errc
	if errors.Is(err, http.ErrServerClosed) || ctx.Err() != nil {
		return nil
	}
	return err
}

type bannerInfo struct {
	API, Sandbox, SandboxState, DataDir        string
	BotToken, OperatorToken, OrchestratorToken string
	Providers                                  []wire.ProviderSummary
	Level                                      slog.Level
	// Table and AWSExports are for the tools that read and write the table
	// directly (outboxctl token, setup, backup --direct): the table's name
	// and, when the emulators play AWS, the variables that point the AWS
	// SDK at them (emulatorExports).
	Table      string
	AWSExports []string
}

// emulatorEndpointVars are the AWS SDK's endpoint variables that
// localstack/emulators.sh env sets (AWS_ENDPOINT_URL: LocalStack).
var emulatorEndpointVars = []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB",
	"AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3"}

// emulatorExports are the "NAME=value" lines that point another process's
// AWS SDK where this one goes: the endpoint variables that are set, a
// region, and placeholder credentials (the emulators take any; real
// credentials are never printed). Against real AWS (no endpoint variable)
// there is nothing to print: the tools use the operator's own credentials.
func emulatorExports() []string {
	var out []string
	for _, k := range emulatorEndpointVars {
		if v := os.Getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return append(out, "AWS_REGION="+env("AWS_REGION", "us-east-1"),
		"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local")
}

// banner is what make run prints once the API answers: addresses, what is
// loaded, and the export lines every program of the project reads
// (client.BaseURLFromEnv and the token variables), then commands using them.
func banner(b bannerInfo) string {
	var w strings.Builder
	fmt.Fprintf(&w, "\noutbox is running\n")
	fmt.Fprintf(&w, "  HTTP API   %s   (GET /healthz; the contract at /v1/openapi.json)\n", b.API)
	fmt.Fprintf(&w, "  console    %s/console   (sign in with the operator token)\n", b.API)
	fmt.Fprintf(&w, "  MCP        %s/mcp   (agents: Streamable HTTP; bearer token as for the API)\n", b.API)
	fmt.Fprintf(&w, "  sandbox    %s   (GET /_sandbox/effects, POST /_sandbox/faults)\n", b.Sandbox)
	for i, p := range b.Providers {
		label := "providers "
		if i > 0 {
			label = "          "
		}
		accounts := "any account"
		if p.Accounts != nil {
			accounts = "accounts " + strings.Join(p.Accounts, ", ")
			if len(p.Accounts) == 0 {
				accounts = "no accounts"
			}
		}
		at := ""
		if p.BaseURL != "" {
			at = " at " + p.BaseURL
		}
		fmt.Fprintf(&w, "  %s %-9s %s%s\n", label, p.Name, accounts, at)
	}
	fmt.Fprintf(&w, "  grant      dev-grant v1: any bot, provider sandbox, any account, action and target\n")
	var kept []string
	for _, p := range []string{b.DataDir, b.SandboxState} {
		if p != "" {
			kept = append(kept, p)
		}
	}
	if len(kept) > 0 {
		fmt.Fprintf(&w, "  data       %s (kept across restarts; make run-reset starts clean)\n", strings.Join(kept, " and "))
	}
	logs := "warnings and errors only (LOG_LEVEL=info shows every request)"
	if b.Level <= slog.LevelInfo {
		logs = "LOG_LEVEL=" + strings.ToLower(b.Level.String())
	}
	fmt.Fprintf(&w, "  logs       %s\n", logs)
	fmt.Fprintf(&w, "\nIn another terminal (every tool of the project reads these):\n")
	fmt.Fprintf(&w, "  export %s=%s\n", client.EnvAPIURL, b.API)
	fmt.Fprintf(&w, "  export %s=%s\n", client.EnvBotToken, b.BotToken)
	fmt.Fprintf(&w, "  export %s=%s\n", client.EnvOperatorToken, b.OperatorToken)
	fmt.Fprintf(&w, "  export OUTBOX_ORCHESTRATOR_TOKEN=%s\n", b.OrchestratorToken)
	fmt.Fprintf(&w, "  export OUTBOX_SANDBOX_API_URL=%s\n", b.Sandbox)
	if b.Table != "" {
		fmt.Fprintf(&w, "  export OUTBOX_TABLE=%s\n", b.Table)
	}
	if len(b.AWSExports) > 0 {
		fmt.Fprintf(&w, "  # the emulators, for outboxctl's table commands (token, setup, backup --direct):\n")
		for _, kv := range b.AWSExports {
			fmt.Fprintf(&w, "  export %s\n", kv)
		}
	}
	fmt.Fprintf(&w, "then try:\n")
	fmt.Fprintf(&w, "%s", tryCommands)
	fmt.Fprintf(&w, "\nCtrl-C stops everything this started.\n")
	return w.String()
}

// tryCommands are the README's quick-start commands, verbatim (the README
// test checks that they match).
const tryCommands = `  curl -sS -X POST "$OUTBOX_API_URL/v1/intents" \
    -H "Authorization: Bearer $OUTBOX_BOT_TOKEN" -H 'Idempotency-Key: hello-1' \
    -H 'Content-Type: application/json' \
    -d '{"kind":"reply","provider":"sandbox","account":"acct-1","action":"send_message","target":"chan-1","payload":{"text":"hello"},"grant":{"id":"dev-grant","version":1}}'
  curl -sS "$OUTBOX_SANDBOX_API_URL/_sandbox/effects"
  go run ./examples/bot
  go run ./cmd/outboxctl intents list
`

func keyOf(m map[string]core.Principal, kind string) string {
	for k, p := range m {
		if p.Kind == kind {
			return k
		}
	}
	return ""
}
