package telegram

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

const whyNeither = "the Bot API has neither an idempotency key nor a way to ask whether a message was sent: an ambiguous failure goes to a human"

// Registration is Telegram's entry in wire.Registered.
var Registration = plugin.Registration{
	Name: Name,
	Docs: "https://core.telegram.org/bots/api",
	Actions: []plugin.Action{
		{Name: "send_message", Why: whyNeither, Doc: "https://core.telegram.org/bots/api#sendmessage"},
		{Name: "sendMessage", Why: whyNeither, Doc: "https://core.telegram.org/bots/api#sendmessage"},
		{Name: ActionEditMessage, Declared: core.Capabilities{NaturallyIdempotent: true},
			Why: "editMessageText sets the text: repeating it changes nothing ('message is not modified' is a success)",
			Doc: "https://core.telegram.org/bots/api#editmessagetext"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		return c, plugin.DecodeJSON(Name, raw, c)
	},
	Webhook: func(cfg plugin.Config, _ plugin.WebhookEnv) plugin.Webhook {
		c, ok := cfg.(*settings)
		if !ok {
			return nil // Telegram's route exists only when Telegram is configured
		}
		return &Webhook{Accounts: c.Accts.Get}
	},
}

// settings is the "telegram" member of OUTBOX_PROVIDER_CONFIG:
// {"baseUrl": "https://api.telegram.org", "accounts": {"bot1": {"token": "env:TELEGRAM_BOT1_TOKEN", "webhookSecret": "…"}}}.
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
		return []plugin.Secret{{Field: ".token", Use: plugin.SendSecret, Value: &a.Token}, {Field: ".webhookSecret", Use: plugin.VerifySecret, Value: &a.WebhookSecret}}
	})
}

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	return New(client, Config{BaseURL: c.URL, Accounts: c.Accts.Values(), Timeout: c.Timeout()})
}
