package ses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// ErrNotHTTP: SES events reach the outbox through SNS, never over HTTP.
var ErrNotHTTP = errors.New("ses: events arrive through the SNS subscription, not over HTTP")

// Webhook is SES's dialect: SES event publishing
// (https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html)
// to an SNS topic the stack subscribes the webhook function to (an
// IAM-authenticated Lambda invocation: only that topic may invoke it).
// Locally, make run's gateway feeds such an event to the same handler
// (README, "Connecting a real provider", SES).
//
// The event names its account and intent by the email's tags (mail.tags
// outbox_account and outbox_intent_id); the external id is mail.messageId,
// SendEmail's MessageId.
//
//	Send (SES accepted the email), Delivery, Complaint (it reached the inbox) → status (sent / delivered)
//	Open, Click                                                              → status read
//	Bounce, Reject, Rendering Failure, DeliveryDelay                         → failure evidence (no status change)
//	anything else                                                            → recorded and ignored
type Webhook struct {
	// Accounts returns the configured account.
	Accounts func(name string) (Account, bool)
}

var _ plugin.NotificationDecoder = (*Webhook)(nil)

// Verify refuses every HTTP request.
func (w *Webhook) Verify(context.Context, string, map[string]string, []byte) error {
	return fmt.Errorf("%w: %w", plugin.ErrUnauthenticated, ErrNotHTTP)
}

// Decode refuses (see Verify).
func (w *Webhook) Decode(string, map[string]string, []byte) (webhook.ProviderEvent, error) {
	return webhook.ProviderEvent{}, &core.ValidationError{Code: core.CodeInvalidField, Message: ErrNotHTTP.Error()}
}

// Event is the part of an SES event the dialect reads.
type Event struct {
	EventType        string `json:"eventType"`
	NotificationType string `json:"notificationType"` // the older identity notifications
	Mail             struct {
		Timestamp string              `json:"timestamp"`
		MessageID string              `json:"messageId"`
		Source    string              `json:"source"`
		Tags      map[string][]string `json:"tags"`
	} `json:"mail"`
	Bounce *struct {
		BounceType    string `json:"bounceType"`
		BounceSubType string `json:"bounceSubType"`
		FeedbackID    string `json:"feedbackId"`
		Timestamp     string `json:"timestamp"`
	} `json:"bounce"`
	Complaint *struct {
		FeedbackID string `json:"feedbackId"`
		Timestamp  string `json:"timestamp"`
	} `json:"complaint"`
	Delivery *struct {
		Timestamp  string   `json:"timestamp"`
		Recipients []string `json:"recipients"`
	} `json:"delivery"`
	Reject *struct {
		Reason string `json:"reason"`
	} `json:"reject"`
	Open *struct {
		Timestamp string `json:"timestamp"`
	} `json:"open"`
	Click *struct {
		Timestamp string `json:"timestamp"`
	} `json:"click"`
}

func tag(tags map[string][]string, name string) string {
	if v := tags[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// DecodeNotification claims an SNS message that is an SES event for one of
// the configured accounts (ok false: not ours, another dialect may claim it).
func (w *Webhook) DecodeNotification(message []byte) (string, []webhook.ProviderEvent, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(message))
	var e Event
	if err := dec.Decode(&e); err != nil || dec.More() {
		return "", nil, false, nil
	}
	typ := e.EventType
	if typ == "" {
		typ = e.NotificationType
	}
	account := tag(e.Mail.Tags, TagAccount)
	if typ == "" || e.Mail.MessageID == "" || account == "" || w.Accounts == nil {
		return "", nil, false, nil
	}
	a, ok := w.Accounts(account)
	if !ok {
		return "", nil, false, nil
	}
	if cs := tag(e.Mail.Tags, "ses:configuration-set"); a.ConfigurationSet != "" && cs != "" && cs != a.ConfigurationSet {
		return "", nil, true, &core.ValidationError{Code: core.CodeInvalidField, Field: "mail.tags", Message: "the event's configuration set is not the account's"}
	}
	ev := webhook.ProviderEvent{Account: account, Type: typ, Kind: webhook.EventOther, MessageID: e.Mail.MessageID,
		IntentID: tag(e.Mail.Tags, TagIntent), EventID: typ + ":" + e.Mail.MessageID}
	at := e.Mail.Timestamp
	switch typ {
	case "Send":
		ev.Kind, ev.Status = webhook.EventStatus, core.DeliverySent
	case "Delivery":
		ev.Kind, ev.Status = webhook.EventStatus, core.DeliveryDelivered
		if e.Delivery != nil {
			at = e.Delivery.Timestamp
			ev.EventID += ":" + strings.Join(e.Delivery.Recipients, ",")
		}
	case "Complaint":
		ev.Kind, ev.Status = webhook.EventStatus, core.DeliveryDelivered
		if e.Complaint != nil {
			at, ev.EventID = e.Complaint.Timestamp, typ+":"+e.Complaint.FeedbackID
		}
	case "Open", "Click":
		ev.Kind, ev.Status = webhook.EventStatus, core.DeliveryRead
		if e.Open != nil {
			at = e.Open.Timestamp
		} else if e.Click != nil {
			at = e.Click.Timestamp
		}
		ev.EventID += ":" + at
	case "Bounce":
		ev.Kind, ev.Status = webhook.EventFailure, "bounce"
		if e.Bounce != nil {
			at, ev.EventID = e.Bounce.Timestamp, typ+":"+e.Bounce.FeedbackID
			ev.Status = "bounce: " + e.Bounce.BounceType + "/" + e.Bounce.BounceSubType
		}
	case "Reject":
		ev.Kind, ev.Status = webhook.EventFailure, "reject"
		if e.Reject != nil && e.Reject.Reason != "" {
			ev.Status = "reject: " + e.Reject.Reason
		}
	case "Rendering Failure", "DeliveryDelay":
		ev.Kind, ev.Status = webhook.EventFailure, strings.ToLower(typ)
	}
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		ev.OccurredAt = t.UTC()
	}
	if len(ev.EventID) > 255 {
		ev.EventID = ev.EventID[:255]
	}
	return account, []webhook.ProviderEvent{ev}, true, nil
}
