package wire

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/admin"
	"github.com/botharness/outbox/adapters/handlers/webhook"
	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/adapters/webhooksig"
	corewebhook "github.com/botharness/outbox/core/webhook"
)

// EnvWebhookSecrets holds the providers' webhook signing secrets locally, as
// JSON: {"sandbox/acct-1": "whsec_...", "sandbox/acct-2": ["whsec_new", "whsec_old"],
// "sandbox/*": "whsec_..."}. In AWS the same document would live in Secrets
// Manager (the names arrive in OUTBOX_PROVIDER_SECRETS) behind
// webhooksig.SecretSource; that implementation is not written yet, so a
// deployed webhook function without OUTBOX_WEBHOOK_SECRETS refuses every
// event with 401 (fails closed).
const EnvWebhookSecrets = "OUTBOX_WEBHOOK_SECRETS"

// EnvProviderSecrets names Secrets Manager secrets (comma separated) holding
// webhook secrets in the same format; the CDK stack sets it and grants read.
const EnvProviderSecrets = "OUTBOX_PROVIDER_SECRETS"

// UnresolvedRoute lists unresolved webhook events for operators.
const UnresolvedRoute = "GET /v1/admin/webhooks/unresolved"

// wireWebhooks installs the provider webhook handler (issue 5).
func wireWebhooks(a *App) error {
	secrets, err := webhooksig.ParseSecrets(a.Config.WebhookSecrets)
	if err != nil {
		return fmt.Errorf("%s: %w", EnvWebhookSecrets, err)
	}
	if names := a.Config.ProviderSecrets; names != "" && a.Clients.Secrets != nil {
		// In AWS the secrets live in Secrets Manager, each a document in the
		// OUTBOX_WEBHOOK_SECRETS format; read once per cold start (a rotation
		// lists old and new secret until every function has restarted).
		for _, name := range strings.Split(names, ",") {
			out, err := a.Clients.Secrets.GetSecretValue(context.Background(), &secretsmanager.GetSecretValueInput{SecretId: aws.String(strings.TrimSpace(name))})
			if err != nil {
				return fmt.Errorf("read webhook secrets %s: %w", name, err)
			}
			more, err := webhooksig.ParseSecrets(aws.ToString(out.SecretString))
			if err != nil {
				return fmt.Errorf("webhook secrets %s: %w", name, err)
			}
			for k, v := range more {
				secrets[k] = append(secrets[k], v...)
			}
		}
	}
	store := dynamo.NewWebhooks(a.Clients.DynamoDB, a.Config.Table)
	store.Retention = a.Config.IntentRetention
	store.Shards = a.Config.Sharding
	wh := &corewebhook.Webhooks{
		Store:   store,
		Intents: a.Store,
		Inbox:   &webhook.SQSInbox{Client: a.Clients.SQS, URL: a.Config.InboxQueueURL},
		Clock:   a.Config.Clock,
		Metrics: a.Metrics,
		Log:     a.Log,
		Tracer:  a.Tracer,
	}
	env := plugin.WebhookEnv{Now: a.Config.Clock.Now, Secrets: &webhooksig.Verifier{Secrets: secrets, Now: a.Config.Clock.Now}}
	h := &webhook.Handler{Webhooks: wh, Providers: map[string]webhook.Provider{}, Log: a.Log}
	// Each registration builds its dialect from its configuration (with the
	// secrets resolved for this function's uses); a provider's route exists
	// only when its registration returns one.
	for _, r := range Registered {
		if r.Webhook == nil {
			continue
		}
		var cfg plugin.Config
		if a.settings != nil {
			cfg, _ = a.settings.Config(r.Name)
		}
		if d := r.Webhook(cfg, env); d != nil {
			h.Providers[r.Name] = d
		}
	}
	a.Webhook = h.Handle
	a.WebhookSNS = h.HandleSNS
	for k, f := range (&admin.Unresolved{Store: store, Log: a.Log}).Routes() {
		a.AdminExtra[k] = f
	}
	return nil
}
