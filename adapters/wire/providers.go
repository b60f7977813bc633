package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/botharness/outbox/adapters/providers/discord"
	"github.com/botharness/outbox/adapters/providers/gcal"
	"github.com/botharness/outbox/adapters/providers/httpsigned"
	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/adapters/providers/postmark"
	"github.com/botharness/outbox/adapters/providers/sandboxprovider"
	"github.com/botharness/outbox/adapters/providers/ses"
	"github.com/botharness/outbox/adapters/providers/slack"
	"github.com/botharness/outbox/adapters/providers/stripe"
	"github.com/botharness/outbox/adapters/providers/telegram"
	"github.com/botharness/outbox/adapters/providers/twilio"
	"github.com/botharness/outbox/adapters/providers/whatsapp"
	"github.com/botharness/outbox/core"
)

// Registered is the one list of providers: each entry is the Registration
// value its package exports (adapters/providers/plugin). The configuration
// parser, the start-up banner, the secret fields (and so the CDK stack's
// grants), the webhook function and the contract suite read this list;
// nothing else names a provider. Adding a provider is a package, one line
// here, its fake and its README blocks (adapters/providers/README.md,
// "Adding a provider").
var Registered = []plugin.Registration{
	sandboxprovider.Registration,
	httpsigned.Registration,
	slack.Registration,
	telegram.Registration,
	stripe.Registration,
	gcal.Registration,
	discord.Registration,
	twilio.Registration,
	postmark.Registration,
	whatsapp.Registration,
	ses.Registration,
}

// Registration returns the registered provider called name.
func Registration(name string) (plugin.Registration, bool) {
	for _, r := range Registered {
		if r.Name == name {
			return r, true
		}
	}
	return plugin.Registration{}, false
}

// ProviderSettings is the OUTBOX_PROVIDER_CONFIG document: one member per
// configured provider, named by its registration and decoded by it (each
// package documents its member on its settings type), plus "pacing":
//
//	{"sandbox": {"baseUrl": "http://127.0.0.1:4100", "timeoutMs": 5000, "tokens": {"acct": "…"}},
//	 "http": {"timeoutMs": 10000, "actions": ["order.created"],
//	          "accounts": {"acct": {"url": "https://…", "secret": "whsec_…", "honoursKeys": true,
//	                                "keyRetentionSeconds": 86400, "lookupUrl": "https://…",
//	                                "conflictMeans": "duplicate", "unavailableIsSafe": false}}},
//	 "slack": {"baseUrl": "https://slack.com/api", "lookbackSeconds": 86400, "maxHistoryPages": 10, "historyPageSize": 200,
//	           "accounts": {"T1": {"token": "env:SLACK_T1_TOKEN", "botId": "B1", "signingSecret": "env:SLACK_SIGNING_SECRET"}}},
//	 "telegram": {"baseUrl": "https://api.telegram.org",
//	              "accounts": {"bot1": {"token": "env:TELEGRAM_BOT1_TOKEN", "webhookSecret": "…"}}}}
//
// A member that is absent or null is not configured; a member no
// registration names is ignored, as it always was.
//
// "pacing" declares paces per account and configures the circuit breaker
// (see PacingSettings in pacing.go).
//
// Every secret (tokens, signing secrets) may be given literally, as
// "env:NAME" (read from the environment variable NAME; make run and the
// tests), or as "secretsmanager:NAME" / "secretsmanager:NAME#key" (read from
// Secrets Manager at cold start; NAME may be a secret ARN; with #key the
// secret is a JSON object and the value is its member key). The CDK stack
// accepts only secretsmanager references, so the template and the functions'
// environments hold secret names, never values (see secrets.go). Secrets
// never appear in errors or logs.
type ProviderSettings struct {
	// Configured holds the providers the document configures, in
	// Registered's order.
	Configured []ConfiguredProvider
	// Pacing is read by the gate (pacing.go), not by a provider.
	Pacing *PacingSettings `json:"pacing"`
}

// ConfiguredProvider is one provider's decoded member.
type ConfiguredProvider struct {
	plugin.Registration
	Config plugin.Config
}

// Config returns the decoded member of the provider called name.
func (ps *ProviderSettings) Config(name string) (plugin.Config, bool) {
	for _, c := range ps.Configured {
		if c.Name == name {
			return c.Config, true
		}
	}
	return nil, false
}

