package discord

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

// Registration is Discord's entry in wire.Registered.
var Registration = plugin.Registration{
	Name: Name,
	Docs: "https://discord.com/developers/docs/resources/message#create-message",
	Actions: []plugin.Action{
		{Name: "send_message", Declared: core.Capabilities{IdempotencyKeys: true, KeyRetention: NonceWindow},
			Why: "nonce + enforce_nonce: Discord returns the existing message for a repeated nonce \"in the past few minutes\"; " +
				"declared five minutes at most, no lookup: past the window a human decides",
			Doc: "https://discord.com/developers/docs/resources/message#create-message-jsonform-params"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		return c, plugin.DecodeJSON(Name, raw, c)
	},
}

// settings is the "discord" member of OUTBOX_PROVIDER_CONFIG:
// {"baseUrl": "https://discord.com/api/v10", "timeoutMs": 10000, "nonceWindowSeconds": 300,
// "accounts": {"support-bot": {"token": "env:DISCORD_BOT_TOKEN"}}}.
type settings struct {
	URL                string                   `json:"baseUrl"`
	TimeoutMs          int                      `json:"timeoutMs"`
	NonceWindowSeconds int                      `json:"nonceWindowSeconds"`
	Accts              plugin.Accounts[Account] `json:"accounts"`
}

func (c *settings) Accounts() []string     { return c.Accts.Names() }
func (c *settings) BaseURL() string        { return c.URL }
func (c *settings) Timeout() time.Duration { return plugin.Timeout(c.TimeoutMs) }

func (c *settings) Secrets() []plugin.Secret {
	return plugin.AccountSecrets(Name+".accounts.", c.Accts, func(a *Account) []plugin.Secret {
		return []plugin.Secret{{Field: ".token", Use: plugin.SendSecret, Value: &a.Token}}
	})
}

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	return New(client, Config{BaseURL: c.URL, Accounts: c.Accts.Values(), Timeout: c.Timeout(),
		Window: time.Duration(c.NonceWindowSeconds) * time.Second})
}
