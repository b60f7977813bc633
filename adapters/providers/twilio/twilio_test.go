package twilio

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// Every documented error code the adapter maps, by code (the HTTP status is
// Twilio's documented one; the message text is never read).
func TestClassifyByDocumentedCode(t *testing.T) {
	for _, c := range []struct {
		status, code int
		want         core.ErrorClass
	}{
		{429, CodeTooManyRequests, core.ClassRateLimited},
		{400, CodeTooManyRequests, core.ClassRateLimited}, // the code decides
		{401, CodeAuthenticate, core.ClassUnauthorized},
		{401, CodeAccountNotActive, core.ClassUnauthorized},
		{403, 0, core.ClassUnauthorized},
		{400, CodeFromNotVerified, core.ClassRejectedInput},
		{400, CodeInvalidTo, core.ClassRejectedInput},
		{400, CodeInvalidFrom, core.ClassRejectedInput},
		{400, CodeGeoPermissionCall, core.ClassRejectedInput},
		{400, CodeRegionNotEnabled, core.ClassRejectedInput},
		{400, CodeBodyRequired, core.ClassRejectedInput},
		{400, CodeFromNotSMSCapable, core.ClassRejectedInput},
		{400, CodeUnsubscribed, core.ClassRejectedInput},
		{400, CodeNotMobile, core.ClassRejectedInput},
		{400, CodeBodyTooLong, core.ClassRejectedInput},
		{404, CodeNotFound, core.ClassRejectedInput},
		{400, 99999, core.ClassRejectedInput}, // another validation error: nothing created
		{500, CodeInternal, core.ClassUnknownOutcome},
		{503, CodeUnavailable, core.ClassUnknownOutcome},
		{502, 0, core.ClassUnknownOutcome},
		{409, 0, core.ClassUnknownOutcome},
	} {
		if got := Classify(c.status, c.code); got != c.want {
			t.Errorf("Classify(%d, %d) = %s, want %s", c.status, c.code, got, c.want)
		}
	}
}

func TestClassifyKeepsNumbersOutOfEvidence(t *testing.T) {
	body := []byte(`{"code": 21211, "message": "The 'To' number +15005550001 is not a valid phone number.", "more_info": "https://www.twilio.com/docs/errors/21211", "status": 400}`)
	_, err := classify(&httpx.Response{Status: 400, Header: http.Header{}, Body: body}, testNow)
	var pe *core.PermanentError
	if !errors.As(err, &pe) || pe.Class != core.ClassRejectedInput || pe.Evidence.ProviderCode != "21211" || strings.Contains(pe.Evidence.Detail+err.Error(), "+1500") {
		t.Fatalf("%#v", err)
	}
	_, err = classify(&httpx.Response{Status: 429, Header: http.Header{"Retry-After": {"7"}}, Body: []byte(`{"code":20429,"message":"Too Many Requests","status":429}`)}, testNow)
	var re *core.RetryableError
	if !errors.As(err, &re) || re.Class != core.ClassRateLimited || re.RetryAfter.Seconds() != 7 {
		t.Fatalf("429 with Retry-After: %#v", err)
	}
	_, err = classify(&httpx.Response{Status: 429, Header: http.Header{}, Body: []byte(`{"code":20429,"status":429}`)}, testNow)
	if !errors.As(err, &re) || re.RetryAfter != 0 {
		t.Fatalf("429 without Retry-After: %#v", err)
	}
	var ue *core.UnknownOutcomeError
	if _, err = classify(&httpx.Response{Status: 500, Header: http.Header{}, Body: []byte(`{"code":20500,"status":500}`)}, testNow); !errors.As(err, &ue) {
		t.Fatalf("500: %#v", err)
	}
	res, err := classify(&httpx.Response{Status: 201, Header: http.Header{}, Body: []byte(`{"sid":"SM0123456789abcdef0123456789abcdef","status":"queued"}`)}, testNow)
	if err != nil || res.ExternalID != "SM0123456789abcdef0123456789abcdef" || res.Evidence.ProviderCode != "queued" {
		t.Fatalf("201: %+v %v", res, err)
	}
}

// The example of Twilio's webhook security documentation
// (https://www.twilio.com/docs/usage/webhooks/webhooks-security).
func TestSignMatchesTwilioDocumentedExample(t *testing.T) {
	params := url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+12349013030"}, "Digits": {"1234"}, "From": {"+12349013030"}, "To": {"+18005551212"}}
	if got := Sign("12345", "https://mycompany.com/myapp.php?foo=1&bar=2", params); got != "0/KCTR6DLpKmkAf8muzZqo1nDgQ=" {
		t.Fatalf("signature %q", got)
	}
}

const (
	acct  = "AC0123456789abcdef0123456789abcdef"
	token = "auth-token-1"
	base  = "https://outbox.example.com/prod"
)

