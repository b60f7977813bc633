package whatsapp

import (
	"context"
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

// Every documented error code the adapter maps, by code; the rate-limit
// codes arrive as HTTP 400.
func TestClassifyByDocumentedCode(t *testing.T) {
	for _, c := range []struct {
		status, code int
		want         core.ErrorClass
	}{
		{400, CodeTooManyCalls, core.ClassRateLimited},
		{400, CodeWABARateLimit, core.ClassRateLimited},
		{400, CodeThroughput, core.ClassRateLimited},
		{400, CodePairRateLimit, core.ClassRateLimited},
		{401, CodeAuth, core.ClassUnauthorized},
		{400, CodeCapability, core.ClassUnauthorized},
		{403, CodePermission, core.ClassUnauthorized},
		{401, CodeTokenExpired, core.ClassUnauthorized},
		{403, 200, core.ClassUnauthorized},
		{403, 299, core.ClassUnauthorized},
		{400, CodeAccessDenied, core.ClassUnauthorized},
		{400, CodeAccountLocked, core.ClassUnauthorized},
		{400, CodeBlocked, core.ClassUnauthorized},
		{400, CodeInvalidParameter, core.ClassRejectedInput},
		{400, CodeParamMissing, core.ClassRejectedInput},
		{400, CodeParamInvalid, core.ClassRejectedInput},
		{400, CodeRecipientIsSender, core.ClassRejectedInput},
		{400, CodeUndeliverable, core.ClassRejectedInput},
		{400, CodeReengagement, core.ClassRejectedInput},
		{400, CodeUnsupportedType, core.ClassRejectedInput},
		{400, CodeMediaDownload, core.ClassRejectedInput},
		{400, CodeMediaUpload, core.ClassRejectedInput},
		{400, 132000, core.ClassRejectedInput},
		{400, 132069, core.ClassRejectedInput},
		{400, CodeNotRegistered, core.ClassRejectedInput},
		{500, CodeUnknown, core.ClassUnknownOutcome},
		{503, CodeService, core.ClassUnknownOutcome},
		{500, CodeSomethingWrong, core.ClassUnknownOutcome},
		{503, CodeServiceUnavail, core.ClassUnknownOutcome},
		{400, 999999, core.ClassUnknownOutcome}, // an undocumented code is never proof of nothing
	} {
		if got := Classify(c.status, true, c.code); got != c.want {
			t.Errorf("Classify(%d, %d) = %s, want %s", c.status, c.code, got, c.want)
		}
	}
	if Classify(429, false, 0) != core.ClassRateLimited || Classify(502, false, 0) != core.ClassUnknownOutcome {
		t.Error("without an error object: 429 rate limited, 502 unknown")
	}
	_, err := classify(&httpx.Response{Status: 400, Header: http.Header{}, Body: []byte(`{"error":{"message":"(#130429) Rate limit hit","type":"OAuthException","code":130429,"error_data":{"messaging_product":"whatsapp","details":"Cloud API message throughput has been reached."},"fbtrace_id":"Az8or2yhqkZfEZ-_4Qn_Bam"}}`)}, time.Now())
	var re *core.RetryableError
	if !errors.As(err, &re) || re.Class != core.ClassRateLimited || re.Evidence.ProviderCode != "130429" {
		t.Fatalf("130429 as HTTP 400: %#v", err)
	}
	res, err := classify(&httpx.Response{Status: 200, Header: http.Header{}, Body: []byte(`{"messaging_product":"whatsapp","contacts":[{"input":"+16505551234","wa_id":"16505551234"}],"messages":[{"id":"wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA","message_status":"accepted"}]}`)}, time.Now())
	if err != nil || res.ExternalID != "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA" {
		t.Fatalf("200: %+v %v", res, err)
	}
}

func TestBuildMessage(t *testing.T) {
	b, err := buildMessage(core.SendRequest{IntentID: "it_1", Target: "+16505551234", Payload: []byte(`{"type":"text","text":{"body":"hi <3"}}`)})
	var m map[string]any
	if err != nil || json.Unmarshal(b, &m) != nil || m["biz_opaque_callback_data"] != "it_1" || m["to"] != "+16505551234" || m["messaging_product"] != "whatsapp" {
		t.Fatalf("%s %v", b, err)
	}
	for name, p := range map[string]string{
		"no type":       `{"text":{"body":"x"}}`,
		"type w/o body": `{"type":"image"}`,
		"our field":     `{"type":"text","text":{"body":"x"},"biz_opaque_callback_data":"x"}`,
	} {
		if _, err := buildMessage(core.SendRequest{IntentID: "it_1", Target: "+16505551234", Payload: []byte(p)}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Meta's documented status payload (message status updates).
const statusExample = `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"statuses":[{"id":"wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA","status":"delivered","timestamp":"1750263773","recipient_id":"16505551234","biz_opaque_callback_data":"it_7","conversation":{"id":"CONVERSATION_ID","origin":{"type":"service"}},"pricing":{"billable":true,"pricing_model":"PMP","category":"service"}},{"id":"wamid.X","status":"failed","timestamp":"1750263774","recipient_id":"16505551234","errors":[{"code":131026,"title":"Message undeliverable"}]}]},"field":"messages"}]}]}`

func TestWebhook(t *testing.T) {
	accounts := map[string]Account{"support": {PhoneNumberID: "106540352242922", AppSecret: "app-secret", VerifyToken: "verify-me"}, "bare": {PhoneNumberID: "1"}}
	w := &Webhook{Accounts: func(n string) (Account, bool) { a, ok := accounts[n]; return a, ok }}
	ctx := context.Background()
	body := []byte(statusExample)
	if err := w.Verify(ctx, "support", map[string]string{"x-hub-signature-256": Sign("app-secret", body)}, body); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		account, sig string
	}{
		"wrong secret":        {"support", Sign("other", body)},
		"no prefix":           {"support", Sign("app-secret", body)[7:]},
		"none":                {"support", ""},
		"account w/o secret":  {"bare", Sign("", body)},
		"unknown account":     {"nobody", Sign("app-secret", body)},
		"sha1 scheme instead": {"support", "sha1=" + Sign("app-secret", body)[7:]},
	} {
		if err := w.Verify(ctx, c.account, map[string]string{"X-Hub-Signature-256": c.sig}, body); !errors.Is(err, plugin.ErrUnauthenticated) {
			t.Errorf("%s: %v", name, err)
		}
	}
	evs, err := w.DecodeAll("support", nil, body)
	if err != nil || len(evs) != 2 {
		t.Fatalf("%+v %v", evs, err)
	}
	if e := evs[0]; e.Kind != webhook.EventStatus || e.Status != "delivered" || e.IntentID != "it_7" || e.EventID != "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA:delivered" || e.OccurredAt.Unix() != 1750263773 {
		t.Errorf("delivered: %+v", e)
	}
	if e := evs[1]; e.Kind != webhook.EventFailure || e.Status != "failed (error 131026)" || e.IntentID != "" {
		t.Errorf("failed: %+v", e)
	}
	// Another phone number's statuses are not this account's: ignored.
	if evs, err := w.DecodeAll("bare", nil, body); err != nil || len(evs) != 1 || evs[0].Kind != webhook.EventOther || evs[0].IntentID != "" {
		t.Errorf("a payload for another phone number: %+v %v", evs, err)
	}
	if evs, err := w.DecodeAll("support", nil, []byte(`{"object":"whatsapp_business_account","entry":[]}`)); err != nil || len(evs) != 1 || evs[0].Kind != webhook.EventOther {
		t.Errorf("empty payload: %+v %v", evs, err)
	}
	// The handshake.
	hs := func(account, q string) (int, string) {
		r := w.Handshake(ctx, account, plugin.Request{Method: "GET", RawQuery: q})
		return r.StatusCode, r.Body
	}
	if st, b := hs("support", "hub.mode=subscribe&hub.verify_token=verify-me&hub.challenge=1158201444"); st != 200 || b != "1158201444" {
		t.Errorf("handshake: %d %s", st, b)
	}
	for _, c := range [][2]string{
		{"support", "hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1"},
		{"support", "hub.mode=unsubscribe&hub.verify_token=verify-me&hub.challenge=1"},
		{"support", "hub.mode=subscribe&hub.verify_token=verify-me"},
		{"bare", "hub.mode=subscribe&hub.verify_token=&hub.challenge=1"},
		{"nobody", "hub.mode=subscribe&hub.verify_token=verify-me&hub.challenge=1"},
	} {
		if st, _ := hs(c[0], c[1]); st != 403 {
			t.Errorf("%v: %d, want 403", c, st)
		}
	}
}
