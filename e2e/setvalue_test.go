package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/sandbox"
)

// Issue 50, finding 4: natural idempotence. The sandbox's update_message
// sets a message's text; on an account with neither keys nor lookup, an
// update whose response was dropped is retried (repeating it changes
// nothing) and ends succeeded, never needs-human; an older update retried
// after a newer one of the same message went out is superseded and the
// message keeps the newer text.
func TestSetToValueUpdateIsRetriedAndNeverReordered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	acct := "acct-upd"
	e.faults(fmt.Sprintf(`{"account":%q,"capabilities":{"idempotencyKeys":false,"lookup":false}}`, acct))
	update := func(msg, text string) string {
		return fmt.Sprintf(`{"kind":"action","provider":"sandbox","account":%q,"action":"update_message","target":%q,"payload":{"text":%q},"grant":{"id":"g-1","version":1}}`,
			acct, msg, text)
	}
	newMessage := func(key string) string {
		t.Helper()
		id := e.mustSubmit(key, intentBody(acct, "chan-upd", "first draft"))
		return e.waitStatus(id, 10*time.Second, core.StatusSucceeded).ExternalID
	}
	text := func(msg string) sandbox.MessageText {
		t.Helper()
		var m sandbox.MessageText
		e.sandboxGet("/_sandbox/messages/"+msg, &m)
		return m
	}
	neverNeedsHuman := func(id string) {
		t.Helper()
		for _, a := range e.intent(id).Attempts {
			if a.Result == core.AttemptResult(core.StatusNeedsHuman) {
				t.Fatalf("%s went to needs-human: %s", id, trail(e.intent(id)))
			}
		}
	}

	t.Run("dropped response retried", func(t *testing.T) {
		msg := newMessage("upd-msg-1")
		e.faults(fmt.Sprintf(`{"account":%q,"faults":[{"kind":"drop_after_commit","match":{"target":%q}}],"append":true}`, acct, msg))
		id := e.mustSubmit("upd-1", update(msg, "final text"))
		in := e.waitStatus(id, 15*time.Second, core.StatusSucceeded)
		if len(in.Attempts) != 2 || in.Attempts[0].Result != core.ResultUnknownOutcome {
			t.Fatalf("want one ambiguous attempt then a success: %s", trail(in))
		}
		neverNeedsHuman(id)
		if m := text(msg); m.Text != "final text" || m.Updates != 2 {
			t.Fatalf("message %s: %+v, want the text set (twice, harmlessly)", msg, m)
		}
	})

	t.Run("older retry superseded by a newer update", func(t *testing.T) {
		msg := newMessage("upd-msg-2")
		e.faults(fmt.Sprintf(`{"account":%q,"faults":[{"kind":"drop_after_commit","match":{"target":%q}}],"append":true}`, acct, msg))
		older := e.mustSubmit("upd-old", update(msg, "v1"))
		// Its first send went out ambiguously; its retry waits out the backoff (1 s).
		e.waitStatus(older, 10*time.Second, core.StatusRetryableFailure)
		newer := e.mustSubmit("upd-new", update(msg, "v2"))
		e.waitStatus(newer, 10*time.Second, core.StatusSucceeded)
		in := e.waitStatus(older, 15*time.Second, core.StatusSourceRevised)
		if !strings.Contains(in.StatusReason, "superseded") {
			t.Fatalf("older: %s (%s)", in.Status, in.StatusReason)
		}
		neverNeedsHuman(older)
		if m := text(msg); m.Text != "v2" || m.Updates != 2 || m.SetBy != newer {
			t.Fatalf("message %s: %+v, want the newer text v2 set by %s", msg, m, newer)
		}
		e.assertEffectsStay(older, 1, 300*time.Millisecond)
	})

	t.Run("unknown message refused", func(t *testing.T) {
		id := e.mustSubmit("upd-none", update("sbx_999999", "x"))
		in := e.waitStatus(id, 10*time.Second, core.StatusFailed)
		if in.Attempts[0].Evidence.ProviderCode != "message_not_found" {
			t.Fatalf("evidence %+v", in.Attempts[0].Evidence)
		}
	})
}
