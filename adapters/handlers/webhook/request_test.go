package webhook

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// urlDialect signs the raw path and query (as Twilio does) and reads a
// form body: it must get them exactly as received.
type urlDialect struct{ got plugin.Request }

func (d *urlDialect) Verify(context.Context, string, map[string]string, []byte) error {
	return plugin.ErrUnauthenticated
}
func (d *urlDialect) Decode(string, map[string]string, []byte) (webhook.ProviderEvent, error) {
	return webhook.ProviderEvent{}, &core.ValidationError{Code: core.CodeInvalidField}
}
func (d *urlDialect) VerifyRequest(_ context.Context, _ string, r plugin.Request) error {
	d.got = r
	if r.RawQuery != "intent=it_%41b&x=1" || r.RawPath != "/v1/webhooks/u/acct%2Fone" {
		return plugin.ErrUnauthenticated
	}
	return nil
}
func (d *urlDialect) DecodeRequest(account string, r plugin.Request) (webhook.ProviderEvent, error) {
	f, _ := url.ParseQuery(string(r.Body))
	q, _ := url.ParseQuery(r.RawQuery)
	return webhook.ProviderEvent{Account: account, EventID: f.Get("Sid") + ":" + f.Get("Status"), Kind: webhook.EventOther, Type: "x", IntentID: q.Get("intent")}, nil
}

// handshake answers GETs.
type handshake struct{ urlDialect }

func (h *handshake) Handshake(_ context.Context, _ string, r plugin.Request) events.APIGatewayV2HTTPResponse {
	q, _ := url.ParseQuery(r.RawQuery)
	return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: q.Get("hub.challenge"), Headers: map[string]string{"Content-Type": "text/plain"}}
}

func TestRequestDialectGetsTheRawRequestAndGETsAreHandshakes(t *testing.T) {
	st := &stubStore{}
	d, hs := &urlDialect{}, &handshake{}
	h := &Handler{
		Webhooks:  &webhook.Webhooks{Store: st, Inbox: &stubInbox{}, Clock: core.ClockFunc(func() time.Time { return now }), Log: slog.New(slog.DiscardHandler)},
		Providers: map[string]Provider{"u": d, "w": hs},
		Log:       slog.New(slog.DiscardHandler),
	}
	req := func(provider, method, rawPath, rawQuery, body string) events.APIGatewayV2HTTPRequest {
		r := events.APIGatewayV2HTTPRequest{RawPath: rawPath, RawQueryString: rawQuery, Body: body,
			PathParameters: map[string]string{"provider": provider, "account": "acct/one"},
			Headers:        map[string]string{"content-type": "application/x-www-form-urlencoded"}}
		r.RequestContext.HTTP.Method = method
		return r
	}
	ctx := context.Background()
	r, _ := h.Handle(ctx, req("u", "POST", "/v1/webhooks/u/acct%2Fone", "intent=it_%41b&x=1", "Sid=SM1&Status=queued"))
	if r.StatusCode != 200 || string(d.got.Body) != "Sid=SM1&Status=queued" || st.calls == 0 {
		t.Fatalf("form callback: %d %s (got %+v)", r.StatusCode, r.Body, d.got)
	}
	// The query is verified as received: re-encoded, it is refused.
	wantRefused(t, h, "query re-encoded", req("u", "POST", "/v1/webhooks/u/acct%2Fone", "intent=it_Ab&x=1", "Sid=SM1&Status=queued"), 401, "invalid_signature")
	// GET: a handshake where the dialect has one, nothing stored; else 404.
	calls := st.calls
	r, _ = h.Handle(ctx, req("w", "GET", "/v1/webhooks/w/acct%2Fone", "hub.mode=subscribe&hub.challenge=1158201444", ""))
	if r.StatusCode != 200 || r.Body != "1158201444" {
		t.Fatalf("handshake: %d %s", r.StatusCode, r.Body)
	}
	r, _ = h.Handle(ctx, req("u", "GET", "/v1/webhooks/u/acct%2Fone", "hub.challenge=1", ""))
	if r.StatusCode != 404 || st.calls != calls {
		t.Fatalf("GET without a handshake: %d %s, %d store calls", r.StatusCode, r.Body, st.calls-calls)
	}
}

// snsDialect claims messages that start with its prefix.
type snsDialect struct {
	urlDialect
	prefix string
}

func (d *snsDialect) DecodeNotification(msg []byte) (string, []webhook.ProviderEvent, bool, error) {
	if len(msg) < len(d.prefix) || string(msg[:len(d.prefix)]) != d.prefix {
		return "", nil, false, nil
	}
	return "acct", []webhook.ProviderEvent{{EventID: string(msg), Kind: webhook.EventOther, Type: "x"}}, true, nil
}

func TestHandleSNSOffersEachMessageToTheDialectThatClaimsIt(t *testing.T) {
	st := &stubStore{}
	h := &Handler{
		Webhooks:  &webhook.Webhooks{Store: st, Inbox: &stubInbox{}, Clock: core.ClockFunc(func() time.Time { return now }), Log: slog.New(slog.DiscardHandler)},
		Providers: map[string]Provider{"a": &snsDialect{prefix: "A:"}, "b": &snsDialect{prefix: "B:"}, "plain": &urlDialect{}},
		Log:       slog.New(slog.DiscardHandler),
	}
	rec := func(m string) events.SNSEventRecord {
		return events.SNSEventRecord{EventSource: "aws:sns", SNS: events.SNSEntity{MessageID: m, Message: m}}
	}
	if err := h.HandleSNS(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{rec("A:1"), rec("B:2"), rec("nobody's")}}); err != nil {
		t.Fatal(err)
	}
	if st.calls == 0 {
		t.Fatal("claimed messages were not applied")
	}
	calls := st.calls
	if err := h.HandleSNS(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{rec("nobody's")}}); err != nil || st.calls != calls {
		t.Fatalf("an unclaimed message reached the store (%v, %d calls)", err, st.calls-calls)
	}
}
