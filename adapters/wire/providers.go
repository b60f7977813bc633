package wire

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/botharness/outbox/adapters/sandboxprovider"
	"github.com/botharness/outbox/core"
)

// ProviderSettings is the OUTBOX_PROVIDER_CONFIG document.
type ProviderSettings struct {
	Sandbox *struct {
		BaseURL   string            `json:"baseUrl"`
		TimeoutMs int               `json:"timeoutMs"`
		Tokens    map[string]string `json:"tokens"`
	} `json:"sandbox"`
}

// Providers builds the provider adapters named in the settings.
func Providers(settings string, client *http.Client) (core.ProviderMap, error) {
	m := core.ProviderMap{}
	if settings == "" {
		return m, nil
	}
	var ps ProviderSettings
	if err := json.Unmarshal([]byte(settings), &ps); err != nil {
		return nil, fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %w", err)
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
	return m, nil
}
