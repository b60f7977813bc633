package whatsapp

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

// Registration is WhatsApp's entry in wire.Registered.
var Registration = plugin.Registration{
	Name: Name,
	Docs: "https://developers.facebook.com/docs/whatsapp/cloud-api",
	Actions: []plugin.Action{
		{Name: ActionSend,
			Why: "the Cloud API has no idempotency key and no GET for a sent message: an ambiguous failure goes to needs-human at once; " +
				"biz_opaque_callback_data carries the intent id, so a signed sent/delivered/read status webhook settles it",
			Doc: "https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		return c, plugin.DecodeJSON(Name, raw, c)
	},
	Webhook: func(cfg plugin.Config, _ plugin.WebhookEnv) plugin.Webhook {
		c, ok := cfg.(*settings)
		if !ok {
			return nil // the route exists only when WhatsApp is configured
		}
		return &Webhook{Accounts: c.Accts.Get}
	},
}

// settings is the "whatsapp" member of OUTBOX_PROVIDER_CONFIG:
// {"baseUrl": "https://graph.facebook.com", "apiVersion": "v21.0", "timeoutMs": 10000,
// "accounts": {"support": {"phoneNumberId": "106540352242922", "accessToken": "env:WHATSAPP_TOKEN",
// "appSecret": "env:WHATSAPP_APP_SECRET", "verifyToken": "env:WHATSAPP_VERIFY_TOKEN"}}}.
type settings struct {
	URL        string                   `json:"baseUrl"`
	APIVersion string                   `json:"apiVersion"`
	TimeoutMs  int                      `json:"timeoutMs"`
	Accts      plugin.Accounts[Account] `json:"accounts"`
}

func (c *settings) Accounts() []string     { return c.Accts.Names() }
func (c *settings) BaseURL() string        { return c.URL }
func (c *settings) Timeout() time.Duration { return plugin.Timeout(c.TimeoutMs) }

func (c *settings) Secrets() []plugin.Secret {
	return plugin.AccountSecrets(Name+".accounts.", c.Accts, func(a *Account) []plugin.Secret {
		return []plugin.Secret{
			{Field: ".accessToken", Use: plugin.SendSecret, Value: &a.AccessToken},
			{Field: ".appSecret", Use: plugin.VerifySecret, Value: &a.AppSecret},
			{Field: ".verifyToken", Use: plugin.VerifySecret, Value: &a.VerifyToken},
		}
	})
}

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	return New(client, Config{BaseURL: c.URL, APIVersion: c.APIVersion, Accounts: c.Accts.Values(), Timeout: c.Timeout()})
}
