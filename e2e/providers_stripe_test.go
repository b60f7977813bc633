package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
)

// providerEnv starts the stack with one real provider configured (its member
// of OUTBOX_PROVIDER_CONFIG, pointing at a fake) and a grant for it.
func providerEnv(t *testing.T, provider, member string) *env {
	t.Helper()
	return newEnv(t, options{
		Config: wire.Config{ProviderConfig: fmt.Sprintf("%q:%s", provider, member)},
		Grants: []core.Grant{{ID: "g-" + provider, Version: 1, Bot: "bot-*", Provider: provider, Account: "*", Actions: []string{"*"}, Targets: []string{"*"}}},
	})
}

func stripeRefund(target string, amount int) string {
	return fmt.Sprintf(`{"kind":"action","provider":"stripe","account":"shop","action":"refund","target":%q,"payload":{"amount":%d,"reason":"requested_by_customer"},"grant":{"id":"g-stripe","version":1}}`, target, amount)
}

// Stripe refunds against the Stripe fake (adapters/providers/fakes/stripe.go):
// keys with a 24-hour retention, no lookup, the refund webhook settling
// what stays uncertain.
func TestStripeRefunds(t *testing.T) {
	t.Parallel()
	const secret = "whsec_e2e_stripe_endpoint_secret"
	fk := fakes.NewStripe(t, time.Now)
	fk.AddKey("sk_test_e2e")
	for i := 1; i <= 9; i++ {
		fk.AddPaymentIntent(fmt.Sprintf("pi_e2e%d", i), 5000)
	}
	e := providerEnv(t, "stripe", fmt.Sprintf(`{"baseUrl":%q,"timeoutMs":2000,"accounts":{"shop":{"secretKey":"sk_test_e2e","webhookSecret":%q}}}`, fk.URL(), secret))
	hook := e.api.URL + "/v1/webhooks/stripe/shop"
	sameKey := func(id string) {
		t.Helper()
		reqs := fk.RequestsFor(id)
		if len(reqs) < 2 {
			t.Fatalf("%s: %d requests at Stripe, want a retry", id, len(reqs))
		}
		for _, r := range reqs {
			if r.IdempotencyKey == "" || r.IdempotencyKey != reqs[0].IdempotencyKey {
				t.Fatalf("%s: the retry's Idempotency-Key %q differs from the first %q", id, r.IdempotencyKey, reqs[0].IdempotencyKey)
			}
		}
	}

	t.Run("happy path", func(t *testing.T) {
		id := e.mustSubmit("stripe-happy", stripeRefund("pi_e2e1", 1500))
		in := e.waitStatus(id, 15*time.Second, core.StatusSucceeded)
		rf, _ := fk.RefundFor(id)
		if n := fk.RefundsFor(id); n != 1 || in.ExternalID != rf.ID || !strings.HasPrefix(rf.ID, "re_") {
			t.Fatalf("%d refunds, external id %q (refund %q)", n, in.ExternalID, rf.ID)
		}
	})
	t.Run("response lost after commit: the same key replays the refund", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
		id := e.mustSubmit("stripe-drop", stripeRefund("pi_e2e2", 1500))
		in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		sameKey(id)
		rf, _ := fk.RefundFor(id)
		if n := fk.RefundsFor(id); n != 1 || in.ExternalID != rf.ID {
			t.Fatalf("%d refunds, external id %q, want 1 and %q", n, in.ExternalID, rf.ID)
		}
	})
	t.Run("500 after commit stays uncertain until the signed refund webhook", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.ErrorAfterCommit})
		id := e.mustSubmit("stripe-500", stripeRefund("pi_e2e3", 1500))
		// The retry carries the same key and gets the saved 500 again.
		e.eventually(20*time.Second, "a retry replayed the saved 500", func() bool {
			for _, r := range fk.RequestsFor(id) {
				if r.Replayed && r.Status == http.StatusInternalServerError {
					return true
				}
			}
			return false
		})
		sameKey(id)
		in := e.intent(id)
		if in.Status == core.StatusSucceeded || in.Status == core.StatusFailed || fk.RefundsFor(id) != 1 {
			t.Fatalf("after a replayed 500: %s with %d refunds; want uncertain with 1", trail(in), fk.RefundsFor(id))
		}
		body, _ := fk.RefundEvent("evt_e2e_500", "refund.updated", id)
		items := e.tableItems()
		// A wrongly signed and a 10-minute-old delivery are refused; nothing stored.
		if st, err := fk.Deliver(hook, "whsec_not_the_secret", time.Now(), body); err != nil || st != http.StatusUnauthorized {
			t.Fatalf("wrongly signed webhook: %d %v", st, err)
		}
		if st, err := fk.Deliver(hook, secret, time.Now().Add(-10*time.Minute), body); err != nil || st != http.StatusUnauthorized {
			t.Fatalf("10-minute-old webhook: %d %v", st, err)
		}
		if n := e.tableItems(); n != items {
			t.Fatalf("refused webhooks stored %d items", n-items)
		}
		if in := e.intent(id); in.Status == core.StatusSucceeded || len(webhookEntries(in)) != 0 {
			t.Fatalf("a refused webhook settled the intent: %s", trail(in))
		}
		if st, err := fk.Deliver(hook, secret, time.Now(), body); err != nil || st != http.StatusOK {
			t.Fatalf("signed webhook: %d %v", st, err)
		}
		in = e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
		rf, _ := fk.RefundFor(id)
		if in.ExternalID != rf.ID || fk.RefundsFor(id) != 1 {
			t.Fatalf("settled by the webhook: external id %q (refund %q), %d refunds", in.ExternalID, rf.ID, fk.RefundsFor(id))
		}
	})
	t.Run("a documented rejection fails without a retry", func(t *testing.T) {
		// pi_e2e4 holds 5000: a 6000 refund is amount_too_large.
		id := e.mustSubmit("stripe-reject", stripeRefund("pi_e2e4", 6000))
		in := e.waitStatus(id, 15*time.Second, core.StatusFailed)
		if n := len(fk.RequestsFor(id)); n != 1 || fk.RefundsFor(id) != 0 || in.AttemptCount != 1 {
			t.Fatalf("rejected refund: %d requests, %d refunds, %s", n, fk.RefundsFor(id), trail(in))
		}
	})
	t.Run("429 is honoured: retried later with the same key", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.RateLimit})
		id := e.mustSubmit("stripe-429", stripeRefund("pi_e2e5", 1500))
		e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		sameKey(id)
		reqs := fk.RequestsFor(id)
		if reqs[0].Status != http.StatusTooManyRequests || fk.RefundsFor(id) != 1 {
			t.Fatalf("requests %+v, %d refunds", reqs, fk.RefundsFor(id))
		}
	})
	t.Run("Prefer: wait answers succeeded inline", func(t *testing.T) {
		r := e.submitWait(botToken, "stripe-inline", stripeRefund("pi_e2e6", 1500), 5)
		var in core.Intent
		r.json(t, &in)
		rf, _ := fk.RefundFor(in.ID)
		if r.status != http.StatusCreated || in.Status != core.StatusSucceeded || in.ExternalID != rf.ID || fk.RefundsFor(in.ID) != 1 {
			t.Fatalf("inline: %d %s", r.status, r.body)
		}
	})
}
