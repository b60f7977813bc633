package ses_test

import (
	"strings"
	"testing"

	"github.com/botharness/outbox/adapters/providers/ses"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// AWSDeliverySample is AWS's documented example of a Delivery event
// published to SNS (https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-examples.html#event-publishing-retrieving-sns-delivery),
// with its two custom tags replaced by the outbox's.
const AWSDeliverySample = `{
  "eventType": "Delivery",
  "mail": {
    "timestamp": "2016-10-19T23:20:52.240Z",
    "source": "sender@example.com",
    "sourceArn": "arn:aws:ses:us-east-1:123456789012:identity/sender@example.com",
    "sendingAccountId": "123456789012",
    "messageId": "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000",
    "destination": ["recipient@example.com"],
    "headersTruncated": false,
    "headers": [
      {"name": "From", "value": "sender@example.com"},
      {"name": "To", "value": "recipient@example.com"},
      {"name": "Subject", "value": "Message sent from Amazon SES"},
      {"name": "MIME-Version", "value": "1.0"},
      {"name": "Content-Type", "value": "text/html; charset=UTF-8"},
      {"name": "Content-Transfer-Encoding", "value": "7bit"}
    ],
    "commonHeaders": {
      "from": ["sender@example.com"],
      "to": ["recipient@example.com"],
      "messageId": "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000",
      "subject": "Message sent from Amazon SES"
    },
    "tags": {
      "ses:configuration-set": ["ConfigSet"],
      "ses:source-ip": ["192.0.2.0"],
      "ses:from-domain": ["example.com"],
      "ses:caller-identity": ["ses_user"],
      "ses:outgoing-ip": ["192.0.2.0"],
      "outbox_intent_id": ["it_sample"],
      "outbox_account": ["mail"]
    }
  },
  "delivery": {
    "timestamp": "2016-10-19T23:21:04.133Z",
    "processingTimeMillis": 11893,
    "recipients": ["recipient@example.com"],
    "smtpResponse": "250 2.6.0 Message received",
    "reportingMTA": "mta.example.com"
  }
}`

func TestDecodeAWSSampleEvents(t *testing.T) {
	accounts := map[string]ses.Account{"mail": {From: "sender@example.com", ConfigurationSet: "ConfigSet"}, "other": {From: "x@example.com", ConfigurationSet: "Elsewhere"}}
	w := &ses.Webhook{Accounts: func(n string) (ses.Account, bool) { a, ok := accounts[n]; return a, ok }}
	account, evs, ok, err := w.DecodeNotification([]byte(AWSDeliverySample))
	if !ok || err != nil || account != "mail" || len(evs) != 1 {
		t.Fatalf("%s %+v %v %v", account, evs, ok, err)
	}
	ev := evs[0]
	if ev.Kind != webhook.EventStatus || ev.Status != core.DeliveryDelivered || ev.IntentID != "it_sample" ||
		ev.MessageID != "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000" || ev.OccurredAt.Format("15:04:05") != "23:21:04" {
		t.Fatalf("%+v", ev)
	}
	// AWS's bounce example (shortened to what the dialect reads).
	bounce := `{"eventType":"Bounce","bounce":{"bounceType":"Permanent","bounceSubType":"General","bouncedRecipients":[{"emailAddress":"recipient@example.com","action":"failed","status":"5.1.1","diagnosticCode":"smtp; 550 5.1.1 user unknown"}],"timestamp":"2017-08-05T00:41:02.669Z","feedbackId":"01000157c44f053b-61b59c11-9236-11e6-8f96-7be8aexample-000000","reportingMTA":"dsn; mta.example.com"},"mail":{"timestamp":"2017-08-05T00:40:02.012Z","source":"Sender Name <sender@example.com>","messageId":"EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000","destination":["recipient@example.com"],"tags":{"ses:configuration-set":["ConfigSet"],"outbox_intent_id":["it_sample"],"outbox_account":["mail"]}}}`
	_, evs, ok, err = w.DecodeNotification([]byte(bounce))
	if !ok || err != nil || evs[0].Kind != webhook.EventFailure || evs[0].Status != "bounce: Permanent/General" || !strings.HasPrefix(evs[0].EventID, "Bounce:01000157") {
		t.Fatalf("bounce: %+v %v", evs, err)
	}
	// Not ours: no outbox_account tag, an unknown account, not JSON.
	for _, msg := range []string{
		strings.Replace(AWSDeliverySample, `"outbox_account": ["mail"]`, `"x": ["y"]`, 1),
		strings.Replace(AWSDeliverySample, `"outbox_account": ["mail"]`, `"outbox_account": ["nobody"]`, 1),
		`{"Type":"SubscriptionConfirmation"}`, `not json`,
	} {
		if _, _, ok, _ := w.DecodeNotification([]byte(msg)); ok {
			t.Errorf("claimed: %.60s", msg)
		}
	}
	// Another account's configuration set: claimed and refused.
	if _, _, ok, err := w.DecodeNotification([]byte(strings.Replace(AWSDeliverySample, `"outbox_account": ["mail"]`, `"outbox_account": ["other"]`, 1))); !ok || err == nil {
		t.Errorf("another configuration set: %v %v", ok, err)
	}
}
