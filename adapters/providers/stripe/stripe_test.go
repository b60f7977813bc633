package stripe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/adapters/providers/providertest"
	"github.com/botharness/outbox/adapters/providers/stripe"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

var ctx = context.Background()

func newProvider(t *testing.T, base string) *stripe.Provider {
	t.Helper()
	p, err := stripe.New(nil, stripe.Config{BaseURL: base, Timeout: 2 * time.Second, Accounts: map[string]stripe.Account{"shop": {SecretKey: "sk_test_1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(id string) core.SendRequest {
	return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot", Account: "shop", Action: "refund",
		Target: "pi_1", Payload: []byte(`{"amount":500,"metadata":{"order":"1001"}}`), Attempt: 1}
}

func stripeErr(typ, code string) string {
	return fmt.Sprintf(`{"error":{"type":%q,"code":%q,"message":"a Stripe error text"}}`, typ, code)
}

// Each documented Stripe answer maps to its class, by status, error.type and
// error.code (https://docs.stripe.com/api/errors, https://docs.stripe.com/error-codes).
func TestSendMapsDocumentedAnswers(t *testing.T) {
	replayed := map[string]string{"Idempotent-Replayed": "true"}
	for _, c := range []struct {
		name     string
		status   int
		header   map[string]string
		body     string
		class    core.ErrorClass
		external string
	}{
		{"refund created", 200, nil, `{"id":"re_123","object":"refund","status":"succeeded","metadata":{"outbox_intent_id":"it_1"}}`, "", "re_123"},
		{"refund pending", 200, nil, `{"id":"re_124","object":"refund","status":"pending"}`, "", "re_124"},
		{"replayed success", 200, replayed, `{"id":"re_125","object":"refund","status":"succeeded"}`, "", "re_125"},
		{"2xx without id", 200, nil, `{"object":"refund"}`, core.ClassUnknownOutcome, ""},
		{"parameter_missing", 400, nil, stripeErr("invalid_request_error", "parameter_missing"), core.ClassRejectedInput, ""},
		{"amount_too_large", 400, nil, stripeErr("invalid_request_error", "amount_too_large"), core.ClassRejectedInput, ""},
		{"charge_already_refunded", 400, nil, stripeErr("invalid_request_error", "charge_already_refunded"), core.ClassRejectedInput, ""},
		{"resource_missing 400", 400, nil, stripeErr("invalid_request_error", "resource_missing"), core.ClassRejectedInput, ""},
		{"idempotency_error: key used with other parameters", 400, nil, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters"}}`, core.ClassUnknownOutcome, ""},
		{"401 invalid API key", 401, nil, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided"}}`, core.ClassUnauthorized, ""},
		{"402 request failed", 402, nil, stripeErr("card_error", "card_declined"), core.ClassRejectedInput, ""},
		{"403 key lacks permission", 403, nil, stripeErr("invalid_request_error", "secret_key_required"), core.ClassUnauthorized, ""},
		{"404 resource_missing", 404, nil, stripeErr("invalid_request_error", "resource_missing"), core.ClassRejectedInput, ""},
		{"409 idempotency_key_in_use", 409, nil, stripeErr("invalid_request_error", "idempotency_key_in_use"), core.ClassTransient, ""},
		{"409 other conflict", 409, nil, stripeErr("invalid_request_error", "lock_timeout"), core.ClassUnknownOutcome, ""},
		{"424 external dependency failed", 424, nil, stripeErr("api_error", ""), core.ClassUnknownOutcome, ""},
		{"429 rate_limit, no Retry-After", 429, nil, stripeErr("invalid_request_error", "rate_limit"), core.ClassRateLimited, ""},
		{"429 lock_timeout", 429, nil, stripeErr("invalid_request_error", "lock_timeout"), core.ClassRateLimited, ""},
		{"500 api_error", 500, nil, `{"error":{"type":"api_error","message":"An unknown error occurred"}}`, core.ClassUnknownOutcome, ""},
		{"500 replayed for the key", 500, replayed, `{"error":{"type":"api_error","message":"An unknown error occurred"}}`, core.ClassUnknownOutcome, ""},
		{"502 without a body", 502, nil, ``, core.ClassUnknownOutcome, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProvider(t, providertest.Canned(t, c.status, c.header, c.body))
			res, err := p.Send(ctx, request("it_1"))
			providertest.Outcome(t, res, err, c.class, c.external, 0)
			if c.header != nil && c.class != "" {
				var ue *core.UnknownOutcomeError
				if !errors.As(err, &ue) || ue.Evidence.Extra["replayed"] != "true" {
					t.Fatalf("a replayed answer is not marked in the evidence: %v", err)
				}
			}
		})
	}
}

// The request is Stripe's: POST /v1/refunds, form-encoded, Bearer secret
// key, the same Idempotency-Key and body on every attempt, the target as
// payment_intent and the intent id in metadata.
func TestSendWireFormat(t *testing.T) {
	type seen struct {
		path, auth, ctype, key, body string
	}
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, seen{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), string(b)})
		_, _ = w.Write([]byte(`{"id":"re_1","object":"refund","status":"succeeded"}`))
	}))
	t.Cleanup(srv.Close)
	p := newProvider(t, srv.URL)
	r := request("it_wire")
	for i := 0; i < 2; i++ {
		r.Attempt = i + 1
		if _, err := p.Send(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != got[1] {
		t.Fatalf("attempts differ: %+v", got)
	}
	g := got[0]
	if g.path != "/v1/refunds" || g.auth != "Bearer sk_test_1" || g.ctype != "application/x-www-form-urlencoded" || g.key != "it_wire" {
		t.Fatalf("request %+v", g)
	}
	form, err := url.ParseQuery(g.body)
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{"amount": {"500"}, "payment_intent": {"pi_1"}, "metadata[order]": {"1001"}, "metadata[outbox_intent_id]": {"it_wire"}}
	if form.Encode() != want.Encode() {
		t.Fatalf("form %s, want %s", form.Encode(), want.Encode())
	}
}

func TestSendRefusesBadInputWithoutCalling(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls++ }))
	t.Cleanup(srv.Close)
	p := newProvider(t, srv.URL)
	for name, mut := range map[string]func(*core.SendRequest){
		"target not a payment":     func(r *core.SendRequest) { r.Target = "cus_1" },
		"payload not an object":    func(r *core.SendRequest) { r.Payload = []byte(`[1]`) },
		"payload names another pi": func(r *core.SendRequest) { r.Payload = []byte(`{"payment_intent":"pi_2"}`) },
		"payload claims our key":   func(r *core.SendRequest) { r.Payload = []byte(`{"metadata":{"outbox_intent_id":"it_other"}}`) },
		"null value":               func(r *core.SendRequest) { r.Payload = []byte(`{"amount":null}`) },
		"unknown action":           func(r *core.SendRequest) { r.Action = "charge" },
		"unknown account":          func(r *core.SendRequest) { r.Account = "other" },
		"idempotency key too long": func(r *core.SendRequest) { r.IdempotencyKey = strings.Repeat("k", 256) },
	} {
		r := request("it_bad")
		mut(&r)
		_, err := p.Send(ctx, r)
		if core.ClassOf(err) != core.ClassRejectedInput {
			t.Errorf("%s: %v, want rejected", name, err)
		}
	}
	if calls != 0 {
		t.Fatalf("%d calls for refused input", calls)
	}
}

