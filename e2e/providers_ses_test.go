package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/ses"
	"github.com/botharness/outbox/core"
)

// awsDeliverySample is AWS's documented Delivery event
// (https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-examples.html#event-publishing-retrieving-sns-delivery),
// custom tags replaced by the outbox's (MESSAGE_ID, INTENT_ID filled in).
const awsDeliverySample = `{"eventType":"Delivery","mail":{"timestamp":"2016-10-19T23:20:52.240Z","source":"sender@example.com",
"sourceArn":"arn:aws:ses:us-east-1:123456789012:identity/sender@example.com","sendingAccountId":"123456789012","messageId":"MESSAGE_ID",
"destination":["recipient@example.com"],"headersTruncated":false,"headers":[{"name":"From","value":"sender@example.com"},{"name":"To","value":"recipient@example.com"},
{"name":"Subject","value":"Message sent from Amazon SES"},{"name":"MIME-Version","value":"1.0"},{"name":"Content-Type","value":"text/html; charset=UTF-8"},
{"name":"Content-Transfer-Encoding","value":"7bit"}],"commonHeaders":{"from":["sender@example.com"],"to":["recipient@example.com"],"messageId":"MESSAGE_ID",
"subject":"Message sent from Amazon SES"},"tags":{"ses:configuration-set":["outbox-events"],"ses:source-ip":["192.0.2.0"],"ses:from-domain":["example.com"],
"ses:caller-identity":["ses_user"],"ses:outgoing-ip":["192.0.2.0"],"outbox_intent_id":["INTENT_ID"],"outbox_account":["mail"]}},
"delivery":{"timestamp":"2016-10-19T23:21:04.133Z","processingTimeMillis":11893,"recipients":["recipient@example.com"],"smtpResponse":"250 2.6.0 Message received","reportingMTA":"mta.example.com"}}`

func sesEmail(subject string) string {
	return fmt.Sprintf(`{"kind":"action","provider":"ses","account":"mail","action":"send_email","target":"jo@example.com","payload":{"subject":%q,"text":"Your order is on its way."},"grant":{"id":"g-ses","version":1}}`, subject)
}

