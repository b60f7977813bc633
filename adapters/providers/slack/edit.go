package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Set-to-value actions (natural idempotence, issue 50). Both declare
// NaturallyIdempotent and neither keys nor lookup: repeating them changes
// nothing, so an ambiguous failure is retried under the backoff.
//
//   - update_message is chat.update
//     (https://docs.slack.dev/reference/methods/chat.update): the intent's
//     target is the channel, its payload chat.update's arguments with the
//     message's "ts" (required) and the new "text"/"blocks". It sets the
//     message's content, so a newer update of the same message (channel and
//     ts) supersedes an older one's retries (ValueSubject).
//   - add_reaction is reactions.add
//     (https://docs.slack.dev/reference/methods/reactions.add): target the
//     channel, payload {"timestamp": ts, "name": "thumbsup"}. Slack answers
//     a repeat with the error already_reacted, which proves the reaction is
//     there: a success. Reactions commute, so there is nothing to order.
//
// Lookup scopes: chat.postMessage's lookup reads conversations.history,
// which needs channels:history for public channels and groups:history,
// im:history, mpim:history for private channels, DMs and group DMs
// (https://docs.slack.dev/reference/methods/conversations.history); edits
// need chat:write, reactions reactions:write.
const (
	ActionUpdateMessage = "update_message"
	ActionAddReaction   = "add_reaction"
)

func setsValue(action string) bool {
	return action == ActionUpdateMessage || action == ActionAddReaction
}

// ValueSubject names the message an update_message sets: "<channel>/<ts>".
func (p *Provider) ValueSubject(action, target string, payload []byte) string {
	if action != ActionUpdateMessage {
		return ""
	}
	var a struct {
		TS string `json:"ts"`
	}
	if json.Unmarshal(payload, &a) != nil || a.TS == "" {
		return ""
	}
	return target + "/" + a.TS
}

// edit calls chat.update or reactions.add.
func (p *Provider) edit(ctx context.Context, a Account, r core.SendRequest) (core.SendResult, error) {
	args, err := httpx.ObjectArgs(r.Payload, r.Action+" arguments")
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	method, need := "chat.update", "ts"
	if r.Action == ActionAddReaction {
		method, need = "reactions.add", "timestamp"
	}
	var ts string
	if raw, ok := args[need]; !ok || json.Unmarshal(raw, &ts) != nil || ts == "" {
		return core.SendResult{}, httpx.InvalidPayload(Name, errors.New(method+" needs \""+need+"\": the message's ts"))
	}
	if ch, ok := args["channel"]; ok {
		var s string
		if json.Unmarshal(ch, &s) != nil || s != r.Target {
			return core.SendResult{}, httpx.InvalidPayload(Name, errors.New("payload channel differs from the intent target"))
		}
	}
	args["channel"], _ = json.Marshal(r.Target)
	body, err := json.Marshal(args)
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+a.Token)
	h.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := httpx.Call(ctx, p.client, p.cfg.Timeout, http.MethodPost, p.cfg.BaseURL+"/"+method, h, body, httpx.DefaultBodyLimit)
	if err != nil {
		return core.SendResult{}, err
	}
	if r.Action == ActionAddReaction {
		var ar apiResponse
		if resp.ReadErr == nil && json.Unmarshal(resp.Body, &ar) == nil && ar.OK != nil &&
			(*ar.OK || ar.Error == "already_reacted") {
			// reactions.add answers no ts: the reaction is named by the
			// message and the emoji. already_reacted proves it is there.
			code := "ok"
			if !*ar.OK {
				code = ar.Error
			}
			var name string
			_ = json.Unmarshal(args["name"], &name)
			return core.SendResult{ExternalID: ts + ":" + name, Evidence: core.Evidence{HTTPStatus: resp.Status, ProviderCode: code,
				Extra: map[string]string{"channel": r.Target, "ts": ts}}}, nil
		}
	}
	return classify(resp, p.cfg.Now())
}
