package sandbox

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const testSecret = "whsec_c2FuZGJveC13ZWJob29rLXNlY3JldC0wMTIzNDU2Nzg5"

// receiver is a webhook endpoint that verifies every request with the
// reference Standard Webhooks library and records it.
type receiver struct {
	t      *testing.T
	mu     sync.Mutex
	got    []WebhookEvent
	ids    []string
	answer func(n int) int // status for the n-th request (0-based); nil = 200
	delay  time.Duration
	n      int
	srv    *httptest.Server
	now    func() time.Time
}

func newReceiver(t *testing.T, now func() time.Time) *receiver {
	r := &receiver{t: t, now: now}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	wh, _ := standardwebhooks.NewWebhook(testSecret)
	if err := wh.VerifyIgnoringTimestamp(body, req.Header); err != nil {
		r.t.Errorf("signature does not verify: %v", err)
	}
	if ts := req.Header.Get("webhook-timestamp"); ts != strconv.FormatInt(r.now().Unix(), 10) {
		r.t.Errorf("webhook-timestamp %s, want the sandbox clock's %d", ts, r.now().Unix())
	}
	var ev WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		r.t.Errorf("body %s: %v", body, err)
	}
	if ev.Data.EventID != req.Header.Get("webhook-id") {
		r.t.Errorf("eventId %q != webhook-id %q", ev.Data.EventID, req.Header.Get("webhook-id"))
	}
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
	r.mu.Lock()
	n := r.n
	r.n++
	r.got = append(r.got, ev)
	r.ids = append(r.ids, req.Header.Get("webhook-id"))
	answer := r.answer
	r.mu.Unlock()
	status := http.StatusOK
	if answer != nil {
		status = answer(n)
	}
	w.WriteHeader(status)
}

func (r *receiver) events() []WebhookEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]WebhookEvent{}, r.got...)
}

func (e *env) hook(account string, r *receiver, mod func(*WebhookConfig)) {
	e.t.Helper()
	c := &WebhookConfig{URL: r.srv.URL + "/v1/webhooks/sandbox/" + account, Secret: testSecret}
	if mod != nil {
		mod(c)
	}
	e.configure(Config{Account: account, Webhook: c})
}

func TestWebhookAckAndStatusesAfterCommit(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, e.clock.Now)
	e.configure(honour("a1", 3600))
	e.hook("a1", r, func(c *WebhookConfig) { c.Statuses = []string{"delivered", "read"} })
	m := e.send("a1", "key-1", "chan-1", sendOpts{intentID: "it_1"}).message(t)
	waitFor(t, "three webhooks", func() bool { return len(r.events()) == 3 })
	evs := r.events()
	for i, want := range []struct{ typ, status string }{{EventAcknowledged, "sent"}, {EventStatus, "delivered"}, {EventStatus, "read"}} {
		d := evs[i].Data
		if evs[i].Type != want.typ || d.Status != want.status || d.MessageID != m.ID || d.IdempotencyKey != "key-1" ||
			d.IntentID != "it_1" || d.Account != "a1" || d.Target != "chan-1" || evs[i].Timestamp == "" {
			t.Fatalf("event %d: %+v", i, evs[i])
		}
	}
	if evs[0].Data.EventID == evs[1].Data.EventID {
		t.Fatal("events share an id")
	}
	// A replay is no new effect and sends nothing.
	if res := e.send("a1", "key-1", "chan-1", sendOpts{intentID: "it_1"}); res.status != http.StatusOK {
		t.Fatalf("replay %d", res.status)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(r.events()); n != 3 {
		t.Fatalf("replay sent webhooks: %d", n)
	}
	st := e.sb.State("a1")
	if st.Webhook == nil || st.Webhook.URL == "" || len(st.Webhook.Statuses) != 2 {
		t.Fatalf("state %+v", st.Webhook)
	}
	raw := e.do(nil, http.MethodGet, "/_sandbox/faults?account=a1", nil, "")
	if strings.Contains(string(raw.body), "whsec_") {
		t.Fatal("secret leaked by the control API")
	}
	dl := e.do(nil, http.MethodGet, "/_sandbox/webhooks?account=a1", nil, "")
	var dr struct{ Deliveries []WebhookDelivery }
	dl.json(t, &dr)
	if len(dr.Deliveries) != 3 || dr.Deliveries[0].Status != 200 || dr.Deliveries[0].Type != EventAcknowledged {
		t.Fatalf("deliveries %+v", dr.Deliveries)
	}
	// Turning it off.
	e.configure(Config{Account: "a1", Webhook: &WebhookConfig{}})
	e.send("a1", "key-2", "chan-1", sendOpts{})
	time.Sleep(50 * time.Millisecond)
	if n := len(r.events()); n != 3 || e.sb.State("a1").Webhook != nil {
		t.Fatalf("webhooks after turning off: %d", n)
	}
}

