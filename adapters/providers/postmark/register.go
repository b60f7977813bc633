package postmark

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

// Registration is Postmark's entry in wire.Registered.
var Registration = plugin.Registration{
	Name: Name,
	Docs: "https://postmarkapp.com/developer",
	Actions: []plugin.Action{
		{Name: ActionEmail, Declared: core.Capabilities{Lookup: true},
			Why: "no idempotency key, but the outbound message search filters by the Metadata the client set (metadata_<key>=<value>): " +
				"the intent id in Metadata makes it an authoritative lookup (absent counts only after the settle window)",
			Doc: "https://postmarkapp.com/developer/api/messages-api#outbound-message-search"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		return c, plugin.DecodeJSON(Name, raw, c)
	},
	Webhook: func(cfg plugin.Config, _ plugin.WebhookEnv) plugin.Webhook {
		c, ok := cfg.(*settings)
		if !ok {
			return nil // the route exists only when Postmark is configured
		}
		return &Webhook{Accounts: c.Accts.Get}
	},
}

// settings is the "postmark" member of OUTBOX_PROVIDER_CONFIG:
// {"baseUrl": "https://api.postmarkapp.com", "timeoutMs": 10000,
// "accounts": {"mail": {"serverToken": "env:POSTMARK_SERVER_TOKEN", "from": "orders@example.com",
// "messageStream": "outbound", "webhookUser": "postmark", "webhookPassword": "env:POSTMARK_WEBHOOK_PASSWORD"}}}.
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
		return []plugin.Secret{
			{Field: ".serverToken", Use: plugin.SendSecret, Value: &a.ServerToken},
			{Field: ".webhookPassword", Use: plugin.VerifySecret, Value: &a.WebhookPassword},
		}
	})
}

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	return New(client, Config{BaseURL: c.URL, Accounts: c.Accts.Values(), Timeout: c.Timeout()})
}
