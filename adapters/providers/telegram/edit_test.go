package telegram_test

import (
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/telegram"
	"github.com/botharness/outbox/core"
)

// edit_message (editMessageText) against the fake, over real HTTP: declared
// set-to-value; the text is set; a dropped answer is an unknown outcome and
// its retry, refused by the Bot API as "message is not modified", is a
// success; an unknown message is a rejection.
func TestEditMessageAgainstFake(t *testing.T) {
	fk := fakes.NewTelegram(t, time.Now)
	fk.AddBot(token, 123456)
	fk.AddChat(42, "private")
	p := newProvider(t, fk.URL())
	sent, err := p.Send(ctx, request("it_send", "42", `{"text":"draft"}`))
	if err != nil || sent.ExternalID != "42:1" {
		t.Fatalf("send: %+v %v", sent, err)
	}
	edit := func(payload string) (core.SendResult, error) {
		r := request("it_edit", "42", payload)
		r.Action = telegram.ActionEditMessage
		return p.Send(ctx, r)
	}
	caps, err := p.Capabilities(ctx, "bot1", telegram.ActionEditMessage)
	if err != nil || !caps.NaturallyIdempotent || caps.Lookup || caps.IdempotencyKeys {
		t.Fatalf("edit_message declares %+v %v", caps, err)
	}
	if got := p.ValueSubject(telegram.ActionEditMessage, "42", []byte(`{"message_id":1,"text":"x"}`)); got != "42/1" {
		t.Fatalf("subject %q", got)
	}
	fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
	if _, err := edit(`{"message_id":1,"text":"final"}`); core.ClassOf(err) != core.ClassUnknownOutcome {
		t.Fatalf("dropped edit: %v", err)
	}
	res, err := edit(`{"message_id":1,"text":"final"}`)
	if err != nil || res.ExternalID != "42:1" || res.Evidence.ProviderCode != "400" {
		t.Fatalf("the retry, not modified, must be a success: %+v %v", res, err)
	}
	if m := fk.Messages(); len(m) != 1 || m[0].Text != "final" || fk.Edits() != 1 || fk.Sends() != 1 {
		t.Fatalf("after the edit: %+v, %d edits", m, fk.Edits())
	}
	if res, err := edit(`{"message_id":1,"text":"again"}`); err != nil || res.ExternalID != "42:1" {
		t.Fatalf("a changing edit: %+v %v", res, err)
	}
	for name, payload := range map[string]string{
		"unknown message": `{"message_id":9,"text":"x"}`,
		"empty text":      `{"message_id":1,"text":" "}`,
	} {
		if _, err := edit(payload); core.ClassOf(err) != core.ClassRejectedInput {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := edit(`{"text":"no id"}`); core.ClassOf(err) != core.ClassRejectedInput || fk.Edits() != 2 {
		t.Errorf("edit without message_id: %v (%d edits)", err, fk.Edits())
	}
}
