package telegram

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// ActionEditMessage is editMessageText
// (https://core.telegram.org/bots/api#editmessagetext): the intent's target
// is the chat id, its payload editMessageText's parameters with the
// message_id (required) and the new text. It sets the message's text: a
// set-to-value action (Capabilities.NaturallyIdempotent), ordered per
// message (ValueSubject), retried after an ambiguous failure.
//
// A repeat that finds the text already set is refused by the Bot API with
// 400 and the description "Bad Request: message is not modified: …". The
// Bot API gives that answer no code of its own (error_code is 400, as for
// every bad request), so this one answer is told by its description's
// documented prefix: it proves the message holds the text, a success.
const ActionEditMessage = "edit_message"

const notModified = "Bad Request: message is not modified"

// ValueSubject names the message an edit sets: "<chat>/<message_id>".
func (p *Provider) ValueSubject(action, target string, payload []byte) string {
	if action != ActionEditMessage {
		return ""
	}
	var a struct {
		MessageID json.Number `json:"message_id"`
	}
	if json.Unmarshal(payload, &a) != nil || a.MessageID == "" {
		return ""
	}
	return target + "/" + a.MessageID.String()
}

// editMessageID is the message an editMessageText body built by buildBody edits.
func editMessageID(body []byte) (int64, error) {
	var a struct {
		MessageID *int64 `json:"message_id"`
	}
	if json.Unmarshal(body, &a) != nil || a.MessageID == nil || *a.MessageID <= 0 {
		return 0, errors.New("editMessageText needs \"message_id\": the message to edit")
	}
	return *a.MessageID, nil
}

// classifyEdit is classify, with "message is not modified" as a success.
func classifyEdit(resp *httpx.Response, target string, messageID int64, now time.Time) (core.SendResult, error) {
	var ar APIResponse
	if resp.ReadErr == nil && json.Unmarshal(resp.Body, &ar) == nil && ar.OK != nil && !*ar.OK &&
		ar.ErrorCode == 400 && strings.HasPrefix(ar.Description, notModified) {
		return core.SendResult{ExternalID: target + ":" + strconv.FormatInt(messageID, 10), Evidence: core.Evidence{HTTPStatus: resp.Status,
			ProviderCode: strconv.Itoa(ar.ErrorCode), Detail: "message is not modified: it already holds this text"}}, nil
	}
	return classify(resp, target, now)
}
