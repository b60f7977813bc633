package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
	"github.com/botharness/outbox/sandbox"
)

// The sandbox's status callback capability (issue 48), the road make run
// shows without credentials: an account with neither keys nor lookup whose
// response is dropped after the commit goes to needs-human; a few seconds
// later the sandbox calls back with a signed status naming the intent
// (twice: a duplicate changes nothing) and the intent ends succeeded with the
// sandbox's message id, without a person and without a second send. A
// failure status ("undelivered") is recorded as evidence and changes nothing.
func TestSandboxStatusCallbackSettlesNeedsHuman(t *testing.T) {
	t.Parallel()
	e := whEnv(t, options{})
	for account, status := range map[string]string{"acct-cb": "delivered", "acct-cbf": "undelivered"} {
		e.faults(fmt.Sprintf(`{"account":%q,"capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}],
		  "webhook":{"url":%q,"secret":%q,"delayMs":2500,"statuses":[%q],"noAck":true,"duplicates":1}}`,
			account, e.api.URL+"/v1/webhooks/sandbox/"+account, whSecret, status))
	}
	ok := e.mustSubmit("cb-ok", intentBody("acct-cb", "chan-cb", "settled by its callback"))
	bad := e.mustSubmit("cb-bad", intentBody("acct-cbf", "chan-cb", "reported undelivered"))
	e.waitStatus(ok, 2*time.Second, core.StatusNeedsHuman)
	e.waitStatus(bad, 2*time.Second, core.StatusNeedsHuman)

	in := e.waitStatus(ok, 15*time.Second, core.StatusSucceeded)
	effects := e.sb.Effects(sandbox.EffectFilter{Account: "acct-cb"})
	if len(effects) != 1 || in.ExternalID != effects[0].MessageID || in.AttemptCount != 1 {
		t.Fatalf("settled: %s; %d effects at the sandbox", trail(in), len(effects))
	}
	if w := webhookEntries(in); len(w) != 1 || w[0].Result != core.ResultStatus || w[0].Evidence.Extra["matchedBy"] != "identity" {
		t.Fatalf("webhook entries: %+v", w)
	}
	e.whDelivered("acct-cbf", 2, 15*time.Second)
	e.eventually(5*time.Second, "the undelivered status is recorded", func() bool { return len(webhookEntries(e.intent(bad))) == 1 })
	got := e.intent(bad)
	if w := webhookEntries(got); got.Status != core.StatusNeedsHuman || w[0].Result != core.ResultFailure || w[0].Evidence.ProviderCode != "undelivered" {
		t.Fatalf("after undelivered: %s", trail(got))
	}
}

// TestREADMESandboxStatusCallback runs README's "Status callbacks, without
// credentials" block as written, against a stack started with the webhook
// secret its comment exports (make run's), with make run's variables.
func TestREADMESandboxStatusCallback(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := readmeSnippet(t, string(b), "sandbox:status-callback")
	m := regexp.MustCompile(`export OUTBOX_WEBHOOK_SECRETS='([^']+)'`).FindStringSubmatch(block)
	if m == nil {
		t.Fatalf("the block does not say which OUTBOX_WEBHOOK_SECRETS make run needs:\n%s", block)
	}
	e := newEnv(t, options{Config: wire.Config{WebhookSecrets: m[1]},
		Grants: []core.Grant{{ID: "dev-grant", Version: 1, Bot: "*", Provider: "sandbox", Account: "*", Actions: []string{"*"}, Targets: []string{"*"}}}})
	if err := auth.SeedToken(context.Background(), e.st.App.Tokens, "dev-bot-token-cb", core.Principal{Kind: core.PrincipalBot, Name: "dev-bot"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := runSnippet(t, block, []string{"OUTBOX_API_URL=" + e.api.URL, "OUTBOX_BOT_TOKEN=dev-bot-token-cb", "OUTBOX_SANDBOX_API_URL=" + e.sbURL})
	dec := json.NewDecoder(strings.NewReader(out))
	var answers []map[string]any
	for dec.More() {
		var a map[string]any
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("the block's answers are not JSON: %v\n%s", err, out)
		}
		answers = append(answers, a)
	}
	if len(answers) != 2 || answers[1]["id"] == nil {
		t.Fatalf("want the sandbox's answer and the intent; got:\n%s", out)
	}
	id := answers[1]["id"].(string)
	e.waitStatus(id, 4*time.Second, core.StatusNeedsHuman)
	in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
	if w := webhookEntries(in); len(w) != 1 || w[0].Evidence.ProviderCode != core.DeliveryDelivered || in.ExternalID == "" {
		t.Fatalf("settled: %s", trail(in))
	}
}
