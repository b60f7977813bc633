package twilio

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

const whyNeither = "Twilio has no idempotency key and no lookup by an id the client chooses (lists filter by number and day), " +
	"and a create retried after a 500 or a lost answer can send or ring twice: an ambiguous failure goes to needs-human at once; " +
	"the StatusCallback names the intent, so a signed sent/delivered (SMS) or in-progress/completed (call) callback settles it"

// Registration is Twilio's entry in wire.Registered.
var Registration = plugin.Registration{
	Name: Name,
	Docs: "https://www.twilio.com/docs/usage/api",
	Actions: []plugin.Action{
		{Name: ActionSMS, Why: whyNeither, Doc: "https://www.twilio.com/docs/messaging/api/message-resource#create-a-message-resource"},
		{Name: ActionCall, Why: whyNeither, Doc: "https://www.twilio.com/docs/voice/api/call-resource#create-a-call-resource"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		if err := plugin.DecodeJSON(Name, raw, c); err != nil {
			return nil, err
		}
		return c, checkCallbackBase(c.CallbackBase)
	},
	Webhook: func(cfg plugin.Config, _ plugin.WebhookEnv) plugin.Webhook {
		c, ok := cfg.(*settings)
		if !ok {
			return nil // the route exists only when Twilio is configured
		}
		return &Webhook{Accounts: c.Accts.Get, PublicBaseURL: c.CallbackBase}
	},
}

// settings is the "twilio" member of OUTBOX_PROVIDER_CONFIG:
// {"baseUrl": "https://api.twilio.com", "timeoutMs": 10000,
// "statusCallbackBaseUrl": "https://outbox.example.com",
// "accounts": {"alerts": {"accountSid": "AC…", "authToken": "env:TWILIO_AUTH_TOKEN",
// "from": "+15005550006", "messagingServiceSid": "MG…", "apiKeySid": "SK…", "apiKeySecret": "env:…"}}}.
// statusCallbackBaseUrl is the outbox's public API URL as Twilio calls it
// (under make run, the API URL it prints).
type settings struct {
	URL          string                   `json:"baseUrl"`
	TimeoutMs    int                      `json:"timeoutMs"`
	CallbackBase string                   `json:"statusCallbackBaseUrl"`
	Accts        plugin.Accounts[Account] `json:"accounts"`
}

func (c *settings) Accounts() []string     { return c.Accts.Names() }
func (c *settings) BaseURL() string        { return c.URL }
func (c *settings) Timeout() time.Duration { return plugin.Timeout(c.TimeoutMs) }

func (c *settings) Secrets() []plugin.Secret {
	return plugin.AccountSecrets(Name+".accounts.", c.Accts, func(a *Account) []plugin.Secret {
		return []plugin.Secret{
			// The auth token authenticates requests and verifies callbacks.
			{Field: ".authToken", Use: plugin.SendSecret, AlsoUse: plugin.VerifySecret, Value: &a.AuthToken},
			{Field: ".apiKeySecret", Use: plugin.SendSecret, Value: &a.APIKeySecret},
		}
	})
}

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	return New(client, Config{BaseURL: c.URL, StatusCallbackBaseURL: c.CallbackBase, Accounts: c.Accts.Values(), Timeout: c.Timeout()})
}
