package postmark

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// Every documented answer the adapter maps, by status and ErrorCode.
func TestClassifyByDocumentedCode(t *testing.T) {
	for _, c := range []struct {
		status, code int
		want         core.ErrorClass
	}{
		{401, CodeBadToken, core.ClassUnauthorized},
		{401, 0, core.ClassUnauthorized},
		{422, CodeNotAllowedToSend, core.ClassUnauthorized},
		{422, CodeAccountPending, core.ClassUnauthorized},
		{422, CodeAccountMayNotSend, core.ClassUnauthorized},
		{422, CodeInvalidRequest, core.ClassRejectedInput},
		{422, CodeSenderNotFound, core.ClassRejectedInput},
		{422, CodeSenderNotConfirmed, core.ClassRejectedInput},
		{422, CodeInvalidJSON, core.ClassRejectedInput},
		{422, CodeIncompatibleJSON, core.ClassRejectedInput},
		{422, CodeInactiveRecipient, core.ClassRejectedInput},
		{422, CodeJSONRequired, core.ClassRejectedInput},
		{422, CodeForbiddenAttachment, core.ClassRejectedInput},
		{404, 0, core.ClassRejectedInput},
		{413, 0, core.ClassRejectedInput},
		{415, 0, core.ClassRejectedInput},
		{429, 0, core.ClassRateLimited},
		{500, 0, core.ClassUnknownOutcome},
		{503, 0, core.ClassUnknownOutcome},
	} {
		if got := Classify(c.status, c.code); got != c.want {
			t.Errorf("Classify(%d, %d) = %s, want %s", c.status, c.code, got, c.want)
		}
	}
	res, err := classify(&httpx.Response{Status: 200, Header: http.Header{}, Body: []byte(`{"To":"a@example.com","SubmittedAt":"2014-02-17T07:25:01.4178645-05:00","MessageID":"0a129aee-e1cd-480d-b08d-4f48548ff48d","ErrorCode":0,"Message":"OK"}`)}, time.Now())
	if err != nil || res.ExternalID != "0a129aee-e1cd-480d-b08d-4f48548ff48d" {
		t.Fatalf("200: %+v %v", res, err)
	}
	_, err = classify(&httpx.Response{Status: 429, Header: http.Header{"Retry-After": {"3"}}, Body: nil}, time.Now())
	var re *core.RetryableError
	if !errors.As(err, &re) || re.RetryAfter != 3*time.Second {
		t.Fatalf("429: %#v", err)
	}
}

func TestBuildEmail(t *testing.T) {
	a := Account{ServerToken: "t", From: "orders@example.com"}
	b, err := buildEmail(a, core.SendRequest{IntentID: "it_1", Target: "jo@example.com", Payload: []byte(`{"Subject":"Hi","TextBody":"x <b>","Metadata":{"order":"1001"}}`)})
	var m map[string]any
	if err != nil || json.Unmarshal(b, &m) != nil || m["To"] != "jo@example.com" || m["From"] != "orders@example.com" || m["MessageStream"] != "outbound" ||
		m["Metadata"].(map[string]any)[MetadataIntentKey] != "it_1" || m["Metadata"].(map[string]any)["order"] != "1001" {
		t.Fatalf("%s %v", b, err)
	}
	for name, p := range map[string]string{
		"From in payload":  `{"From":"x@example.com","TextBody":"x"}`,
		"no body":          `{"Subject":"x"}`,
		"our metadata key": `{"TextBody":"x","Metadata":{"outbox_intent_id":"it_2"}}`,
		"not an object":    `[1]`,
	} {
		if _, err := buildEmail(a, core.SendRequest{IntentID: "it_1", Target: "jo@example.com", Payload: []byte(p)}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := buildEmail(a, core.SendRequest{IntentID: "it_1", Target: "not an address", Payload: []byte(`{"TextBody":"x"}`)}); err == nil {
		t.Error("a bad target was accepted")
	}
}

func basic(u, p string) map[string]string {
	return map[string]string{"authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p))}
}

// Postmark's documented delivery and bounce webhook examples.
const (
	deliveryExample = `{"RecordType":"Delivery","ServerID":23,"MessageStream":"outbound","MessageID":"00000000-0000-0000-0000-000000000000","Recipient":"john@example.com","Tag":"welcome-email","DeliveredAt":"2021-02-21T16:34:52Z","Details":"Test delivery webhook details","Metadata":{"example":"value","outbox_intent_id":"it_7"}}`
	bounceExample   = `{"RecordType":"Bounce","MessageStream":"outbound","ID":4323372036854775807,"Type":"HardBounce","TypeCode":1,"Name":"Hard bounce","Tag":"Test","MessageID":"00000000-0000-0000-0000-000000000000","Metadata":{"a_key":"a_value","b_key":"b_value"},"ServerID":23,"Description":"The server was unable to deliver your message (ex: unknown user, mailbox not found).","Details":"Test bounce details","Email":"john@example.com","From":"sender@example.com","BouncedAt":"2021-02-21T16:34:52Z","DumpAvailable":true,"Inactive":true,"CanActivate":true,"Subject":"Test subject","Content":"<Full dump of bounce>"}`
)

func TestWebhook(t *testing.T) {
	accounts := map[string]Account{"mail": {WebhookUser: "pm", WebhookPassword: "s3cret"}, "open": {}}
	w := &Webhook{Accounts: func(n string) (Account, bool) { a, ok := accounts[n]; return a, ok }}
	ctx := context.Background()
	if err := w.Verify(ctx, "mail", basic("pm", "s3cret"), nil); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		account string
		h       map[string]string
	}{
		"wrong password":            {"mail", basic("pm", "guess")},
		"wrong user":                {"mail", basic("x", "s3cret")},
		"no credentials":            {"mail", map[string]string{}},
		"account without any":       {"open", basic("", "")},
		"unknown account":           {"nobody", basic("pm", "s3cret")},
		"not basic":                 {"mail", map[string]string{"authorization": "Bearer s3cret"}},
		"password in the user part": {"mail", basic("pm:s3cret", "")},
	} {
		if err := w.Verify(ctx, c.account, c.h, nil); !errors.Is(err, plugin.ErrUnauthenticated) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ev, err := w.Decode("mail", nil, []byte(deliveryExample))
	if err != nil || ev.Kind != webhook.EventStatus || ev.Status != core.DeliveryDelivered || ev.IntentID != "it_7" ||
		ev.MessageID != "00000000-0000-0000-0000-000000000000" || ev.EventID != "Delivery:00000000-0000-0000-0000-000000000000:john@example.com" || ev.OccurredAt.IsZero() {
		t.Fatalf("delivery: %+v %v", ev, err)
	}
	ev, err = w.Decode("mail", nil, []byte(bounceExample))
	if err != nil || ev.Kind != webhook.EventFailure || ev.Status != "bounce: HardBounce" || ev.IntentID != "" || ev.EventID != "Bounce:4323372036854775807" {
		t.Fatalf("bounce: %+v %v", ev, err)
	}
	if _, err := w.Decode("mail", nil, []byte(`{"RecordType":"Delivery"}`)); err == nil {
		t.Fatal("a record without MessageID decoded")
	}
	if ev, err := w.Decode("mail", nil, []byte(`{"RecordType":"SubscriptionChange","MessageID":"m"}`)); err != nil || ev.Kind != webhook.EventOther {
		t.Fatalf("subscription change: %+v %v", ev, err)
	}
}