// ParseProviderSettings reads the OUTBOX_PROVIDER_CONFIG document once, for
// every part of the app that uses it (providers, secrets, pacing, the
// start-up banner, the CDK stack), and validates its pacing. An empty
// document is empty settings.
func ParseProviderSettings(settings string) (*ProviderSettings, error) {
	ps := &ProviderSettings{}
	if strings.TrimSpace(settings) != "" {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(settings), &doc); err != nil {
			// json errors name fields and types, never values.
			return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
		}
		if raw, ok := doc["pacing"]; ok {
			if err := json.Unmarshal(raw, &ps.Pacing); err != nil {
				return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: pacing: %w", err)
			}
		}
		for _, r := range Registered {
			raw, ok := doc[r.Name]
			if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
				continue
			}
			c, err := r.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
			}
			ps.Configured = append(ps.Configured, ConfiguredProvider{Registration: r, Config: c})
		}
	}
	if ps.Pacing == nil {
		ps.Pacing = &PacingSettings{}
	}
	if err := ps.Pacing.validate(); err != nil {
		return nil, err
	}
	return ps, nil
}

// Providers builds the provider adapters named in the settings, resolving
// literal and "env:" secrets (a "secretsmanager:" reference is an error: use
// ProvidersWith and a SecretResolver with a Secrets Manager reader).
func Providers(settings string, client *http.Client) (core.ProviderMap, error) {
	return ProvidersWith(context.Background(), settings, client, &SecretResolver{})
}

// ProvidersWith builds the provider adapters, resolving every configured
// secret through res (see SecretResolver: a use the function does not hold
// is withheld, and then its providers cannot send).
func ProvidersWith(ctx context.Context, settings string, client *http.Client, res *SecretResolver) (core.ProviderMap, error) {
	ps, err := ParseProviderSettings(settings)
	if err != nil {
		return nil, err
	}
	return providersFrom(ctx, ps, client, res)
}

// providersFrom builds the provider adapters of parsed settings, resolving
// their secrets in place.
func providersFrom(ctx context.Context, ps *ProviderSettings, client *http.Client, res *SecretResolver) (core.ProviderMap, error) {
	m := core.ProviderMap{}
	for _, sec := range ps.secrets() {
		r, err := res.resolve(ctx, sec)
		if err != nil {
			return nil, err
		}
		*sec.Value = r
	}
	for _, c := range ps.Configured {
		p, err := c.Config.Build(client)
		if err != nil {
			return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
		}
		m[c.Name] = p
	}
	if !res.holds(SecretForSending) {
		for name, p := range m {
			m[name] = withheld{p}
		}
	}
	return m, nil
}

// WithSandbox returns the provider configuration with the sandbox (the
// registration marked Local) added at baseURL unless the configuration names
// it itself (`"sandbox": null` turns it off). `make run` uses it so that
// OUTBOX_PROVIDER_CONFIG adds real providers beside the sandbox instead of
// silently replacing it.
func WithSandbox(settings, baseURL string, timeoutMs int) (string, error) {
	doc := map[string]json.RawMessage{}
	if strings.TrimSpace(settings) != "" {
		if err := json.Unmarshal([]byte(settings), &doc); err != nil {
			return "", fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
		}
	}
	local := localProvider()
	if _, ok := doc[local]; !ok {
		sb, _ := json.Marshal(map[string]any{"baseUrl": baseURL, "timeoutMs": timeoutMs})
		doc[local] = sb
	}
	out, err := json.Marshal(doc)
	return string(out), err
}

// localProvider names the registration marked Local (the sandbox make run starts).
func localProvider() string {
	for _, r := range Registered {
		if r.Local {
			return r.Name
		}
	}
	return ""
}

// ProviderSummary names a configured provider and its accounts, for the
// start-up banner (never a secret).
type ProviderSummary struct {
	Name     string
	Accounts []string // nil: any account (the sandbox)
	BaseURL  string
}

// DescribeProviders lists the providers the settings configure, sorted by name.
func DescribeProviders(settings string) ([]ProviderSummary, error) {
	ps, err := ParseProviderSettings(settings)
	if err != nil {
		return nil, err
	}
	var out []ProviderSummary
	for _, c := range ps.Configured {
		out = append(out, ProviderSummary{Name: c.Name, Accounts: c.Config.Accounts(), BaseURL: c.Config.BaseURL()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// AWSResources lists what the configured providers that are AWS services
// need from the stack (plugin.AWSResources): IAM grants and event topics.
func AWSResources(settings string) ([]plugin.AWSGrant, []plugin.AWSEventTopic, error) {
	ps, err := ParseProviderSettings(settings)
	if err != nil {
		return nil, nil, err
	}
	var grants []plugin.AWSGrant
	var topics []plugin.AWSEventTopic
	for _, c := range ps.Configured {
		if a, ok := c.Config.(plugin.AWSResources); ok {
			grants = append(grants, a.AWSGrants()...)
			topics = append(topics, a.AWSEventTopics()...)
		}
	}
	return grants, topics, nil
}