// SES v2 through the AWS SDK against the SES fake
// (adapters/providers/fakes/ses.go): neither keys nor lookup, the SDK's
// retries off; an SES event published through SNS (fed locally through the
// gateway's stand-in for the subscription) settles what stays uncertain.
func TestSES(t *testing.T) {
	t.Parallel()
	fk := fakes.NewSES(t, time.Now)
	fk.AddIdentity("example.com")
	fk.AddConfigurationSet("outbox-events")
	// The SDK's standard variable: read when the stack builds the adapter.
	// Only this test sets it (t.Setenv is not allowed in a parallel test).
	os.Setenv("AWS_ENDPOINT_URL_SESV2", fk.URL())
	e := providerEnv(t, "ses", `{"region":"us-east-1","timeoutMs":1500,"accounts":{"mail":{"from":"orders@example.com","configurationSet":"outbox-events"}}}`)
	os.Unsetenv("AWS_ENDPOINT_URL_SESV2")
	sent := func(id string) []fakes.SESEmail { return fk.SentWithTag(ses.TagIntent, id) }
	feed := func(body string) int {
		t.Helper()
		resp, err := http.Post(e.api.URL+"/_local/sns/webhook", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	sample := func(messageID, intent string) string {
		return strings.NewReplacer("MESSAGE_ID", messageID, "INTENT_ID", intent).Replace(awsDeliverySample)
	}

	t.Run("happy path", func(t *testing.T) {
		id := e.mustSubmit("ses-happy", sesEmail("happy"))
		in := e.waitStatus(id, 15*time.Second, core.StatusSucceeded)
		if s := sent(id); len(s) != 1 || in.ExternalID != s[0].MessageID || s[0].Tags[ses.TagAccount] != "mail" || s[0].ConfigurationSet != "outbox-events" {
			t.Fatalf("external id %q, sent %+v", in.ExternalID, s)
		}
	})
	t.Run("response lost: needs-human with one email, then AWS's sample Delivery event settles it", func(t *testing.T) {
		before := fk.Requests()
		fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
		id := e.mustSubmit("ses-drop", sesEmail("dropped"))
		in := e.waitStatus(id, 15*time.Second, core.StatusNeedsHuman)
		s := sent(id)
		if len(s) != 1 || fk.Requests()-before != 1 || in.AttemptCount != 1 {
			t.Fatalf("%d emails, %d requests: %s", len(s), fk.Requests()-before, trail(in))
		}
		// Over HTTP an SES event is refused: it only arrives through SNS.
		items := e.tableItems()
		r := e.do("POST", "/v1/webhooks/ses/mail", "", nil, sample(s[0].MessageID, id))
		if r.status != http.StatusUnauthorized || e.tableItems() != items {
			t.Fatalf("SES event over HTTP: %d %s", r.status, r.body)
		}
		// An event naming another intent settles nothing here.
		if st := feed(sample("0100other-000000", "it_notthisone")); st != http.StatusOK || e.intent(id).Status != core.StatusNeedsHuman {
			t.Fatalf("an event for another intent: %d, %s", st, trail(e.intent(id)))
		}
		if st := feed(sample(s[0].MessageID, id)); st != http.StatusOK {
			t.Fatalf("feed: %d", st)
		}
		in = e.waitStatus(id, 5*time.Second, core.StatusSucceeded)
		if in.ExternalID != s[0].MessageID {
			t.Fatalf("external id %q, want %q", in.ExternalID, s[0].MessageID)
		}
		if st := feed(sample(s[0].MessageID, id)); st != http.StatusOK || e.intent(id).Version != in.Version {
			t.Fatalf("a replayed event changed the intent (%d)", st)
		}
	})
	t.Run("500 after commit: one request (the SDK does not retry), needs-human; a bounce is evidence only", func(t *testing.T) {
		before := fk.Requests()
		fk.Inject(fakes.Fault{Kind: fakes.ErrorAfterCommit})
		id := e.mustSubmit("ses-500", sesEmail("500"))
		e.waitStatus(id, 15*time.Second, core.StatusNeedsHuman)
		s := sent(id)
		if len(s) != 1 || fk.Requests()-before != 1 {
			t.Fatalf("%d emails, %d requests; want 1 and 1", len(s), fk.Requests()-before)
		}
		bounce, _ := fk.Event(s[0].MessageID, "Bounce")
		if st := feed(string(bounce)); st != http.StatusOK {
			t.Fatalf("bounce: %d", st)
		}
		in := e.intent(id)
		if w := webhookEntries(in); in.Status != core.StatusNeedsHuman || len(w) != 1 || w[0].Result != core.ResultFailure {
			t.Fatalf("after a bounce: %s", trail(in))
		}
	})
	t.Run("a documented rejection fails without a retry", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.Reject})
		before := fk.Requests()
		id := e.mustSubmit("ses-reject", sesEmail("rejected"))
		in := e.waitStatus(id, 15*time.Second, core.StatusFailed)
		if n := fk.Requests() - before; n != 1 || len(sent(id)) != 0 || in.Attempts[0].Evidence.ProviderCode != "MessageRejected" {
			t.Fatalf("%d requests: %s", n, trail(in))
		}
	})
	t.Run("ThrottlingException is honoured", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.RateLimit})
		id := e.mustSubmit("ses-throttle", sesEmail("throttled"))
		in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		if len(sent(id)) != 1 || in.AttemptCount != 2 || in.Attempts[0].Evidence.ProviderCode != "ThrottlingException" {
			t.Fatalf("%s", trail(in))
		}
	})
	t.Run("Prefer: wait answers succeeded inline", func(t *testing.T) {
		r := e.submitWait(botToken, "ses-inline", sesEmail("inline"), 5)
		var in core.Intent
		r.json(t, &in)
		if s := sent(in.ID); r.status != http.StatusCreated || in.Status != core.StatusSucceeded || len(s) != 1 || in.ExternalID != s[0].MessageID {
			t.Fatalf("inline: %d %s", r.status, r.body)
		}
	})
}
