package slack_test

import (
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/slack"
	"github.com/botharness/outbox/core"
)

// update_message (chat.update) and add_reaction (reactions.add) against the
// fake, over real HTTP: declared set-to-value; an update sets the text; a
// dropped answer is an unknown outcome whose retry changes nothing more;
// already_reacted is a success; documented refusals are rejections.
func TestSetToValueActionsAgainstFake(t *testing.T) {
	fk := fakes.NewSlack(t, time.Now)
	fk.AddToken("xoxb-secret-token", "T1", "B1")
	fk.AddChannel("C1")
	p := newProvider(t, fk.URL())
	posted, err := p.Send(ctx, request("it_post", `{"text":"draft"}`))
	if err != nil {
		t.Fatal(err)
	}
	ts := posted.ExternalID
	act := func(id, action, payload string) (core.SendResult, error) {
		r := request(id, payload)
		r.Action = action
		return p.Send(ctx, r)
	}
	for _, action := range []string{slack.ActionUpdateMessage, slack.ActionAddReaction} {
		caps, err := p.Capabilities(ctx, "T1", action)
		if err != nil || !caps.NaturallyIdempotent || caps.Lookup || caps.IdempotencyKeys {
			t.Fatalf("%s declares %+v %v", action, caps, err)
		}
	}
	if got := p.ValueSubject(slack.ActionUpdateMessage, "C1", []byte(`{"ts":"`+ts+`","text":"x"}`)); got != "C1/"+ts {
		t.Fatalf("subject %q", got)
	}
	if got := p.ValueSubject(slack.ActionAddReaction, "C1", []byte(`{"timestamp":"`+ts+`","name":"eyes"}`)); got != "" {
		t.Fatalf("reactions commute, subject %q", got)
	}

	upd := `{"ts":"` + ts + `","text":"final"}`
	fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
	if _, err := act("it_upd", slack.ActionUpdateMessage, upd); core.ClassOf(err) != core.ClassUnknownOutcome {
		t.Fatalf("dropped update: %v", err)
	}
	res, err := act("it_upd", slack.ActionUpdateMessage, upd)
	if err != nil || res.ExternalID != ts {
		t.Fatalf("retried update: %+v %v", res, err)
	}
	if m := fk.Messages("C1"); len(m) != 1 || m[0].Text != "final" || m[0].Edited == nil || fk.Posts() != 1 || fk.Edits() != 2 {
		t.Fatalf("after the update: %+v, %d posts, %d edits", m, fk.Posts(), fk.Edits())
	}

	react := `{"timestamp":"` + ts + `","name":"eyes"}`
	if _, err := act("it_r", slack.ActionAddReaction, react); err != nil {
		t.Fatal(err)
	}
	res, err = act("it_r", slack.ActionAddReaction, react)
	if err != nil || res.Evidence.ProviderCode != "already_reacted" || res.ExternalID != ts+":eyes" {
		t.Fatalf("a repeated reaction must be a success: %+v %v", res, err)
	}
	if fk.Reactions() != 1 {
		t.Fatalf("%d reactions", fk.Reactions())
	}

	for name, c := range map[string]struct{ action, payload, code string }{
		"unknown message":      {slack.ActionUpdateMessage, `{"ts":"1.000001","text":"x"}`, "message_not_found"},
		"update without text":  {slack.ActionUpdateMessage, `{"ts":"` + ts + `"}`, "no_text"},
		"reaction bad name":    {slack.ActionAddReaction, `{"timestamp":"` + ts + `","name":"a b"}`, "invalid_name"},
		"reaction, no message": {slack.ActionAddReaction, `{"timestamp":"1.000001","name":"eyes"}`, "message_not_found"},
	} {
		_, err := act("it_bad", c.action, c.payload)
		if core.ClassOf(err) != core.ClassRejectedInput || core.EvidenceOf(err).ProviderCode != c.code {
			t.Errorf("%s: %v %+v", name, err, core.EvidenceOf(err))
		}
	}
	if _, err := act("it_bad", slack.ActionUpdateMessage, `{"text":"no ts"}`); core.ClassOf(err) != core.ClassRejectedInput {
		t.Errorf("update without ts: %v", err)
	}
	// Only the author may update: another bot's message is refused.
	other := fk.AddMessage("C1", fakes.SlackMessage{Type: "message", Text: "theirs", BotID: "B9"})
	if _, err := act("it_x", slack.ActionUpdateMessage, `{"ts":"`+other+`","text":"x"}`); core.EvidenceOf(err).ProviderCode != "cant_update_message" {
		t.Errorf("another bot's message: %v", err)
	}
}
