package httpsigned

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

// Registration is the signed HTTP receiver's entry in wire.Registered.
var Registration = plugin.Registration{
	Name: Name,
	Docs: "https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md",
	Actions: []plugin.Action{
		{Name: "*", PerAccount: true,
			Why: "a generic receiver promises what its operator configures (honoursKeys + keyRetentionSeconds, lookupUrl); nothing is assumed",
			Doc: "https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		return c, plugin.DecodeJSON(Name, raw, c)
	},
}

// settings is the "http" member of OUTBOX_PROVIDER_CONFIG:
// {"timeoutMs": 10000, "actions": ["order.created"],
// "accounts": {"acct": {"url": "https://…", "secret": "whsec_…", "honoursKeys": true,
// "keyRetentionSeconds": 86400, "lookupUrl": "https://…", "conflictMeans": "duplicate",
// "unavailableIsSafe": false}}}.
type settings struct {
	TimeoutMs int                      `json:"timeoutMs"`
	Actions   []string                 `json:"actions"`
	Accts     plugin.Accounts[Account] `json:"accounts"`
}

func (c *settings) Accounts() []string     { return c.Accts.Names() }
func (c *settings) BaseURL() string        { return "" }
func (c *settings) Timeout() time.Duration { return plugin.Timeout(c.TimeoutMs) }

// whsec is a withheld signing secret's stand-in (valid "whsec_" + base64).
func whsec(b []byte) string { return "whsec_" + base64.StdEncoding.EncodeToString(b) }

func (c *settings) Secrets() []plugin.Secret {
	return plugin.AccountSecrets(Name+".accounts.", c.Accts, func(a *Account) []plugin.Secret {
		return []plugin.Secret{
			{Field: ".secret", Use: plugin.SendSecret, Value: &a.Secret, Placeholder: whsec},
			{Field: ".previousSecret", Use: plugin.SendSecret, Value: &a.PreviousSecret, Placeholder: whsec},
			{Field: ".token", Use: plugin.SendSecret, Value: &a.Token},
		}
	})
}

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	return New(client, Config{Accounts: c.Accts.Values(), Actions: c.Actions, Timeout: c.Timeout()})
}
