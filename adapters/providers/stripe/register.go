package stripe

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

// Registration is Stripe's entry in wire.Registered.
var Registration = plugin.Registration{
	Name: Name,
	Docs: "https://docs.stripe.com/api",
	Actions: []plugin.Action{
		{Name: "refund", Declared: core.Capabilities{IdempotencyKeys: true, KeyRetention: KeyRetention},
			Why: "Idempotency-Key on every attempt; Stripe replays the saved answer (a 500 too) and may prune keys once 24 h old; " +
				"no lookup: metadata search lags up to an hour, so it is not authoritative; the refund webhook settles an uncertain intent",
			Doc: "https://docs.stripe.com/idempotency"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		return c, plugin.DecodeJSON(Name, raw, c)
	},
	Webhook: func(cfg plugin.Config, env plugin.WebhookEnv) plugin.Webhook {
		c, ok := cfg.(*settings)
		if !ok {
			return nil // the route exists only when Stripe is configured
		}
		return &Webhook{Accounts: c.Accts.Get, Now: env.Now}
	},
}

// settings is the "stripe" member of OUTBOX_PROVIDER_CONFIG:
// {"baseUrl": "https://api.stripe.com", "timeoutMs": 10000,
// "accounts": {"shop": {"secretKey": "env:STRIPE_SECRET_KEY", "webhookSecret": "env:STRIPE_WEBHOOK_SECRET"}}}.
type settings struct {
	URL       string                   `json:"baseUrl"`
	TimeoutMs int                      `json:"timeoutMs"`
	Accts     plugin.Accounts[Account] `json:"accounts"`
}

func (c *settings) Accounts() []string     { return c.Accts.Names() }
func (c *settings) BaseURL() string        { return c.URL }
func (c *settings) Timeout() time.Duration { return plugin.Timeout(c.TimeoutMs) }

func (c *settings) Secrets() []plugin.Secret {
	return plugin.AccountSecrets(Name+".accounts.", c.Accts, func(a *Account) []plugin.Secret {
		return []plugin.Secret{{Field: ".secretKey", Use: plugin.SendSecret, Value: &a.SecretKey}, {Field: ".webhookSecret", Use: plugin.VerifySecret, Value: &a.WebhookSecret}}
	})
}

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	return New(client, Config{BaseURL: c.URL, Accounts: c.Accts.Values(), Timeout: c.Timeout()})
}
