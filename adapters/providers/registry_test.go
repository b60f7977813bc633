package providers_test

import (
	"os"
	"strings"
	"testing"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
)

// harnesses: every registered provider's contract-suite run and its fake.
// A provider added to wire.Registered without them fails TestRegistry.
var harnesses = map[string]struct {
	contract func(t *testing.T)
	fake     string // the fake's source, relative to this directory
}{
	"sandbox":  {contractSandbox, "../../sandbox/sandbox.go"},
	"http":     {contractHTTP, "fakes/receiver.go"},
	"slack":    {contractSlack, "fakes/slack.go"},
	"telegram": {contractTelegram, "fakes/telegram.go"},
	"stripe":   {contractStripe, "fakes/stripe.go"},
	"gcal":     {contractGCal, "fakes/gcal.go"},
	"discord":  {contractDiscord, "fakes/discord.go"},
	"twilio":   {contractTwilio, "fakes/twilio.go"},
	"postmark": {contractPostmark, "fakes/postmark.go"},
	"whatsapp": {contractWhatsApp, "fakes/whatsapp.go"},
	"ses":      {contractSES, "fakes/ses.go"},
}

// TestRegistry: every registered provider has a contract-suite run, a fake,
// README "Connecting a real provider" blocks (config and use; the sandbox
// needs none: make run starts it), and a capability declaration with a
// reason and a documentation link for every action.
func TestRegistry(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range wire.Registered {
		if r.Name == "" || seen[r.Name] {
			t.Fatalf("registration %q: empty or registered twice", r.Name)
		}
		seen[r.Name] = true
		h, ok := harnesses[r.Name]
		if !ok || h.contract == nil {
			t.Errorf("%s: registered without a contract-suite run (add it to harnesses)", r.Name)
		}
		if !ok || h.fake == "" {
			t.Errorf("%s: registered without a fake in adapters/providers/fakes", r.Name)
		} else if _, err := os.Stat(h.fake); err != nil {
			t.Errorf("%s: fake %s: %v", r.Name, h.fake, err)
		}
		if !r.Local {
			for _, part := range []string{"config", "use"} {
				if m := "<!-- provider-snippet:" + r.Name + ":" + part + " -->"; !strings.Contains(string(readme), m) {
					t.Errorf("%s: README.md has no %s", r.Name, m)
				}
			}
		}
		if r.Decode == nil || len(r.Actions) == 0 {
			t.Errorf("%s: registration without Decode or Actions", r.Name)
		}
		for _, a := range r.Actions {
			if a.Name == "" || a.Why == "" || a.Doc == "" {
				t.Errorf("%s/%s: a capability declaration needs a name, a reason and a documentation link", r.Name, a.Name)
			}
			if a.Declared.IdempotencyKeys && a.Declared.KeyRetention <= 0 {
				t.Errorf("%s/%s: keys declared without a retention", r.Name, a.Name)
			}
		}
	}
	for name := range harnesses {
		if !seen[name] {
			t.Errorf("harness %s names no registered provider", name)
		}
	}
}

// TestContract runs the contract suite for every registered provider.
func TestContract(t *testing.T) {
	for _, r := range wire.Registered {
		h, ok := harnesses[r.Name]
		if !ok {
			t.Errorf("%s: no contract-suite run", r.Name)
			continue
		}
		t.Run(r.Name, h.contract)
	}
}

// declared is the registration's capability declaration for one action:
// the contract suite checks the adapter against what the registration
// documents.
func declared(t *testing.T, provider, action string) core.Capabilities {
	t.Helper()
	r, ok := wire.Registration(provider)
	if !ok {
		t.Fatalf("%s is not registered", provider)
	}
	a, ok := r.Declaration(action)
	if !ok || a.PerAccount {
		t.Fatalf("%s declares nothing fixed for %s", provider, action)
	}
	return a.Declared
}
