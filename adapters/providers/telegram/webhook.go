package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// Webhook is the Bot API's webhook dialect
// (https://core.org/bots/api#update): every request carries the
// secret_token given to setWebhook in X-Telegram-Bot-Api-Secret-Token, and
// the body is one Update object. The route's account is the bot's name (the
// key of accounts in OUTBOX_PROVIDER_CONFIG).
//
// The event id is "update:<update_id>". A "message" from a person
// (from.is_bot false) is inbound and forwarded once, the Message object being
// what reaches the inbox. Telegram does not send a bot its own messages, so
// there are no echoes; every other update kind (edited messages, channel
// posts, callback queries, ...) and messages from bots are recorded and
// ignored, like the sandbox's unknown types.
type Webhook struct {
	// Accounts returns the configured account (Provider.Account).
	Accounts func(name string) (Account, bool)
}

var errTelegramSecret = errors.New("telegram secret token: missing or does not match")

// Verify compares the secret token header with the account's webhook secret
// in constant time. An unknown account, or one without a webhook secret, is
// refused (fails closed).
func (t *Webhook) Verify(_ context.Context, account string, headers map[string]string, _ []byte) error {
	var a Account
	if t.Accounts != nil {
		a, _ = t.Accounts(account)
	}
	if !VerifySecretToken(a.WebhookSecret, plugin.Header(headers, SecretTokenHeader)) {
		return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, errTelegramSecret)
	}
	return nil
}

type telegramMessage struct {
	MessageID int64 `json:"message_id"`
	Date      int64 `json:"date"`
	From      *struct {
		IsBot bool `json:"is_bot"`
	} `json:"from"`
}

// telegramKinds are the Update fields naming its kind, in the Bot API's order.
var telegramKinds = []string{
	"message", "edited_message", "channel_post", "edited_channel_post",
	"business_connection", "business_message", "edited_business_message", "deleted_business_messages",
	"message_reaction", "message_reaction_count", "inline_query", "chosen_inline_result",
	"callback_query", "shipping_query", "pre_checkout_query", "purchased_paid_media",
	"poll", "poll_answer", "my_chat_member", "chat_member", "chat_join_request",
	"chat_boost", "removed_chat_boost",
}

// Decode parses a verified Update.
func (t *Webhook) Decode(account string, _ map[string]string, body []byte) (webhook.ProviderEvent, error) {
	var ev webhook.ProviderEvent
	bad := func(field, msg string) (webhook.ProviderEvent, error) {
		return webhook.ProviderEvent{}, &core.ValidationError{Code: core.CodeInvalidField, Field: field, Message: msg}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var u map[string]json.RawMessage
	if err := dec.Decode(&u); err != nil || dec.More() || u == nil {
		return ev, &core.ValidationError{Code: core.CodeMalformedJSON, Message: "the body is not one JSON object"}
	}
	var id int64
	if raw, ok := u["update_id"]; !ok || json.Unmarshal(raw, &id) != nil {
		return bad("update_id", "update_id is required and must be an integer")
	}
	ev = webhook.ProviderEvent{Account: account, EventID: "update:" + strconv.FormatInt(id, 10), Kind: webhook.EventOther, Type: "update"}
	for _, k := range telegramKinds {
		if _, ok := u[k]; ok {
			ev.Type = k
			break
		}
	}
	if ev.Type != "message" {
		return ev, nil
	}
	raw := u["message"]
	var m telegramMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return bad("message", "message must be a Message object")
	}
	if m.Date > 0 {
		ev.OccurredAt = time.Unix(m.Date, 0).UTC()
	}
	if m.From != nil && !m.From.IsBot {
		ev.Kind, ev.Inbound = webhook.EventInbound, raw
	}
	return ev, nil // core validates the rest
}
