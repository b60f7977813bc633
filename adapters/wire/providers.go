package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpsigned"
	"github.com/botharness/outbox/adapters/providers/sandboxprovider"
	"github.com/botharness/outbox/adapters/providers/slack"
	"github.com/botharness/outbox/adapters/providers/telegram"
	"github.com/botharness/outbox/core"
)

// ProviderSettings is the OUTBOX_PROVIDER_CONFIG document:
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
	Sandbox *struct {
		BaseURL   string            `json:"baseUrl"`
		TimeoutMs int               `json:"timeoutMs"`
		Tokens    map[string]string `json:"tokens"`
	} `json:"sandbox"`
	HTTP *struct {
		TimeoutMs int                           `json:"timeoutMs"`
		Actions   []string                      `json:"actions"`
		Accounts  map[string]httpsigned.Account `json:"accounts"`
	} `json:"http"`
	Slack *struct {
		BaseURL         string                   `json:"baseUrl"`
		TimeoutMs       int                      `json:"timeoutMs"`
		LookbackSeconds int                      `json:"lookbackSeconds"`
		MaxHistoryPages int                      `json:"maxHistoryPages"`
		HistoryPageSize int                      `json:"historyPageSize"`
		Accounts        map[string]slack.Account `json:"accounts"`
	} `json:"slack"`
	Telegram *struct {
		BaseURL   string                      `json:"baseUrl"`
		TimeoutMs int                         `json:"timeoutMs"`
		Accounts  map[string]telegram.Account `json:"accounts"`
	} `json:"telegram"`
	// Pacing is read by the gate (pacing.go), not by a provider.
	Pacing *PacingSettings `json:"pacing"`
}

// ParseProviderSettings reads the OUTBOX_PROVIDER_CONFIG document once, for
// every part of the app that uses it (providers, secrets, pacing, the
// start-up banner, the CDK stack), and validates its pacing. An empty
// document is empty settings.
func ParseProviderSettings(settings string) (*ProviderSettings, error) {
	ps := &ProviderSettings{}
	if strings.TrimSpace(settings) != "" {
		if err := json.Unmarshal([]byte(settings), ps); err != nil {
			// json errors name fields and types, never values.
			return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
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
	if err := ps.eachSecret(func(field string, use SecretUse, v *string) error {
		r, err := res.resolve(ctx, field, use, *v)
		*v = r
		return err
	}); err != nil {
		return nil, err
	}
	if ps.Sandbox != nil {
		if ps.Sandbox.BaseURL == "" {
			return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: sandbox.baseUrl is required")
		}
		m[sandboxprovider.Name] = sandboxprovider.New(client, sandboxprovider.Config{
			BaseURL: ps.Sandbox.BaseURL,
			Timeout: time.Duration(ps.Sandbox.TimeoutMs) * time.Millisecond,
			Tokens:  ps.Sandbox.Tokens,
		})
	}
	if c := ps.HTTP; c != nil {
		p, err := httpsigned.New(client, httpsigned.Config{
			Accounts: c.Accounts, Actions: c.Actions, Timeout: time.Duration(c.TimeoutMs) * time.Millisecond,
		})
		if err != nil {
			return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
		}
		m[httpsigned.Name] = p
	}
	if c := ps.Slack; c != nil {
		p, err := slack.New(client, slack.Config{
			BaseURL: c.BaseURL, Accounts: c.Accounts,
			Timeout:         time.Duration(c.TimeoutMs) * time.Millisecond,
			Lookback:        time.Duration(c.LookbackSeconds) * time.Second,
			MaxHistoryPages: c.MaxHistoryPages,
			HistoryPageSize: c.HistoryPageSize,
		})
		if err != nil {
			return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
		}
		m[slack.Name] = p
	}
	if c := ps.Telegram; c != nil {
		p, err := telegram.New(client, telegram.Config{
			BaseURL: c.BaseURL, Accounts: c.Accounts, Timeout: time.Duration(c.TimeoutMs) * time.Millisecond,
		})
		if err != nil {
			return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
		}
		m[telegram.Name] = p
	}
	if !res.holds(SecretForSending) {
		for name, p := range m {
			m[name] = withheld{p}
		}
	}
	return m, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// WithSandbox returns the provider configuration with the sandbox added at
// baseURL unless the configuration names "sandbox" itself (`"sandbox": null`
// turns it off). `make run` uses it so that OUTBOX_PROVIDER_CONFIG adds real
// providers beside the sandbox instead of silently replacing it.
func WithSandbox(settings, baseURL string, timeoutMs int) (string, error) {
	doc := map[string]json.RawMessage{}
	if strings.TrimSpace(settings) != "" {
		if err := json.Unmarshal([]byte(settings), &doc); err != nil {
			return "", fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
		}
	}
	if _, ok := doc["sandbox"]; !ok {
		sb, _ := json.Marshal(map[string]any{"baseUrl": baseURL, "timeoutMs": timeoutMs})
		doc["sandbox"] = sb
	}
	out, err := json.Marshal(doc)
	return string(out), err
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
	if ps.HTTP != nil {
		out = append(out, ProviderSummary{Name: httpsigned.Name, Accounts: sortedKeys(ps.HTTP.Accounts)})
	}
	if ps.Sandbox != nil {
		out = append(out, ProviderSummary{Name: sandboxprovider.Name, BaseURL: ps.Sandbox.BaseURL})
	}
	if ps.Slack != nil {
		out = append(out, ProviderSummary{Name: slack.Name, Accounts: sortedKeys(ps.Slack.Accounts), BaseURL: ps.Slack.BaseURL})
	}
	if ps.Telegram != nil {
		out = append(out, ProviderSummary{Name: telegram.Name, Accounts: sortedKeys(ps.Telegram.Accounts), BaseURL: ps.Telegram.BaseURL})
	}
	return out, nil
}