func hook() *Webhook {
	accounts := map[string]Account{"alerts": {AccountSID: acct, AuthToken: token, From: "+15005550006"}, "blank": {AccountSID: acct}}
	return &Webhook{Accounts: func(n string) (Account, bool) { a, ok := accounts[n]; return a, ok }, PublicBaseURL: base}
}

func callback(account, intent string, p url.Values, tok string) plugin.Request {
	path := "/prod" + WebhookPath(account)
	q := IntentParam + "=" + url.QueryEscape(intent)
	sig := Sign(tok, "https://outbox.example.com"+path+"?"+q, p)
	return plugin.Request{Method: "POST", RawPath: path, RawQuery: q, Body: []byte(p.Encode()),
		Headers: map[string]string{"x-twilio-signature": sig, "content-type": "application/x-www-form-urlencoded"}}
}

func smsStatus(status string) url.Values {
	return url.Values{"AccountSid": {acct}, "MessageSid": {"SM1"}, "MessageStatus": {status}, "SmsSid": {"SM1"}, "SmsStatus": {status}, "To": {"+15005550001"}, "From": {"+15005550006"}, "ApiVersion": {"2010-04-01"}}
}

func TestVerifyRequest(t *testing.T) {
	w := hook()
	ctx := context.Background()
	// The public base URL has a base path (/prod): a stage arrives in the
	// raw path, a custom domain's mapping does not; both verify.
	r := callback("alerts", "it_1", smsStatus("delivered"), token)
	if err := w.VerifyRequest(ctx, "alerts", r); err != nil {
		t.Fatalf("signed callback refused: %v", err)
	}
	mapped := r
	mapped.RawPath = strings.TrimPrefix(r.RawPath, "/prod")
	if err := w.VerifyRequest(ctx, "alerts", mapped); err != nil {
		t.Fatalf("signed callback through a base path mapping refused: %v", err)
	}
	refused := func(name string, r plugin.Request, account string) {
		t.Helper()
		if err := w.VerifyRequest(ctx, account, r); !errors.Is(err, plugin.ErrUnauthenticated) {
			t.Errorf("%s: %v", name, err)
		}
	}
	wrong := callback("alerts", "it_1", smsStatus("delivered"), "not-the-token")
	refused("wrong token", wrong, "alerts")
	other := r
	other.RawQuery = IntentParam + "=it_2" // another intent named under the same signature
	refused("query changed", other, "alerts")
	forged := r
	forged.Body = []byte(smsStatus("sent").Encode())
	refused("body changed", forged, "alerts")
	nosig := r
	nosig.Headers = map[string]string{}
	refused("no signature", nosig, "alerts")
	refused("unknown account", r, "nobody")
	refused("account without a token", callback("blank", "it_1", smsStatus("delivered"), ""), "blank")
	// The URL is the configured one, never rebuilt from Host: a signature
	// over another host fails.
	host := r
	host.Headers = map[string]string{"x-twilio-signature": Sign(token, "https://evil.example"+r.RawPath+"?"+r.RawQuery, smsStatus("delivered")), "host": "evil.example"}
	refused("another host", host, "alerts")
	// The plain Verify never accepts.
	if err := w.Verify(ctx, "alerts", r.Headers, r.Body); !errors.Is(err, plugin.ErrUnauthenticated) {
		t.Fatalf("Verify: %v", err)
	}
}

