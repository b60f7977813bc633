package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/core"
)

const (
	twilioSID   = "AC0123456789abcdef0123456789abcdef"
	twilioToken = "e2e-twilio-auth-token"
	// twilioPublic is the outbox's public URL as configured: callbacks are
	// signed over it and arrive at the test's API (a proxy in front), so
	// the endpoint must verify the configured URL, never one rebuilt from Host.
	twilioPublic = "https://outbox.example.com"
)

func twilioIntent(action, target, payload string) string {
	return fmt.Sprintf(`{"kind":"action","provider":"twilio","account":"alerts","action":%q,"target":%q,"payload":%s,"grant":{"id":"g-twilio","version":1}}`, action, target, payload)
}

// Twilio SMS and calls against the Twilio fake (adapters/providers/fakes/twilio.go):
// neither keys nor lookup; the signed status callback naming the intent
// settles what stays uncertain.
func TestTwilio(t *testing.T) {
	t.Parallel()
	fk := fakes.NewTwilio(t, time.Now)
	fk.AddAccount(twilioSID, twilioToken)
	fk.AddNumber("+15005550006")
	e := providerEnv(t, "twilio", fmt.Sprintf(`{"baseUrl":%q,"timeoutMs":1500,"statusCallbackBaseUrl":%q,"accounts":{"alerts":{"accountSid":%q,"authToken":%q,"from":"+15005550006"}}}`,
		fk.URL(), twilioPublic, twilioSID, twilioToken))
	sms := func(body string) string {
		return twilioIntent("send_sms", "+15005550001", fmt.Sprintf(`{"body":%q}`, body))
	}
	one := func(id string) fakes.TwilioResource {
		t.Helper()
		c := fk.CreatedWith("intent=" + id)
		if len(c) != 1 || fk.RequestsWith("intent="+id) != 1 {
			t.Fatalf("%s: %d created, %d requests at Twilio; want exactly one of each", id, len(c), fk.RequestsWith("intent="+id))
		}
		return c[0]
	}
	callback := func(sid, status string) int {
		t.Helper()
		st, err := fk.Callback(sid, status, "", e.api.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	t.Run("happy path", func(t *testing.T) {
		id := e.mustSubmit("twilio-happy", sms("shipped"))
		in := e.waitStatus(id, 15*time.Second, core.StatusSucceeded)
		c := one(id)
		if in.ExternalID != c.SID || !strings.HasPrefix(c.SID, "SM") || c.Body != "shipped" ||
			c.StatusCallback != twilioPublic+"/v1/webhooks/twilio/alerts?intent="+id {
			t.Fatalf("external id %q, created %+v", in.ExternalID, c)
		}
	})
	t.Run("response lost: needs-human with one SMS, then the signed callback settles it", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
		id := e.mustSubmit("twilio-drop", sms("lost answer"))
		in := e.waitStatus(id, 15*time.Second, core.StatusNeedsHuman)
		c := one(id)
		if in.ExternalID != "" || in.AttemptCount != 1 {
			t.Fatalf("after a lost answer: %s", trail(in))
		}
		// Another intent, also uncertain: a callback for this one must not settle it.
		fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
		other := e.mustSubmit("twilio-drop-other", sms("another"))
		e.waitStatus(other, 15*time.Second, core.StatusNeedsHuman)

		items := e.tableItems()
		if st, err := fk.Callback(c.SID, "delivered", "", e.api.URL, "not-the-auth-token"); err != nil || st != http.StatusUnauthorized {
			t.Fatalf("wrongly signed callback: %d %v", st, err)
		}
		if n := e.tableItems(); n != items {
			t.Fatalf("a refused callback stored %d items", n-items)
		}
		if in := e.intent(id); in.Status != core.StatusNeedsHuman || len(webhookEntries(in)) != 0 {
			t.Fatalf("a refused callback changed the intent: %s", trail(in))
		}
		// undelivered is evidence for the person, not a resolution.
		if st := callback(c.SID, "undelivered"); st != http.StatusOK {
			t.Fatalf("undelivered: %d", st)
		}
		in = e.intent(id)
		if w := webhookEntries(in); in.Status != core.StatusNeedsHuman || len(w) != 1 || w[0].Result != core.ResultFailure {
			t.Fatalf("after undelivered: %s", trail(in))
		}
		if st := callback(c.SID, "delivered"); st != http.StatusOK {
			t.Fatalf("delivered: %d", st)
		}
		in = e.waitStatus(id, 5*time.Second, core.StatusSucceeded)
		if in.ExternalID != c.SID {
			t.Fatalf("settled with external id %q, want %q", in.ExternalID, c.SID)
		}
		// The replay changes nothing; the other intent is untouched.
		if st := callback(c.SID, "delivered"); st != http.StatusOK {
			t.Fatalf("replay: %d", st)
		}
		if again := e.intent(id); again.Version != in.Version {
			t.Fatalf("a replayed callback changed the intent: %s", trail(again))
		}
		if o := e.intent(other); o.Status != core.StatusNeedsHuman || len(webhookEntries(o)) != 0 {
			t.Fatalf("a callback naming another intent touched it: %s", trail(o))
		}
		one(id)
	})
	t.Run("a call whose answer was lost: busy is evidence, completed settles it", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.ErrorAfterCommit})
		id := e.mustSubmit("twilio-call", twilioIntent("place_call", "+15005550001", `{"twiml":"<Response><Say>Your table is ready</Say></Response>"}`))
		e.waitStatus(id, 15*time.Second, core.StatusNeedsHuman)
		c := one(id)
		if !strings.HasPrefix(c.SID, "CA") || !strings.Contains(c.TwiML, "table is ready") {
			t.Fatalf("created %+v", c)
		}
		if st := callback(c.SID, "busy"); st != http.StatusOK {
			t.Fatalf("busy: %d", st)
		}
		if in := e.intent(id); in.Status != core.StatusNeedsHuman {
			t.Fatalf("busy changed the status: %s", trail(in))
		}
		if st := callback(c.SID, "completed"); st != http.StatusOK {
			t.Fatalf("completed: %d", st)
		}
		if in := e.waitStatus(id, 5*time.Second, core.StatusSucceeded); in.ExternalID != c.SID {
			t.Fatalf("external id %q, want %q", in.ExternalID, c.SID)
		}
		one(id)
	})
	t.Run("the callback arrives while the create's answer is still awaited", func(t *testing.T) {
		// The answer is held past the adapter's timeout; Twilio calls back
		// meanwhile. The evidence is recorded in flight and the attempt's
		// unknown outcome then ends succeeded, never needs-human.
		fk.Inject(fakes.Fault{Kind: fakes.Hang})
		id := e.mustSubmit("twilio-early", sms("early callback"))
		var c []fakes.TwilioResource
		e.eventually(5*time.Second, "the SMS exists at Twilio", func() bool { c = fk.CreatedWith("intent=" + id); return len(c) == 1 })
		if st := callback(c[0].SID, "sent"); st != http.StatusOK {
			t.Fatalf("sent: %d", st)
		}
		in := e.waitStatus(id, 15*time.Second, core.StatusSucceeded)
		if strings.Contains(in.StatusReason, "without a human") {
			t.Fatalf("went through needs-human: %s (%s)", trail(in), in.StatusReason)
		}
		if in.ExternalID != c[0].SID {
			t.Fatalf("external id %q, want %q", in.ExternalID, c[0].SID)
		}
		one(id)
	})
	t.Run("a documented rejection fails without a retry", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.ProviderError, Status: 400, Code: "21610", Description: "Attempt to send to unsubscribed recipient"})
		id := e.mustSubmit("twilio-reject", sms("stop"))
		in := e.waitStatus(id, 15*time.Second, core.StatusFailed)
		if n := fk.RequestsWith("intent=" + id); n != 1 || len(fk.CreatedWith("intent="+id)) != 0 || in.AttemptCount != 1 {
			t.Fatalf("rejected: %d requests, %s", n, trail(in))
		}
	})
	t.Run("429 is honoured: retried later, one SMS", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.RateLimit, RetryAfter: time.Second})
		start := time.Now()
		id := e.mustSubmit("twilio-429", sms("slow down"))
		e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		if n, c := fk.RequestsWith("intent="+id), len(fk.CreatedWith("intent="+id)); n != 2 || c != 1 || time.Since(start) < time.Second {
			t.Fatalf("%d requests, %d created after %v; want 2 and 1, a second apart", n, c, time.Since(start))
		}
	})
	t.Run("Prefer: wait answers succeeded inline", func(t *testing.T) {
		r := e.submitWait(botToken, "twilio-inline", sms("inline"), 5)
		var in core.Intent
		r.json(t, &in)
		if r.status != http.StatusCreated || in.Status != core.StatusSucceeded || in.ExternalID != one(in.ID).SID {
			t.Fatalf("inline: %d %s", r.status, r.body)
		}
	})
}
