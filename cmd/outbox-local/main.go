// Command outbox-local runs the whole outbox on this machine against the
// emulators: the HTTP API (real handlers behind a local API Gateway), the
// stream-triggered dispatcher, the SQS retrier, the sweeper's schedule and,
// unless OUTBOX_SANDBOX_URL points elsewhere, the sandbox provider.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/wire"
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

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "outbox-local:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := wire.Logger()
	httpAddr := env("OUTBOX_HTTP_ADDR", "127.0.0.1:4000")
	sandboxURL := os.Getenv("OUTBOX_SANDBOX_URL")
	if sandboxURL == "" {
		addr := env("OUTBOX_SANDBOX_ADDR", "127.0.0.1:4100")
		ln, err := sandbox.Listen(addr)
		if err != nil {
			return fmt.Errorf("sandbox provider: %w", err)
		}
		sb := sandbox.New(time.Now, sandbox.WithLogger(log))
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
	providerCfg := env("OUTBOX_PROVIDER_CONFIG", fmt.Sprintf(`{"sandbox":{"baseUrl":%q,"timeoutMs":3000}}`, sandboxURL))
	// The same configuration variables as the functions (OUTBOX_LEASE,
	// OUTBOX_SWEEP_GRACE, OUTBOX_REQUEST_CACHE_TTL, with the same defaults),
	// plus the sweeper's schedule, which in AWS is the stack's rule.
	cfg, err := wire.FromEnv()
	if err != nil {
		return err
	}
	table := env("OUTBOX_TABLE", "outbox")
	st, err := system.Start(ctx, clients, system.Options{
		Table: table, QueuePrefix: env("OUTBOX_QUEUE_PREFIX", table), ProviderConfig: providerCfg,
		Lease: cfg.Lease, SweepGrace: cfg.SweepGrace, RequestCacheTTL: cfg.RequestCacheTTL,
		SweepInterval: wire.DurationEnv("OUTBOX_SWEEP_INTERVAL", 15*time.Second), Tokens: tokens, Log: log,
		// A permissive dev grant so the printed curl works; real grants are
		// managed through PUT /v1/admin/grants/{grantId}.
		Grants: []core.Grant{{ID: "dev-grant", Version: 1, Bot: "*", Provider: "sandbox", Account: "*",
			Actions: []string{"*"}, Targets: []string{"*"}}},
		// Operator events as signed POSTs, when a subscriber URL is given.
		OperatorWebhookURL:    os.Getenv("OUTBOX_OPERATOR_WEBHOOK_URL"),
		OperatorWebhookSecret: os.Getenv("OUTBOX_OPERATOR_WEBHOOK_SECRET"),
		ConsoleURL:            env("OUTBOX_CONSOLE_URL", "http://"+httpAddr+"/console"),
		// Retention (issue 27): OUTBOX_INTENT_RETENTION / OUTBOX_TOMBSTONE_RETENTION;
		// DynamoDB Local does not delete expired items, so the TTL reaper does.
		IntentRetention: cfg.IntentRetention, TombstoneRetention: cfg.TombstoneRetention,
		TTLReaperInterval: wire.DurationEnv("OUTBOX_TTL_REAPER_INTERVAL", 15*time.Second), PruneBatchingWindow: 5 * time.Second,
		APIURL: "http://" + httpAddr,
	})
	if err != nil {
		return err
	}
	defer st.Stop()
	fmt.Printf(`
outbox is running
  HTTP API        http://%[1]s      (GET /healthz)
  console         http://%[1]s/console   (sign in with the operator token)
  MCP (agents)    http://%[1]s/mcp   (Streamable HTTP; bearer token as for the API)
  sandbox         %[2]s   (GET /_sandbox/effects, POST /_sandbox/faults)
  bot token           %[3]s
  operator token      %[4]s
  orchestrator token  %[5]s

try:
  curl -sS -X POST http://%[1]s/v1/intents \
    -H 'Authorization: Bearer %[3]s' -H 'Idempotency-Key: hello-1' -H 'Content-Type: application/json' \
    -d '{"kind":"reply","provider":"sandbox","account":"acct-1","action":"send_message","target":"chan-1","payload":{"text":"hello"},"grant":{"id":"dev-grant","version":1}}'
  curl -sS %[2]s/_sandbox/effects

Ctrl-C stops everything this started.
`, httpAddr, sandboxURL, keyOf(tokens, core.PrincipalBot), keyOf(tokens, core.PrincipalOperator), keyOf(tokens, core.PrincipalOrchestrator))
	err = st.Gateway.ListenAndServe(ctx, httpAddr)
	if errors.Is(err, http.ErrServerClosed) || ctx.Err() != nil {
		return nil
	}
	return err
}

func keyOf(m map[string]core.Principal, kind string) string {
	for k, p := range m {
		if p.Kind == kind {
			return k
		}
	}
	return ""
}
