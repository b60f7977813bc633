package slack

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

// declared is what every Slack action declares: the Web API has no
// idempotency key; a bot's message carries our intent id in its metadata and
// can be found in channel history.
var declared = core.Capabilities{Lookup: true}

const whyLookup = "no idempotency key in the Web API; our message carries the intent id in its metadata, found in conversations.history"

// Registration is Slack's entry in wire.Registered.
var Registration = plugin.Registration{
	Name: Name,
	Docs: "https://docs.slack.dev/reference/methods/chat.postMessage",
	Actions: []plugin.Action{
		{Name: "send_message", Declared: declared, Why: whyLookup, Doc: "https://docs.slack.dev/messaging/message-metadata"},
		{Name: "chat.postMessage", Declared: declared, Why: whyLookup, Doc: "https://docs.slack.dev/reference/methods/conversations.history"},
		{Name: ActionUpdateMessage, Declared: core.Capabilities{NaturallyIdempotent: true},
			Why: "chat.update sets the message's text: repeating it changes nothing; history lookup cannot see an edit (edit.go)",
			Doc: "https://docs.slack.dev/reference/methods/chat.update"},
		{Name: ActionAddReaction, Declared: core.Capabilities{NaturallyIdempotent: true},
			Why: "reactions.add: a repeat is already_reacted, a success (edit.go)",
			Doc: "https://docs.slack.dev/reference/methods/reactions.add"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		return c, plugin.DecodeJSON(Name, raw, c)
	},
	Webhook: func(cfg plugin.Config, env plugin.WebhookEnv) plugin.Webhook {
		c, ok := cfg.(*settings)
		if !ok {
			return nil // Slack's route exists only when Slack is configured
		}
		return &Webhook{Accounts: c.Accts.Get, Now: env.Now}
	},
}

// settings is the "slack" member of OUTBOX_PROVIDER_CONFIG:
// {"baseUrl": "https://slack.com/api", "lookbackSeconds": 86400, "maxHistoryPages": 10, "historyPageSize": 200,
// "accounts": {"T1": {"token": "env:SLACK_T1_TOKEN", "botId": "B1", "signingSecret": "env:SLACK_SIGNING_SECRET"}}}.
type settings struct {
	URL             string                   `json:"baseUrl"`
	TimeoutMs       int                      `json:"timeoutMs"`
	LookbackSeconds int                      `json:"lookbackSeconds"`
	MaxHistoryPages int                      `json:"maxHistoryPages"`
	HistoryPageSize int                      `json:"historyPageSize"`
	Accts           plugin.Accounts[Account] `json:"accounts"`
}

func (c *settings) Accounts() []string     { return c.Accts.Names() }
func (c *settings) BaseURL() string        { return c.URL }
func (c *settings) Timeout() time.Duration { return plugin.Timeout(c.TimeoutMs) }

func (c *settings) Secrets() []plugin.Secret {
	return plugin.AccountSecrets(Name+".accounts.", c.Accts, func(a *Account) []plugin.Secret {
		return []plugin.Secret{{Field: ".token", Use: plugin.SendSecret, Value: &a.Token}, {Field: ".signingSecret", Use: plugin.VerifySecret, Value: &a.SigningSecret}}
	})
}

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	return New(client, Config{
		BaseURL: c.URL, Accounts: c.Accts.Values(),
		Timeout:         c.Timeout(),
		Lookback:        time.Duration(c.LookbackSeconds) * time.Second,
		MaxHistoryPages: c.MaxHistoryPages,
		HistoryPageSize: c.HistoryPageSize,
	})
}