func TestFormEncode(t *testing.T) {
	var args map[string]json.RawMessage
	_ = json.Unmarshal([]byte(`{"b":true,"a":12,"metadata":{"y":"2","x":"a b&c"},"list":["p","q"]}`), &args)
	got, err := stripe.FormEncode(args)
	want := "a=12&b=true&list%5B0%5D=p&list%5B1%5D=q&metadata%5Bx%5D=a+b%26c&metadata%5By%5D=2"
	if err != nil || got != want {
		t.Fatalf("FormEncode = %q, %v; want %q", got, err, want)
	}
}

// Stripe-Signature (https://docs.stripe.com/webhooks#verify-manually): t=
// and one or more v1= hex HMAC-SHA256 of "<t>.<body>" keyed with the whole
// whsec_ string; five-minute tolerance.
func TestVerifySignature(t *testing.T) {
	const secret = "whsec_test_secret"
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1","object":"event"}`)
	good := stripe.Sign(secret, now, body)
	// Computed independently of Sign: the documented construction.
	if !strings.HasPrefix(good, "t=1800000000,v1=") || len(strings.TrimPrefix(good, "t=1800000000,v1=")) != 64 {
		t.Fatalf("Sign = %q", good)
	}
	for name, c := range map[string]struct {
		header string
		at     time.Time
		want   error
	}{
		"valid":                   {good, now, nil},
		"valid 4 minutes later":   {good, now.Add(4 * time.Minute), nil},
		"second v1 matches":       {"t=1800000000,v1=" + strings.Repeat("0", 64) + "," + strings.TrimPrefix(good, "t=1800000000,"), now, nil},
		"with a v0 element":       {good + ",v0=abc", now, nil},
		"10 minutes old":          {good, now.Add(10 * time.Minute), stripe.ErrStale},
		"from the future":         {good, now.Add(-6 * time.Minute), stripe.ErrStale},
		"other secret":            {stripe.Sign("whsec_other", now, body), now, stripe.ErrBadSignature},
		"base64-decoded key used": {stripe.Sign("test_secret", now, body), now, stripe.ErrBadSignature},
		"missing":                 {"", now, stripe.ErrNoSignature},
		"no v1":                   {"t=1800000000", now, stripe.ErrNoSignature},
	} {
		if err := stripe.VerifySignature(secret, c.header, body, c.at, stripe.Tolerance); !errors.Is(err, c.want) && !(err == nil && c.want == nil) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if err := stripe.VerifySignature(secret, good, []byte(`{"id":"evt_2","object":"event"}`), now, stripe.Tolerance); !errors.Is(err, stripe.ErrBadSignature) {
		t.Errorf("a changed body verified: %v", err)
	}
	if err := stripe.VerifySignature("", good, body, now, stripe.Tolerance); err == nil {
		t.Error("an empty secret verified")
	}
}

func TestWebhookDecode(t *testing.T) {
	w := &stripe.Webhook{Accounts: func(string) (stripe.Account, bool) { return stripe.Account{WebhookSecret: "whsec_x"}, true }}
	ev := func(typ, obj string) []byte {
		return []byte(fmt.Sprintf(`{"id":"evt_9","object":"event","type":%q,"created":1800000000,"data":{"object":%s},"request":{"id":null,"idempotency_key":null}}`, typ, obj))
	}
	refund := `{"id":"re_7","object":"refund","status":"succeeded","metadata":{"outbox_intent_id":"it_42"}}`
	got, err := w.Decode("shop", nil, ev("refund.updated", refund))
	if err != nil || got.Kind != webhook.EventAck || got.IntentID != "it_42" || got.MessageID != "re_7" || got.EventID != "evt_9" {
		t.Fatalf("refund.updated: %+v %v", got, err)
	}
	got, err = w.Decode("shop", nil, ev("refund.created", `{"id":"re_8","object":"refund","status":"pending","metadata":{}}`))
	if err != nil || got.Kind != webhook.EventAck || got.IntentID != "" || got.MessageID != "re_8" {
		t.Fatalf("refund without metadata binds by refund id: %+v %v", got, err)
	}
	got, err = w.Decode("shop", nil, ev("refund.updated", `{"id":"re_9","object":"refund","status":"failed","metadata":{"outbox_intent_id":"it_42"}}`))
	if err != nil || got.Kind != webhook.EventOther {
		t.Fatalf("failed refund: %+v %v", got, err)
	}
	got, err = w.Decode("shop", nil, ev("charge.refunded", `{"id":"ch_1","object":"charge"}`))
	if err != nil || got.Kind != webhook.EventOther {
		t.Fatalf("other event: %+v %v", got, err)
	}
	for name, body := range map[string]string{
		"not json":       `{"id":`,
		"not an event":   `{"id":"x","object":"refund","type":"refund.updated"}`,
		"refund missing": `{"id":"evt_1","object":"event","type":"refund.updated","data":{"object":{"object":"charge"}}}`,
	} {
		if _, err := w.Decode("shop", nil, []byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Verification fails closed for an unknown account.
	none := &stripe.Webhook{Accounts: func(string) (stripe.Account, bool) { return stripe.Account{}, false }}
	if err := none.Verify(ctx, "x", map[string]string{"stripe-signature": stripe.Sign("", time.Now(), nil)}, nil); !errors.Is(err, plugin.ErrUnauthenticated) {
		t.Fatalf("unknown account verified: %v", err)
	}
}