func TestDecodeRequest(t *testing.T) {
	w := hook()
	for _, c := range []struct {
		params url.Values
		kind   webhook.EventKind
		status string
	}{
		{smsStatus("sent"), webhook.EventStatus, "sent"},
		{smsStatus("delivered"), webhook.EventStatus, "delivered"},
		{smsStatus("read"), webhook.EventStatus, "read"},
		{smsStatus("queued"), webhook.EventOther, ""},
		{smsStatus("failed"), webhook.EventFailure, "failed"},
		{smsStatus("undelivered"), webhook.EventFailure, "undelivered"},
		{url.Values{"AccountSid": {acct}, "CallSid": {"CA1"}, "CallStatus": {"in-progress"}}, webhook.EventStatus, core.DeliveryDelivered},
		{url.Values{"AccountSid": {acct}, "CallSid": {"CA1"}, "CallStatus": {"completed"}}, webhook.EventStatus, core.DeliveryDelivered},
		{url.Values{"AccountSid": {acct}, "CallSid": {"CA1"}, "CallStatus": {"ringing"}}, webhook.EventOther, ""},
		{url.Values{"AccountSid": {acct}, "CallSid": {"CA1"}, "CallStatus": {"busy"}}, webhook.EventFailure, "busy"},
		{url.Values{"AccountSid": {acct}, "CallSid": {"CA1"}, "CallStatus": {"no-answer"}}, webhook.EventFailure, "no-answer"},
		{url.Values{"AccountSid": {acct}, "CallSid": {"CA1"}, "CallStatus": {"canceled"}}, webhook.EventFailure, "canceled"},
		{url.Values{"AccountSid": {acct}, "CallSid": {"CA1"}, "CallStatus": {"failed"}}, webhook.EventFailure, "failed"},
	} {
		ev, err := w.DecodeRequest("alerts", callback("alerts", "it_7", c.params, token))
		if err != nil || ev.Kind != c.kind || ev.Status != c.status || ev.IntentID != "it_7" || ev.MessageID == "" || !strings.HasSuffix(ev.EventID, ":"+c.params.Get("MessageStatus")+c.params.Get("CallStatus")) {
			t.Errorf("%v: %+v %v", c.params, ev, err)
		}
	}
	p := smsStatus("undelivered")
	p.Set("ErrorCode", "30003")
	if ev, _ := w.DecodeRequest("alerts", callback("alerts", "it_7", p, token)); ev.Status != "undelivered (error 30003)" {
		t.Errorf("error code: %+v", ev)
	}
	p = smsStatus("delivered")
	p.Set("AccountSid", "AC99999999999999999999999999999999")
	if _, err := w.DecodeRequest("alerts", callback("alerts", "it_7", p, token)); err == nil {
		t.Error("another account's callback decoded")
	}
	if _, err := w.DecodeRequest("alerts", callback("alerts", "it_7", url.Values{"AccountSid": {acct}}, token)); err == nil {
		t.Error("a callback without a sid decoded")
	}
}

func TestBuildForm(t *testing.T) {
	p, err := New(nil, Config{StatusCallbackBaseURL: base + "/", Accounts: map[string]Account{"alerts": {AccountSID: acct, AuthToken: token, From: "+15005550006"}}})
	if err != nil {
		t.Fatal(err)
	}
	a := p.cfg.Accounts["alerts"]
	path, f, err := p.buildForm(a, core.SendRequest{IntentID: "it_9", Account: "alerts", Action: ActionSMS, Target: "+15005550001", Payload: []byte(`{"body":"hi"}`)})
	if err != nil || path != "/Messages.json" || f.Get("StatusCallback") != base+"/v1/webhooks/twilio/alerts?intent=it_9" || f.Get("From") != "+15005550006" || f.Get("Body") != "hi" {
		t.Fatalf("sms: %s %v %v", path, f, err)
	}
	path, f, err = p.buildForm(a, core.SendRequest{IntentID: "it_9", Account: "alerts", Action: ActionCall, Target: "+15005550001", Payload: []byte(`{"twiml":"<Response><Say>hi</Say></Response>","timeout":20}`)})
	if err != nil || path != "/Calls.json" || f.Get("Twiml") == "" || strings.Join(f["StatusCallbackEvent"], ",") != "answered,completed" || f.Get("Timeout") != "20" {
		t.Fatalf("call: %s %v %v", path, f, err)
	}
	for name, r := range map[string]core.SendRequest{
		"not E.164":     {Action: ActionSMS, Target: "5550001", Payload: []byte(`{"body":"hi"}`)},
		"empty sms":     {Action: ActionSMS, Target: "+15005550001", Payload: []byte(`{}`)},
		"unknown field": {Action: ActionSMS, Target: "+15005550001", Payload: []byte(`{"body":"hi","to":"+1"}`)},
		"no twiml":      {Action: ActionCall, Target: "+15005550001", Payload: []byte(`{}`)},
		"bad timeout":   {Action: ActionCall, Target: "+15005550001", Payload: []byte(`{"twiml":"<Response/>","timeout":1}`)},
	} {
		if _, _, err := p.buildForm(a, r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, cfg := range map[string]Config{
		"no callback base": {Accounts: map[string]Account{"a": {AccountSID: acct, AuthToken: token, From: "+15005550006"}}},
		"bad sid":          {StatusCallbackBaseURL: base, Accounts: map[string]Account{"a": {AccountSID: "AC1", AuthToken: token, From: "+15005550006"}}},
		"no token":         {StatusCallbackBaseURL: base, Accounts: map[string]Account{"a": {AccountSID: acct, From: "+15005550006"}}},
		"no sender":        {StatusCallbackBaseURL: base, Accounts: map[string]Account{"a": {AccountSID: acct, AuthToken: token}}},
	} {
		if _, err := New(nil, cfg); err == nil {
			t.Errorf("%s: configuration accepted", name)
		}
	}
}

var testNow = mustTime("2030-01-01T00:00:00Z")

func mustTime(s string) (t time.Time) { t, _ = time.Parse(time.RFC3339, s); return t }
