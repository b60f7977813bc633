package webhook

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/providers/sandboxprovider"
	"github.com/botharness/outbox/adapters/webhooksig"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

const secret = "whsec_aGFuZGxlci10ZXN0LXNlY3JldC0wMTIzNDU2Nzg5"

var now = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// stubStore fails the test if a refused request reaches storage.
type stubStore struct {
	calls   int
	seenErr error
	claim   webhook.InboundClaim
}

func (s *stubStore) SeenEvent(context.Context, string, string, string) (*webhook.EventRecord, error) {
	s.calls++
	return nil, s.seenErr
}
func (s *stubStore) RecordEvent(context.Context, webhook.EventRecord) error { s.calls++; return nil }
func (s *stubStore) BindEvent(context.Context, webhook.EventRecord, func(*core.Intent) (webhook.BindPlan, error)) (*core.Intent, error) {
	s.calls++
	return nil, core.ErrNotFound
}
func (s *stubStore) IntentForMessage(context.Context, string, string, string) (string, error) {
	s.calls++
	return "", core.ErrNotFound
}
func (s *stubStore) ClaimInbound(context.Context, webhook.EventRecord, time.Time, time.Time) (webhook.InboundClaim, error) {
	s.calls++
	return s.claim, nil
}
func (s *stubStore) MarkForwarded(context.Context, webhook.EventRecord, time.Time) error {
	s.calls++
	return nil
}

type stubInbox struct{ n int }

func (q *stubInbox) Forward(context.Context, webhook.InboxMessage) error { q.n++; return nil }

func handler(st *stubStore, inbox *stubInbox) *Handler {
	v := &webhooksig.Verifier{Secrets: webhooksig.StaticSecrets{"sandbox/a1": {secret}}, Now: func() time.Time { return now }}
	return &Handler{
		Webhooks:  &webhook.Webhooks{Store: st, Inbox: inbox, Clock: core.ClockFunc(func() time.Time { return now }), Log: slog.New(slog.DiscardHandler)},
		Providers: map[string]Provider{"sandbox": &sandboxprovider.Webhook{Verifier: v}},
		Log:       slog.New(slog.DiscardHandler),
	}
}

func request(t *testing.T, provider, id, body string, b64 bool) events.APIGatewayV2HTTPRequest {
	t.Helper()
	sig, err := webhooksig.Sign(id, now, []byte(body), secret)
	if err != nil {
		t.Fatal(err)
	}
	req := events.APIGatewayV2HTTPRequest{
		RouteKey:       "POST /v1/webhooks/{provider}/{account}",
		PathParameters: map[string]string{"provider": provider, "account": "a1"},
		Headers:        map[string]string{"webhook-id": id, "webhook-timestamp": strconv.FormatInt(now.Unix(), 10), "webhook-signature": sig},
		Body:           body,
	}
	if b64 {
		req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(body)), true
	}
	return req
}

const inbound = `{"type":"message.received","data":{"eventId":"evt_1","account":"a1","from":"u","text":"hi"}}`

func code(t *testing.T, r events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	var b struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(r.Body), &b)
	return b.Error.Code
}

// wantRefused sends a request the handler must refuse with status (and,
// when set, the error code).
func wantRefused(t *testing.T, h *Handler, name string, req events.APIGatewayV2HTTPRequest, status int, wantCode string) {
	t.Helper()
	r, _ := h.Handle(context.Background(), req)
	if r.StatusCode != status || wantCode != "" && code(t, r) != wantCode {
		t.Errorf("%s: %d %s", name, r.StatusCode, r.Body)
	}
}

// wantNothingStored fails when refused requests reached the store (calls
// made before them) or forwarded more than the one accepted message.
func wantNothingStored(t *testing.T, st *stubStore, inbox *stubInbox, calls int) {
	t.Helper()
	if st.calls != calls || inbox.n != 1 {
		t.Fatalf("refused requests reached the store (%d calls, %d forwarded)", st.calls-calls, inbox.n)
	}
}

func TestWebhookHandler(t *testing.T) {
	ctx := context.Background()
	st, inbox := &stubStore{}, &stubInbox{}
	h := handler(st, inbox)

	r, _ := h.Handle(ctx, request(t, "sandbox", "evt_1", inbound, true))
	if r.StatusCode != 200 || !strings.Contains(r.Body, `"result":"forwarded"`) || inbox.n != 1 {
		t.Fatalf("base64 body: %d %s", r.StatusCode, r.Body)
	}

	st.claim = webhook.ClaimBusy
	r, _ = h.Handle(ctx, request(t, "sandbox", "evt_1", inbound, false))
	if r.StatusCode != 409 || code(t, r) != "event_in_progress" || r.Headers["Retry-After"] == "" {
		t.Fatalf("busy: %d %s %v", r.StatusCode, r.Body, r.Headers)
	}

	st.seenErr = errors.New("throttled")
	r, _ = h.Handle(ctx, request(t, "sandbox", "evt_1", inbound, false))
	if r.StatusCode != 500 || code(t, r) != "internal" || strings.Contains(r.Body, "throttled") {
		t.Fatalf("store failure: %d %s", r.StatusCode, r.Body)
	}

	calls := st.calls
	tampered := request(t, "sandbox", "evt_1", inbound, false)
	tampered.Body = strings.Replace(tampered.Body, "hi", "ho", 1)
	for name, req := range map[string]events.APIGatewayV2HTTPRequest{
		"tampered":         tampered,
		"unknown provider": request(t, "pigeon", "evt_1", inbound, false),
		"bad base64": func() events.APIGatewayV2HTTPRequest {
			q := request(t, "sandbox", "evt_1", inbound, false)
			q.IsBase64Encoded = true
			q.Body = "%%%"
			return q
		}(),
		"data not object": request(t, "sandbox", "evt_2", `{"type":"message.echo","data":[1]}`, false),
		"no type":         request(t, "sandbox", "evt_2", `{"data":{"eventId":"evt_2","account":"a1"}}`, false),
		"echo without id": request(t, "sandbox", "evt_2", `{"type":"message.echo","data":{"eventId":"evt_2","account":"a1"}}`, false),
		"bad timestamp":   request(t, "sandbox", "evt_2", `{"type":"message.echo","timestamp":"noon","data":{"eventId":"evt_2","account":"a1","messageId":"m"}}`, false),
		"trailing data":   request(t, "sandbox", "evt_2", `{"type":"x","data":{}} {}`, false),
	} {
		r, _ := h.Handle(ctx, req)
		if r.StatusCode < 400 || r.StatusCode >= 500 {
			t.Errorf("%s: %d %s", name, r.StatusCode, r.Body)
		}
	}
	if st.calls != calls {
		t.Fatalf("refused requests reached the store (%d calls)", st.calls-calls)
	}
}
