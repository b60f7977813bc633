package wire

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
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
// Every secret (tokens, signing secrets) may be given literally or as
// "env:NAME", read from the environment variable NAME, so the JSON itself can
// live in plain configuration while the secrets are injected separately.
// Secrets never appear in errors or logs.
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
}

// Providers builds the provider adapters named in the settings.
func Providers(settings string, client *http.Client) (core.ProviderMap, error) {
	m := core.ProviderMap{}
	if settings == "" {
		return m, nil
	}
	var ps ProviderSettings
	if err := json.Unmarshal([]byte(settings), &ps); err != nil {
		// json errors name fields and types, never values.
		return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
	}
	if ps.Sandbox != nil {
		if ps.Sandbox.BaseURL == "" {
			return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: sandbox.baseUrl is required")
		}
		tokens := map[string]string{}
		for acct, tok := range ps.Sandbox.Tokens {
			v, err := secret(tok, "sandbox.tokens."+acct)
			if err != nil {
				return nil, err
			}
			tokens[acct] = v
		}
		m[sandboxprovider.Name] = sandboxprovider.New(client, sandboxprovider.Config{
			BaseURL: ps.Sandbox.BaseURL,
			Timeout: time.Duration(ps.Sandbox.TimeoutMs) * time.Millisecond,
			Tokens:  tokens,
		})
	}
	if c := ps.HTTP; c != nil {
		accounts := map[string]httpsigned.Account{}
		for _, name := range sortedKeys(c.Accounts) {
			a := c.Accounts[name]
			var err error
			if a.Secret, err = secret(a.Secret, "http.accounts."+name+".secret"); err != nil {
				return nil, err
			}
			if a.PreviousSecret, err = secret(a.PreviousSecret, "http.accounts."+name+".previousSecret"); err != nil {
				return nil, err
			}
			if a.Token, err = secret(a.Token, "http.accounts."+name+".token"); err != nil {
				return nil, err
			}
			accounts[name] = a
		}
		p, err := httpsigned.New(client, httpsigned.Config{
			Accounts: accounts, Actions: c.Actions, Timeout: time.Duration(c.TimeoutMs) * time.Millisecond,
		})
		if err != nil {
			return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
		}
		m[httpsigned.Name] = p
	}
	if c := ps.Slack; c != nil {
		accounts := map[string]slack.Account{}
		for _, team := range sortedKeys(c.Accounts) {
			a := c.Accounts[team]
			var err error
			if a.Token, err = secret(a.Token, "slack.accounts."+team+".token"); err != nil {
				return nil, err
			}
			if a.SigningSecret, err = secret(a.SigningSecret, "slack.accounts."+team+".signingSecret"); err != nil {
				return nil, err
			}
			accounts[team] = a
		}
		p, err := slack.New(client, slack.Config{
			BaseURL: c.BaseURL, Accounts: accounts,
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
		accounts := map[string]telegram.Account{}
		for _, name := range sortedKeys(c.Accounts) {
			a := c.Accounts[name]
			var err error
			if a.Token, err = secret(a.Token, "telegram.accounts."+name+".token"); err != nil {
				return nil, err
			}
			if a.WebhookSecret, err = secret(a.WebhookSecret, "telegram.accounts."+name+".webhookSecret"); err != nil {
				return nil, err
			}
			accounts[name] = a
		}
		p, err := telegram.New(client, telegram.Config{
			BaseURL: c.BaseURL, Accounts: accounts, Timeout: time.Duration(c.TimeoutMs) * time.Millisecond,
		})
		if err != nil {
			return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
		}
		m[telegram.Name] = p
	}
	return m, nil
}

// secret resolves a configured secret: "env:NAME" reads the environment
// variable NAME (which must be set and non-empty); anything else is the
// value itself. Errors name the field, never the value.
func secret(v, field string) (string, error) {
	name, ok := strings.CutPrefix(v, "env:")
	if !ok {
		return v, nil
	}
	s := os.Getenv(name)
	if s == "" {
		return "", fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %s refers to environment variable %s, which is not set", field, name)
	}
	return s, nil
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
	var ps ProviderSettings
	if strings.TrimSpace(settings) == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(settings), &ps); err != nil {
		return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
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
