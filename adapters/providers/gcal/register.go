package gcal

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

// Registration is Google Calendar's entry in wire.Registered.
var Registration = plugin.Registration{
	Name: Name,
	Docs: "https://developers.google.com/workspace/calendar/api/v3/reference/events",
	Actions: []plugin.Action{
		{Name: "create_event", Declared: core.Capabilities{Lookup: true},
			Why: "the client chooses the event id (base32hex of the intent id); a repeat is 409, which Google does not guarantee, " +
				"so events.get by that id is the authoritative lookup",
			Doc: "https://developers.google.com/workspace/calendar/api/v3/reference/events#id"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		return c, plugin.DecodeJSON(Name, raw, c)
	},
}

// settings is the "gcal" member of OUTBOX_PROVIDER_CONFIG:
// {"baseUrl": "https://www.googleapis.com", "timeoutMs": 10000,
// "accounts": {"bookings": {"serviceAccount": "env:GCAL_SERVICE_ACCOUNT_JSON", "subject": "desk@example.com"}}}.
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
		return []plugin.Secret{{Field: ".serviceAccount", Use: plugin.SendSecret, Value: &a.ServiceAccount, Placeholder: placeholderKey}}
	})
}

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	return New(client, Config{BaseURL: c.URL, Accounts: c.Accts.Values(), Timeout: c.Timeout()})
}

// placeholderKey stands in for a withheld key file (a function that does
// not send): shaped like one so the adapter builds, holding no key.
func placeholderKey(random []byte) string {
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "client_email": "withheld@outbox.invalid",
		"private_key": "withheld-" + hex.EncodeToString(random), "token_uri": "https://oauth2.googleapis.com/token",
	})
	return string(b)
}
