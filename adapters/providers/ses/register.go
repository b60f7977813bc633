package ses

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

// Registration is SES's entry in wire.Registered.
var Registration = plugin.Registration{
	Name: Name,
	Docs: "https://docs.aws.amazon.com/ses/latest/APIReference-V2/Welcome.html",
	Actions: []plugin.Action{
		{Name: ActionEmail,
			Why: "SES v2 SendEmail has no idempotency key and no lookup by an id the client chooses: an ambiguous failure goes to needs-human at once " +
				"(the SDK's own retries are off); the EmailTags carry the intent id, so a Send/Delivery event published through the configuration set settles it",
			Doc: "https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html"},
	},
	Decode: func(raw json.RawMessage) (plugin.Config, error) {
		c := &settings{}
		return c, plugin.DecodeJSON(Name, raw, c)
	},
	Webhook: func(cfg plugin.Config, _ plugin.WebhookEnv) plugin.Webhook {
		c, ok := cfg.(*settings)
		if !ok {
			return nil
		}
		return &Webhook{Accounts: c.Accts.Get}
	},
}

// settings is the "ses" member of OUTBOX_PROVIDER_CONFIG:
// {"region": "eu-west-1", "profile": "", "timeoutMs": 10000,
// "accounts": {"mail": {"from": "orders@example.com", "identity": "example.com", "configurationSet": "outbox-events"}}}.
// Credentials come from the SDK's default chain; the endpoint from
// AWS_ENDPOINT_URL_SESV2 / AWS_ENDPOINT_URL (no baseUrl).
type settings struct {
	Region    string                   `json:"region"`
	Profile   string                   `json:"profile"`
	TimeoutMs int                      `json:"timeoutMs"`
	Accts     plugin.Accounts[Account] `json:"accounts"`
}

func (c *settings) Accounts() []string { return c.Accts.Names() }

// BaseURL is the endpoint the SDK resolves from the environment, if set.
func (c *settings) BaseURL() string {
	if u := os.Getenv("AWS_ENDPOINT_URL_SESV2"); u != "" {
		return u
	}
	return os.Getenv("AWS_ENDPOINT_URL")
}

func (c *settings) Timeout() time.Duration { return plugin.Timeout(c.TimeoutMs) }

// Secrets: none (the SDK's credential chain).
func (c *settings) Secrets() []plugin.Secret { return nil }

func (c *settings) Build(client *http.Client) (core.Provider, error) {
	return New(client, Config{Region: c.Region, Profile: c.Profile, Accounts: c.Accts.Values(), Timeout: c.Timeout()})
}

var _ plugin.AWSResources = (*settings)(nil)

// EventTypes are the SES events the stack's event destination publishes.
var EventTypes = []string{"SEND", "DELIVERY", "BOUNCE", "COMPLAINT", "REJECT"}

// AWSGrants: ses:SendEmail on each account's identity (and configuration
// set, which SendEmail also authorizes against), for the sending functions
// only (https://docs.aws.amazon.com/ses/latest/dg/control-user-access.html).
func (c *settings) AWSGrants() []plugin.AWSGrant {
	var res []plugin.ARN
	seen := map[string]bool{}
	for _, name := range c.Accts.Names() {
		a, _ := c.Accts.Get(name)
		for _, r := range []string{"identity/" + IdentityOf(a), "configuration-set/" + a.ConfigurationSet} {
			if strings.HasSuffix(r, "/") || seen[r] {
				continue
			}
			seen[r] = true
			res = append(res, plugin.ARN{Service: "ses", Region: c.Region, Resource: r})
		}
	}
	if len(res) == 0 {
		return nil
	}
	return []plugin.AWSGrant{{Use: plugin.SendSecret, Actions: []string{"ses:SendEmail"}, Resources: res}}
}

// AWSEventTopics: one topic per configuration set named.
func (c *settings) AWSEventTopics() []plugin.AWSEventTopic {
	var out []plugin.AWSEventTopic
	seen := map[string]bool{}
	for _, name := range c.Accts.Names() {
		a, _ := c.Accts.Get(name)
		if cs := a.ConfigurationSet; cs != "" && !seen[cs] {
			seen[cs] = true
			out = append(out, plugin.AWSEventTopic{ID: "ses-" + cs, SESConfigurationSet: cs, EventTypes: EventTypes})
		}
	}
	return out
}
