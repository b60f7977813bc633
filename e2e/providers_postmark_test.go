package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/postmark"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
)

func postmarkEmail(to, subject string) string {
	return fmt.Sprintf(`{"kind":"action","provider":"postmark","account":"mail","action":"send_email","target":%q,"payload":{"Subject":%q,"TextBody":"Your order is on its way."},"grant":{"id":"g-postmark","version":1}}`, to, subject)
}

// Postmark email against the Postmark fake (adapters/providers/fakes/postmark.go):
// no keys; the outbound message search by Metadata settles a lost answer
// without a second email; basic-auth webhooks bind deliveries and bounces.
func TestPostmark(t *testing.T) {
	t.Parallel()
	fk := fakes.NewPostmark(t, time.Now)
	fk.AddServer("pm-e2e-token")
	fk.AddSender("orders@example.com")
	// A settle window of 6 s (the harness's is 2 s) leaves the lagging-search
	// case room on a loaded host: its first lookup, due a second after the
	// lost answer, must come before the search shows the message (3 s).
	e := newEnv(t, options{
		Config: wire.Config{
			ProviderConfig: fmt.Sprintf(`"postmark":{"baseUrl":%q,"timeoutMs":1500,"accounts":{"mail":{"serverToken":"pm-e2e-token","from":"orders@example.com","webhookUser":"pm","webhookPassword":"pm-hook-secret"}}}`, fk.URL()),
			Policy:         core.AttemptPolicy{Reconcile: core.ReconcilePolicy{Delay: time.Second, Window: 20 * time.Second, Settle: 6 * time.Second}},
		},
		Grants: []core.Grant{{ID: "g-postmark", Version: 1, Bot: "bot-*", Provider: "postmark", Account: "*", Actions: []string{"*"}, Targets: []string{"*"}}},
	})
	hook := e.api.URL + "/v1/webhooks/postmark/mail"
	sent := func(id string) []fakes.PostmarkMessage { return fk.SentWith(postmark.MetadataIntentKey, id) }
	one := func(id string, in *core.Intent) {
		t.Helper()
		if s := sent(id); len(s) != 1 || in.ExternalID != s[0].MessageID {
			t.Fatalf("%s: %d emails, external id %q", id, len(s), in.ExternalID)
		}
	}

	t.Run("happy path; a bounce is evidence only", func(t *testing.T) {
		id := e.mustSubmit("pm-happy", postmarkEmail("jo@example.com", "happy"))
		in := e.waitStatus(id, 15*time.Second, core.StatusSucceeded)
		one(id, in)
		body, _ := fk.BounceEvent(7001, in.ExternalID, "HardBounce")
		if st, err := fk.Deliver(hook, "pm", "pm-hook-secret", body); err != nil || st != http.StatusOK {
			t.Fatalf("bounce: %d %v", st, err)
		}
		got := e.intent(id)
		if w := webhookEntries(got); got.Status != core.StatusSucceeded || len(w) != 1 || w[0].Result != core.ResultFailure || w[0].Evidence.ProviderCode != "bounce: HardBounce" {
			t.Fatalf("after a bounce: %s", trail(got))
		}
	})
	t.Run("response lost after commit: found by the search, one email, no second send", func(t *testing.T) {
		before := fk.SendRequests()
		fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
		id := e.mustSubmit("pm-drop", postmarkEmail("jo@example.com", "dropped"))
		in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		one(id, in)
		if n := fk.SendRequests() - before; n != 1 || fk.Searches() == 0 {
			t.Fatalf("%d send requests, %d searches; want 1 and at least 1", n, fk.Searches())
		}
		// The delivery webhook: wrong credentials change nothing; right
		// ones bind by the metadata; a replay is a duplicate.
		body, _ := fk.DeliveryEvent(in.ExternalID)
		items := e.tableItems()
		for _, c := range [][2]string{{"pm", "guess"}, {"", ""}} {
			if st, err := fk.Deliver(hook, c[0], c[1], body); err != nil || st != http.StatusUnauthorized {
				t.Fatalf("webhook with credentials %q: %d %v", c[0], st, err)
			}
		}
		if n := e.tableItems(); n != items || len(webhookEntries(e.intent(id))) != 0 {
			t.Fatalf("a refused webhook stored %d items", n-items)
		}
		if st, err := fk.Deliver(hook, "pm", "pm-hook-secret", body); err != nil || st != http.StatusOK {
			t.Fatalf("delivery: %d %v", st, err)
		}
		got := e.intent(id)
		if w := webhookEntries(got); len(w) != 1 || w[0].Result != core.ResultStatus || w[0].ExternalID != in.ExternalID || w[0].Evidence.Extra["matchedBy"] != "identity" {
			t.Fatalf("after the delivery webhook: %s", trail(got))
		}
		if st, _ := fk.Deliver(hook, "pm", "pm-hook-secret", body); st != http.StatusOK || e.intent(id).Version != got.Version {
			t.Fatalf("a replay changed the intent (%d)", st)
		}
	})
	t.Run("500 after commit: found by the search", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.ErrorAfterCommit})
		id := e.mustSubmit("pm-500", postmarkEmail("jo@example.com", "500"))
		one(id, e.waitStatus(id, 20*time.Second, core.StatusSucceeded))
	})
	t.Run("503 before commit: authoritatively absent, sent again after the settle window", func(t *testing.T) {
		before := fk.SendRequests()
		fk.Inject(fakes.Fault{Kind: fakes.Unavailable})
		id := e.mustSubmit("pm-503", postmarkEmail("jo@example.com", "503"))
		in := e.waitStatus(id, 30*time.Second, core.StatusSucceeded)
		one(id, in)
		if n := fk.SendRequests() - before; n != 2 {
			t.Fatalf("%d send requests, want 2 (the absent one, then the retry)", n)
		}
	})
	t.Run("a search that lags the send: absent within the settle window is not acted on", func(t *testing.T) {
		// The env's settle window is 6 s; the search shows a message 3 s
		// after it was sent, so the first lookup (about 1 s after the lost
		// answer) finds nothing and must not send again.
		fk.SetSearchDelay(3 * time.Second)
		defer fk.SetSearchDelay(0)
		before, searches := fk.SendRequests(), fk.Searches()
		fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
		id := e.mustSubmit("pm-lag", postmarkEmail("jo@example.com", "lagging search"))
		in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		one(id, in)
		if n := fk.SendRequests() - before; n != 1 || fk.Searches()-searches < 2 {
			t.Fatalf("%d send requests, %d searches; want 1 and at least 2 (absent, then found)", n, fk.Searches()-searches)
		}
	})
	t.Run("a documented rejection fails without a retry", func(t *testing.T) {
		fk.Deactivate("gone@example.com")
		before := fk.SendRequests()
		id := e.mustSubmit("pm-reject", postmarkEmail("gone@example.com", "inactive"))
		in := e.waitStatus(id, 15*time.Second, core.StatusFailed)
		if n := fk.SendRequests() - before; n != 1 || len(sent(id)) != 0 || in.AttemptCount != 1 || in.Attempts[0].Evidence.ProviderCode != "406" {
			t.Fatalf("rejected: %d requests, %s", n, trail(in))
		}
	})
	t.Run("429 is honoured", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.RateLimit, RetryAfter: time.Second})
		start := time.Now()
		id := e.mustSubmit("pm-429", postmarkEmail("jo@example.com", "429"))
		in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		one(id, in)
		if time.Since(start) < time.Second || in.AttemptCount != 2 {
			t.Fatalf("after %v: %s", time.Since(start), trail(in))
		}
	})
	t.Run("Prefer: wait answers succeeded inline", func(t *testing.T) {
		r := e.submitWait(botToken, "pm-inline", postmarkEmail("jo@example.com", "inline"), 5)
		var in core.Intent
		r.json(t, &in)
		if r.status != http.StatusCreated || in.Status != core.StatusSucceeded {
			t.Fatalf("inline: %d %s", r.status, r.body)
		}
		one(in.ID, &in)
	})
}
