// Package operatorevents delivers core.OperatorEvent to people: an SNS topic
// in AWS (email, Slack, a pager subscribe to it) or, locally, a Standard
// Webhooks-signed POST to OUTBOX_OPERATOR_WEBHOOK_URL. Both implement
// core.OperatorEvents as the subscriber of notify.OperatorNotifier, which puts
// the once-per-id ledger, the log line and the metric in front of them. Both
// carry the event id (webhook-id header, SNS message attribute "eventId") so
// a subscriber can drop the rare repeat a crash between publishing and
// recording it causes.
//
// Any producer builds a core.OperatorEvent with a stable ID, a Type,
// Provider/Account (and Fields) and calls wire.App.OperatorEvents.Publish.
package operatorevents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/botharness/outbox/adapters/webhooksig"
	"github.com/botharness/outbox/core"
)

// Payload is the JSON body of an operator event (the Standard Webhooks
// envelope: type, timestamp, data). Never a payload body or a secret.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is what an operator needs to act.
type Data struct {
	EventID        string            `json:"eventId"`
	IntentID       string            `json:"intentId,omitempty"`
	Bot            string            `json:"bot,omitempty"`
	Provider       string            `json:"provider,omitempty"`
	Account        string            `json:"account,omitempty"`
	Action         string            `json:"action,omitempty"`
	Reason         string            `json:"reason,omitempty"`
	Attempts       int               `json:"attempts,omitempty"`
	Since          time.Time         `json:"since"`
	WaitingSeconds int64             `json:"waitingSeconds"`
	ConsoleURL     string            `json:"consoleUrl,omitempty"`
	Fields         map[string]string `json:"fields,omitempty"`
}

// Render builds the payload of ev at now. consoleBase is the console's URL
// (".../console/"); the link opens the intent's page.
func Render(ev core.OperatorEvent, consoleBase string, now time.Time) Payload {
	d := Data{EventID: ev.ID, IntentID: ev.IntentID, Bot: ev.Bot, Provider: ev.Provider, Account: ev.Account, Action: ev.Action,
		Reason: ev.Reason, Attempts: ev.Attempts, Since: ev.At.UTC(), Fields: ev.Fields}
	if !ev.At.IsZero() && now.After(ev.At) {
		d.WaitingSeconds = int64(now.Sub(ev.At) / time.Second)
	}
	if consoleBase != "" {
		d.ConsoleURL = ConsoleLink(consoleBase, ev.IntentID)
	}
	return Payload{Type: ev.Type, Timestamp: now.UTC(), Data: d}
}

// ConsoleLink is the console URL of an intent's page (or the console itself).
func ConsoleLink(base, intentID string) string {
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	if intentID == "" {
		return base
	}
	return base + "#/intents/" + url.PathEscape(intentID)
}

// Webhook POSTs each event, signed with Standard Webhooks (webhook-id is the
// event id), to URL. A non-2xx answer is an error (the notifier retries).
type Webhook struct {
	URL         string
	Secret      string // "whsec_..."
	ConsoleBase string
	Client      *http.Client
	Now         func() time.Time
}

// Publish implements core.OperatorEvents.
func (w *Webhook) Publish(ctx context.Context, ev core.OperatorEvent) error {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	at := now().UTC()
	body, err := json.Marshal(Render(ev, w.ConsoleBase, at))
	if err != nil {
		return err
	}
	sig, err := webhooksig.Sign(ev.ID, at, body, w.Secret)
	if err != nil {
		return fmt.Errorf("sign operator event: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhooksig.HeaderID, ev.ID)
	req.Header.Set(webhooksig.HeaderTimestamp, fmt.Sprint(at.Unix()))
	req.Header.Set(webhooksig.HeaderSignature, sig)
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post operator event: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("post operator event: subscriber answered %d", resp.StatusCode)
	}
	return nil
}

// SNSAPI is the part of the SNS client the publisher uses.
type SNSAPI interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// SNS publishes each event to a topic: the JSON payload as the message, a
// short subject for email subscribers, and eventId/type as attributes for
// subscription filter policies and deduplication.
type SNS struct {
	Client      SNSAPI
	TopicArn    string
	ConsoleBase string
	Now         func() time.Time
}

// Publish implements core.OperatorEvents.
func (s *SNS) Publish(ctx context.Context, ev core.OperatorEvent) error {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	body, err := json.Marshal(Render(ev, s.ConsoleBase, now()))
	if err != nil {
		return err
	}
	_, err = s.Client.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(s.TopicArn),
		Subject:  aws.String(Subject(ev)),
		Message:  aws.String(string(body)),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{
			"eventId": {DataType: aws.String("String"), StringValue: aws.String(ev.ID)},
			"type":    {DataType: aws.String("String"), StringValue: aws.String(ev.Type)},
		},
	})
	if err != nil {
		return fmt.Errorf("sns publish operator event: %w", err)
	}
	return nil
}

// Subject is a one-line summary (SNS allows 100 ASCII characters).
func Subject(ev core.OperatorEvent) string {
	var s string
	switch ev.Type {
	case core.OperatorEventNeedsHuman:
		s = "outbox: intent needs a decision"
	case core.OperatorEventFailed:
		s = "outbox: intent failed"
	case core.OperatorEventExpired:
		s = "outbox: intent expired after attempts"
	default:
		s = "outbox: " + ev.Type
	}
	if ev.Provider != "" {
		s += " (" + ev.Provider + "/" + ev.Account + ")"
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	if len(b) > 100 {
		b = b[:100]
	}
	return string(b)
}

// ErrNoSecret: a webhook URL without a signing secret.
var ErrNoSecret = errors.New("OUTBOX_OPERATOR_WEBHOOK_SECRET (whsec_...) is required with OUTBOX_OPERATOR_WEBHOOK_URL")
