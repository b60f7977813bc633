package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/core"
)

func whatsappText(body string) string {
	return fmt.Sprintf(`{"kind":"reply","provider":"whatsapp","account":"support","action":"send_message","target":"+16505551234","payload":{"type":"text","text":{"body":%q}},"grant":{"id":"g-whatsapp","version":1}}`, body)
}

// WhatsApp against the Cloud API fake (adapters/providers/fakes/whatsapp.go):
// neither keys nor lookup; the signed status webhook naming the intent in
// biz_opaque_callback_data settles what stays uncertain; the GET handshake.
func TestWhatsApp(t *testing.T) {
	t.Parallel()
	const secret = "wa-e2e-app-secret"
	fk := fakes.NewWhatsApp(t, time.Now)
	fk.AddNumber("106540352242922", "wa-e2e-token")
	e := providerEnv(t, "whatsapp", fmt.Sprintf(`{"baseUrl":%q,"timeoutMs":1500,"accounts":{"support":{"phoneNumberId":"106540352242922","accessToken":"wa-e2e-token","appSecret":%q,"verifyToken":"wa-verify"}}}`, fk.URL(), secret))
	hook := e.api.URL + "/v1/webhooks/whatsapp/support"
	one := func(id string) fakes.WhatsAppMessage {
		t.Helper()
		s := fk.SentWith(id)
		if len(s) != 1 {
			t.Fatalf("%s: %d messages, want 1", id, len(s))
		}
		return s[0]
	}

	t.Run("the verification handshake", func(t *testing.T) {
		st, ct, body, err := fk.Verify(hook, "subscribe", "wa-verify", "1158201444")
		if err != nil || st != http.StatusOK || body != "1158201444" || ct != "text/plain; charset=utf-8" {
			t.Fatalf("handshake: %d %q %q %v", st, ct, body, err)
		}
		if st, _, _, _ := fk.Verify(hook, "subscribe", "guess", "1158201444"); st != http.StatusForbidden {
			t.Fatalf("wrong verify token: %d", st)
		}
	})
	t.Run("happy path", func(t *testing.T) {
		id := e.mustSubmit("wa-happy", whatsappText("shipped"))
		in := e.waitStatus(id, 15*time.Second, core.StatusSucceeded)
		if m := one(id); in.ExternalID != m.ID || m.To != "+16505551234" {
			t.Fatalf("external id %q, message %+v", in.ExternalID, m)
		}
	})
	t.Run("response lost: needs-human with one message, then the signed status settles it", func(t *testing.T) {
		before := fk.Requests()
		fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
		id := e.mustSubmit("wa-drop", whatsappText("lost"))
		in := e.waitStatus(id, 15*time.Second, core.StatusNeedsHuman)
		m := one(id)
		if fk.Requests()-before != 1 || in.AttemptCount != 1 {
			t.Fatalf("%d requests: %s", fk.Requests()-before, trail(in))
		}
		items := e.tableItems()
		body := fk.StatusPayload("delivered", 0, m.ID)
		if st, err := fk.Deliver(hook, "not-the-app-secret", body); err != nil || st != http.StatusUnauthorized {
			t.Fatalf("wrongly signed: %d %v", st, err)
		}
		if n := e.tableItems(); n != items || e.intent(id).Status != core.StatusNeedsHuman {
			t.Fatalf("a refused webhook stored %d items", n-items)
		}
		if st, err := fk.Deliver(hook, secret, body); err != nil || st != http.StatusOK {
			t.Fatalf("signed: %d %v", st, err)
		}
		in = e.waitStatus(id, 5*time.Second, core.StatusSucceeded)
		if in.ExternalID != m.ID {
			t.Fatalf("external id %q, want %q", in.ExternalID, m.ID)
		}
		if st, _ := fk.Deliver(hook, secret, body); st != http.StatusOK || e.intent(id).Version != in.Version {
			t.Fatalf("a replay changed the intent (%d)", st)
		}
	})
	t.Run("one payload, two statuses: failed is evidence, read settles the other", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.ErrorAfterCommit}, fakes.Fault{Kind: fakes.ErrorAfterCommit})
		a := e.mustSubmit("wa-batch-a", whatsappText("a"))
		b := e.mustSubmit("wa-batch-b", whatsappText("b"))
		e.waitStatus(a, 15*time.Second, core.StatusNeedsHuman)
		e.waitStatus(b, 15*time.Second, core.StatusNeedsHuman)
		ma, mb := one(a), one(b)
		batch := fk.Statuses(fakes.WhatsAppStatus{ID: ma.ID, Status: "failed", ErrorCode: 131026}, fakes.WhatsAppStatus{ID: mb.ID, Status: "read"})
		if st, err := fk.Deliver(hook, secret, batch); err != nil || st != http.StatusOK {
			t.Fatalf("batch: %d %v", st, err)
		}
		ia := e.intent(a)
		if w := webhookEntries(ia); ia.Status != core.StatusNeedsHuman || len(w) != 1 || w[0].Evidence.ProviderCode != "failed (error 131026)" {
			t.Fatalf("failed: %s", trail(ia))
		}
		if ib := e.waitStatus(b, 5*time.Second, core.StatusSucceeded); ib.ExternalID != mb.ID {
			t.Fatalf("read: %s", trail(ib))
		}
	})
	t.Run("a documented rejection fails without a retry", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.ProviderError, Status: 400, Code: "131047", Description: "Re-engagement message"})
		before := fk.Requests()
		id := e.mustSubmit("wa-reject", whatsappText("late"))
		in := e.waitStatus(id, 15*time.Second, core.StatusFailed)
		if n := fk.Requests() - before; n != 1 || len(fk.SentWith(id)) != 0 || in.AttemptCount != 1 {
			t.Fatalf("rejected: %d requests, %s", n, trail(in))
		}
	})
	t.Run("rate limit (code 130429 as HTTP 400) is honoured", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.RateLimit})
		id := e.mustSubmit("wa-429", whatsappText("slow"))
		in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		if one(id); in.AttemptCount != 2 || in.Attempts[0].Evidence.ProviderCode != "130429" || in.Attempts[0].Evidence.HTTPStatus != 400 {
			t.Fatalf("%s", trail(in))
		}
	})
	t.Run("Prefer: wait answers succeeded inline", func(t *testing.T) {
		r := e.submitWait(botToken, "wa-inline", whatsappText("inline"), 5)
		var in core.Intent
		r.json(t, &in)
		if r.status != http.StatusCreated || in.Status != core.StatusSucceeded || in.ExternalID != one(in.ID).ID {
			t.Fatalf("inline: %d %s", r.status, r.body)
		}
	})
}