func TestWebhookDuplicatesRetriesAndReorder(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, e.clock.Now)
	r.answer = func(n int) int {
		if n == 0 {
			return http.StatusServiceUnavailable // the first request is retried
		}
		return http.StatusOK
	}
	e.hook("a1", r, func(c *WebhookConfig) { c.Duplicates = 2; c.Statuses = []string{"read"}; c.Reorder = true })
	e.mustSend("a1", "k", "t", http.StatusCreated)
	waitFor(t, "deliveries", func() bool { return len(r.events()) == 7 })
	evs := r.events()
	// Reordered: the read status first (its 503 and retry, then two copies), then the ack thrice.
	for i, typ := range []string{EventStatus, EventStatus, EventStatus, EventStatus, EventAcknowledged, EventAcknowledged, EventAcknowledged} {
		if evs[i].Type != typ {
			t.Fatalf("event %d is %s, want %s", i, evs[i].Type, typ)
		}
	}
	if evs[0].Data.EventID != evs[3].Data.EventID || evs[4].Data.EventID != evs[6].Data.EventID {
		t.Fatal("duplicates must keep their webhook-id")
	}
	// The sandbox records a delivery when its response is back, after the
	// receiver has seen it: wait for the record too.
	waitFor(t, "delivery records", func() bool { return len(e.sb.WebhookDeliveries("a1")) >= 7 })
	ds := e.sb.WebhookDeliveries("a1")
	if len(ds) != 7 || ds[0].Status != 503 || ds[1].Attempt != 2 || ds[1].Copy != 0 || ds[2].Copy != 1 {
		t.Fatalf("deliveries %+v", ds)
	}
}

func TestWebhookEarlyIsDeliveredBeforeTheResponse(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, e.clock.Now)
	r.delay = 150 * time.Millisecond
	e.hook("a1", r, func(c *WebhookConfig) { c.Early = true })
	start := time.Now()
	e.mustSend("a1", "k", "t", http.StatusCreated)
	if took := time.Since(start); took < 150*time.Millisecond || len(r.events()) != 1 {
		t.Fatalf("response after %v with %d webhooks: the early ack must arrive first", took, len(r.events()))
	}
	// drop_after_commit still acknowledges: the effect happened.
	e.configure(Config{Account: "a1", Faults: []Fault{{Kind: FaultDropAfterCommit}}})
	if res := e.send("a1", "k2", "t", sendOpts{}); res.err == nil {
		t.Fatalf("want a dropped connection, got %d", res.status)
	}
	if evs := r.events(); len(evs) != 2 || evs[1].Data.IdempotencyKey != "k2" {
		t.Fatalf("events %+v", evs)
	}
}

func TestWebhookDelayAndClose(t *testing.T) {
	clock := newFakeClock()
	sb := New(clock.Now)
	srv := httptest.NewServer(sb)
	defer srv.Close()
	r := newReceiver(t, clock.Now)
	if _, err := sb.Configure(Config{Account: "a1", Webhook: &WebhookConfig{URL: r.srv.URL, Secret: testSecret, DelayMs: 60000}}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/accounts/a1/messages", strings.NewReader(`{"action":"a","target":"t"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("send: %v", err)
	}
	resp.Body.Close()
	done := make(chan struct{})
	go func() { sb.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close waited for a delayed webhook")
	}
	if n := len(r.events()); n != 0 {
		t.Fatalf("a webhook went out after Close: %d", n)
	}
}

