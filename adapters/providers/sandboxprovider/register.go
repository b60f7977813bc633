package sandboxprovider

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

// Registration is the sandbox's entry in wire.Registered.
var Registration = plugin.Registration{
	Name:  Name,
	Docs:  "sandbox/README.md",
	Local: true,
	Actions: []plugin.Action{
		{Name: "send_message", PerAccount: true, Why: "the sandbox publishes each account's capabilities (GET /v1/accounts/{account}/capabilities)", Doc: "sandbox/README.md"},
		{Name: "create_booking", PerAccount: true, Why: "as send_message", Doc: "sandbox/README.md"},
		{Name: "charge", PerAccount: true, Why: "as send_message", Doc: "sandbox/README.md"},
		{Name: "update_message", PerAccount: true, Why: "set-to-value (naturally idempotent) whatever the account declares, besides its keys and lookup", Doc: "sandbox/README.md"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		return c, plugin.DecodeJSON(Name, raw, c)
	},
	// The sandbox's webhooks are Standard Webhooks signed with the secrets of
	// OUTBOX_WEBHOOK_SECRETS, so its route exists even when it is not
	// configured as a provider.
	Webhook: func(_ plugin.Config, env plugin.WebhookEnv) plugin.Webhook {
		return &Webhook{Name: Name, Verifier: env.Secrets}
	},
}

// settings is the "sandbox" member of OUTBOX_PROVIDER_CONFIG:
// {"baseUrl": "http://127.0.0.1:4100", "timeoutMs": 5000, "tokens": {"acct": "…"}}.
type settings struct {
	URL       string             `json:"baseUrl"`
	TimeoutMs int                `json:"timeoutMs"`
	Tokens    map[string]*string `json:"tokens"`
}

func (c *settings) Accounts() []string     { return nil }
func (c *settings) BaseURL() string        { return c.URL }
func (c *settings) Timeout() time.Duration { return plugin.Timeout(c.TimeoutMs) }

func (c *settings) Secrets() []plugin.Secret {
	var out []plugin.Secret
	for _, name := range plugin.SortedKeys(c.Tokens) {
		if c.Tokens[name] == nil {
			c.Tokens[name] = new(string)
		}
		out = append(out, plugin.Secret{Field: "sandbox.tokens." + name, Use: plugin.SendSecret, Value: c.Tokens[name]})
	}
	return out
}

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	if c.URL == "" {
		return nil, errors.New("sandbox.baseUrl is required")
	}
	var tokens map[string]string
	if c.Tokens != nil {
		tokens = map[string]string{}
		for k, v := range c.Tokens {
			if v != nil {
				tokens[k] = *v
			}
		}
	}
	return New(client, Config{BaseURL: c.URL, Timeout: c.Timeout(), Tokens: tokens}), nil
}