func TestWebhookEmit(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, e.clock.Now)
	emit := func(body string) (int, EmitResponse, string) {
		res := e.do(nil, http.MethodPost, "/_sandbox/emit", map[string]string{"Content-Type": "application/json"}, body)
		var er EmitResponse
		if res.status == http.StatusOK {
			res.json(t, &er)
			return res.status, er, ""
		}
		return res.status, er, res.errorCode(t)
	}
	if st, _, code := emit(`{"account":"a1","type":"echo"}`); st != http.StatusNotFound || code != "not_found" {
		t.Fatalf("no webhook configured: %d %s", st, code)
	}
	e.hook("a1", r, nil)
	m := e.send("a1", "key-1", "chan-1", sendOpts{intentID: "it_1"}).message(t)
	waitFor(t, "ack", func() bool { return len(r.events()) == 1 })
	effects := e.count("")

	_, er, _ := emit(`{"account":"a1","type":"echo","target":"chan-9","text":"hi from the bot elsewhere"}`)
	if er.Event.Type != EventEcho || !strings.HasPrefix(er.Event.Data.MessageID, "sbx_") || er.Event.Data.MessageID == m.ID ||
		len(er.Deliveries) != 1 || er.Deliveries[0].Status != 200 {
		t.Fatalf("unmatched echo %+v", er)
	}
	_, er, _ = emit(`{"account":"a1","type":"echo","messageId":"` + m.ID + `"}`)
	if er.Event.Data.MessageID != m.ID || er.Event.Data.Target != "chan-1" || er.Event.Data.IntentID != "" {
		t.Fatalf("echo of an effect %+v", er.Event)
	}
	_, er, _ = emit(`{"account":"a1","type":"ack","intentId":"it_1","eventId":"evt_custom","duplicates":2,"concurrent":true}`)
	if er.Event.Type != EventAcknowledged || er.Event.Data.MessageID != m.ID || er.Event.Data.EventID != "evt_custom" || len(er.Deliveries) != 3 {
		t.Fatalf("ack %+v", er)
	}
	_, er, _ = emit(`{"account":"a1","type":"status","idempotencyKey":"key-1","status":"read"}`)
	if er.Event.Type != EventStatus || er.Event.Data.Status != "read" || er.Event.Data.MessageID != m.ID {
		t.Fatalf("status %+v", er.Event)
	}
	_, er, _ = emit(`{"account":"a1","type":"user_message","from":"u-7","target":"chan-1","text":"hello bot"}`)
	if er.Event.Type != EventReceived || er.Event.Data.From != "u-7" || er.Event.Data.Text != "hello bot" || !strings.HasPrefix(er.Event.Data.MessageID, "usr_") {
		t.Fatalf("user message %+v", er.Event)
	}
	if n := e.count(""); n != effects {
		t.Fatalf("emitting changed the effect count: %d -> %d", effects, n)
	}
	for body, want := range map[string]int{
		`{"account":"a1","type":"ack","messageId":"sbx_999"}`:         http.StatusNotFound,
		`{"account":"a1","type":"status","messageId":"` + m.ID + `"}`: http.StatusBadRequest,
		`{"account":"a1","type":"explode"}`:                           http.StatusBadRequest,
		`{"type":"echo"}`:                                             http.StatusBadRequest,
		`{"account":"a1","type":"echo","duplicates":-1}`:              http.StatusBadRequest,
		`{"account":"a1","type":"echo","color":"red"}`:                http.StatusBadRequest,
	} {
		if st, _, _ := emit(body); st != want {
			t.Errorf("%s: %d, want %d", body, st, want)
		}
	}
}

func TestWebhookBadConfigRejected(t *testing.T) {
	e := newEnv(t)
	for _, body := range []string{
		`{"account":"a1","webhook":{"url":"ftp://x","secret":"` + testSecret + `"}}`,
		`{"account":"a1","webhook":{"url":"/relative","secret":"` + testSecret + `"}}`,
		`{"account":"a1","webhook":{"url":"http://x"}}`,
		`{"account":"a1","webhook":{"url":"http://x","secret":"plain"}}`,
		`{"account":"a1","webhook":{"url":"http://x","secret":"` + testSecret + `","duplicates":-1}}`,
		`{"account":"a1","webhook":{"url":"http://x","secret":"` + testSecret + `","delayMs":-1}}`,
		`{"account":"a1","webhook":{"url":"http://x","secret":"` + testSecret + `","statuses":["lost"]}}`,
		`{"account":"a1","webhook":{"url":"http://x","secret":"` + testSecret + `","retries":3}}`,
	} {
		r := e.do(nil, http.MethodPost, "/_sandbox/faults", map[string]string{"Content-Type": "application/json"}, body)
		if r.status != http.StatusBadRequest || r.errorCode(t) != "invalid_request" {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
	if len(e.sb.States()) != 0 {
		t.Fatalf("rejected config changed state: %+v", e.sb.States())
	}
}
