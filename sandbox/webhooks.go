package sandbox

// Webhooks: the sandbox as a webhook SENDER (the HTTP contract; README.md
// predates it).
//
// Configure per account with POST /_sandbox/faults:
//
//	{"account": "a1", "webhook": {"url": "http://127.0.0.1:8080/v1/webhooks/sandbox/a1",
//	  "secret": "whsec_<base64>", "duplicates": 0, "delayMs": 0, "early": false,
//	  "statuses": ["delivered", "read"], "reorder": false, "noAck": false}}
//
// "webhook" omitted keeps the current setting; {"url": ""} turns it off; the
// secret is never shown by GET /_sandbox/faults. Invalid values -> 400
// invalid_request, nothing changes.
//
// After every COMMIT (never on a replay, whatever fault follows the commit)
// the account's URL receives message.acknowledged (status "sent"; not with
// "noAck"), then one message.status per configured status, each with its own event id, in that
// order (reversed with "reorder"). "early" delivers them synchronously before
// the HTTP response of the POST that committed (a fast provider); otherwise
// they go out "delayMs" after the commit, in the background. Every event is
// delivered 1+"duplicates" times with the same webhook-id.
//
// The status callback capability: statuses may also be "failed" or
// "undelivered" (a provider reporting that the message did not arrive: the
// outbox records it as evidence for the person deciding, never as proof of
// no effect), and with "delayMs" of a few seconds an account with neither
// keys nor lookup whose response was dropped goes to needs-human first and
// is then settled by its signed status (make run's acct-callback).
//
// POST /_sandbox/emit sends one event now and answers, synchronously,
// {"event": {...}, "deliveries": [...]}:
//
//	{"account": "a1", "type": "ack"|"status"|"echo"|"user_message",
//	 "messageId"|"intentId"|"idempotencyKey": names the effect (ack, status; echo by messageId),
//	 "status": "delivered"|"read" (status), "from", "target", "text",
//	 "eventId": reuse an id (a redelivery), "duplicates": n, "concurrent": true}
//
// An echo whose messageId names no effect, or has none (a fresh sbx_ id), is
// the bot's own message posted some other way: it matches nothing. Emitting
// never creates an effect. 404 not_found when the account has no webhook or
// the named effect does not exist; 400 invalid_request otherwise.
//
// Wire format (Standard Webhooks): headers webhook-id (= data.eventId, ids
// evt_1, evt_2, ... unique per server), webhook-timestamp (unix seconds of the
// sandbox clock, re-stamped on every attempt), webhook-signature "v1,<base64
// HMAC-SHA256 of id.timestamp.body>"; body
//
//	{"type": "message.acknowledged"|"message.status"|"message.echo"|"message.received",
//	 "timestamp": "<RFC 3339>", "data": {"eventId", "account", "messageId",
//	 "idempotencyKey", "intentId", "status", "target", "from", "text"}}
//
// A copy answered 5xx, 409, 429 or not at all is retried up to 5 attempts
// (100 ms, 200 ms, ... real time); any other answer ends it. Every attempt is
// logged: GET /_sandbox/webhooks[?account=a1] -> {"deliveries": [{account,
// eventId, type, copy, attempt, status, error, at}]}. Reset clears the log and
// abandons pending deliveries; Close waits for them to give up.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Webhook event types the sandbox sends.
const (
	EventAcknowledged = "message.acknowledged"
	EventStatus       = "message.status"
	EventEcho         = "message.echo"
	EventReceived     = "message.received"
)

// Webhook delivery limits.
const (
	MaxWebhookDuplicates    = 100
	WebhookDeliveryAttempts = 5 // per copy, on 5xx, 409, 429 or a transport error
)

// WebhookConfig is the "webhook" object of POST /_sandbox/faults.
type WebhookConfig struct {
	// URL receives the events; "" turns the account's webhooks off.
	URL string `json:"url"`
	// Secret signs them: "whsec_" + base64 of the key (Standard Webhooks).
	Secret string `json:"secret,omitempty"`
	// Duplicates: every event is delivered 1+Duplicates times (same webhook-id).
	Duplicates int `json:"duplicates,omitempty"`
	// DelayMs: automatic events go out this long after the commit.
	DelayMs int `json:"delayMs,omitempty"`
	// Early: automatic events are delivered, synchronously, after the commit
	// and before the HTTP response to the POST that committed.
	Early bool `json:"early,omitempty"`
	// Statuses sent after the acknowledgement, e.g. ["delivered","read"].
	Statuses []string `json:"statuses,omitempty"`
	// Reorder sends the automatic events of a commit in reverse order.
	Reorder bool `json:"reorder,omitempty"`
	// NoAck: no message.acknowledged, only the statuses (a provider whose
	// only callback is the status, e.g. Twilio's StatusCallback).
	NoAck bool `json:"noAck,omitempty"`
}

// statusOK: the statuses a sandbox status event may carry.
func statusOK(s string) bool {
	return s == "delivered" || s == "read" || s == "failed" || s == "undelivered"
}

// WebhookState is what GET /_sandbox/faults shows (never the secret).
type WebhookState struct {
	URL        string   `json:"url"`
	Duplicates int      `json:"duplicates"`
	DelayMs    int      `json:"delayMs"`
	Early      bool     `json:"early"`
	Statuses   []string `json:"statuses"`
	Reorder    bool     `json:"reorder"`
	NoAck      bool     `json:"noAck"`
}

func (c *WebhookConfig) validate() error {
	if c.URL == "" {
		return nil
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: webhook.url must be an absolute http(s) URL", ErrInvalidConfig)
	}
	if _, err := secretKey(c.Secret); err != nil {
		return fmt.Errorf("%w: webhook.secret: %v", ErrInvalidConfig, err)
	}
	if c.Duplicates < 0 || c.Duplicates > MaxWebhookDuplicates || c.DelayMs < 0 {
		return fmt.Errorf("%w: webhook.duplicates must be 0..%d and webhook.delayMs >= 0", ErrInvalidConfig, MaxWebhookDuplicates)
	}
	for _, s := range c.Statuses {
		if !statusOK(s) {
			return fmt.Errorf("%w: webhook.statuses may hold only \"delivered\", \"read\", \"failed\" and \"undelivered\"", ErrInvalidConfig)
		}
	}
	return nil
}

func (c *WebhookConfig) state() *WebhookState {
	if c == nil {
		return nil
	}
	return &WebhookState{URL: c.URL, Duplicates: c.Duplicates, DelayMs: c.DelayMs, Early: c.Early,
		Statuses: append([]string{}, c.Statuses...), Reorder: c.Reorder, NoAck: c.NoAck}
}

// configureWebhook applies a "webhook" config object to an account; call with s.mu held.
func (a *account) configureWebhook(c *WebhookConfig) {
	if c == nil {
		return
	}
	if c.URL == "" {
		a.hook = nil
		return
	}
	h := *c
	h.Statuses = slices.Clone(c.Statuses)
	a.hook = &h
}

func secretKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, fmt.Errorf(`must start with "whsec_"`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("must be whsec_ followed by standard base64 of a non-empty key")
	}
	return key, nil
}

// SignWebhook computes a Standard Webhooks "v1,<base64>" signature, on its
// own (deliberately not with the library the product uses to verify).
func SignWebhook(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, ts.Unix())
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// WebhookEvent is the body of every webhook the sandbox sends.
type WebhookEvent struct {
	Type      string           `json:"type"`
	Timestamp string           `json:"timestamp"`
	Data      WebhookEventData `json:"data"`
}

// WebhookEventData is the event's payload. eventId equals the webhook-id header.
type WebhookEventData struct {
	EventID        string `json:"eventId"`
	Account        string `json:"account"`
	MessageID      string `json:"messageId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	IntentID       string `json:"intentId,omitempty"`
	Status         string `json:"status,omitempty"`
	Target         string `json:"target,omitempty"`
	From           string `json:"from,omitempty"`
	Text           string `json:"text,omitempty"`
}

// WebhookDelivery is one HTTP attempt to deliver one copy of an event.
type WebhookDelivery struct {
	Account string    `json:"account"`
	EventID string    `json:"eventId"`
	Type    string    `json:"type"`
	Copy    int       `json:"copy"`    // 0 = original, 1.. = duplicates
	Attempt int       `json:"attempt"` // 1.. within the copy
	Status  int       `json:"status"`  // 0 on a transport error
	Error   string    `json:"error,omitempty"`
	At      time.Time `json:"at"` // real time
}

// webhookState is the sender's state (a field of Server; zero value ready).
type webhookState struct {
	mu         sync.Mutex
	nextEvent  int64 // event ids are never reused, not even across Reset
	nextUser   int64
	deliveries []WebhookDelivery
	client     *http.Client
}

func (w *webhookState) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deliveries = nil
}

func (w *webhookState) newEventID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nextEvent++
	return "evt_" + strconv.FormatInt(w.nextEvent, 10)
}

func (w *webhookState) httpClient() *http.Client {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.client == nil {
		w.client = &http.Client{Timeout: 5 * time.Second}
	}
	return w.client
}

func (w *webhookState) log(d WebhookDelivery) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deliveries = append(w.deliveries, d)
}

// WebhookDeliveries returns the delivery attempts for an account ("" = all), in order.
func (s *Server) WebhookDeliveries(account string) []WebhookDelivery {
	s.wh.mu.Lock()
	defer s.wh.mu.Unlock()
	out := []WebhookDelivery{}
	for _, d := range s.wh.deliveries {
		if account == "" || d.Account == account {
			out = append(out, d)
		}
	}
	return out
}

// commitWebhooksLocked prepares the automatic events of a commit; the
// returned function (nil when the account has no webhook) sends them, and
// must be called after s.mu is released. Call with s.mu held.
func (s *Server) commitWebhooksLocked(a *account, key string, req MessageRequest, messageID string, replayed bool) func() {
	if a.hook == nil || replayed {
		return nil
	}
	hook := *a.hook
	genDone := s.genDone
	var evs []WebhookEventData
	var types []string
	if !hook.NoAck {
		evs = append(evs, WebhookEventData{Account: a.name, MessageID: messageID, IdempotencyKey: key, IntentID: req.IntentID, Status: "sent", Target: req.Target})
		types = append(types, EventAcknowledged)
	}
	for _, st := range hook.Statuses {
		evs = append(evs, WebhookEventData{Account: a.name, MessageID: messageID, IdempotencyKey: key, IntentID: req.IntentID, Status: st, Target: req.Target})
		types = append(types, EventStatus)
	}
	if hook.Reorder {
		slices.Reverse(evs)
		slices.Reverse(types)
	}
	if !s.startHookLocked() {
		return nil
	}
	send := func() {
		defer s.holds.Done()
		ctx, cancel := s.hookContext(genDone)
		defer cancel()
		if hook.DelayMs > 0 && !hook.Early {
			select {
			case <-time.After(time.Duration(hook.DelayMs) * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
		for i, d := range evs {
			d.EventID = s.newEventID()
			s.deliver(ctx, hook, WebhookEvent{Type: types[i], Data: d}, false)
		}
	}
	if hook.Early {
		return send
	}
	return func() { go send() }
}

// startHookLocked registers a sender goroutine so Close waits for it.
func (s *Server) startHookLocked() bool {
	if s.isClosed {
		return false
	}
	s.holds.Add(1)
	return true
}

// hookContext is cancelled by Close, or by Reset of the generation.
func (s *Server) hookContext(genDone <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.closed:
		case <-genDone:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}

// deliver sends 1+Duplicates copies of ev (sequentially, or all at once when
// concurrent), each retried on 5xx/409/429/transport errors. It returns the
// attempts it made.
func (s *Server) deliver(ctx context.Context, hook WebhookConfig, ev WebhookEvent, concurrent bool) []WebhookDelivery {
	if ev.Timestamp == "" {
		ev.Timestamp = s.now().UTC().Format(time.RFC3339Nano)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		panic(err) // only strings
	}
	var mu sync.Mutex
	var out []WebhookDelivery
	one := func(copyN int) {
		for attempt := 1; attempt <= WebhookDeliveryAttempts; attempt++ {
			d := s.post(ctx, hook, ev, body, copyN, attempt)
			mu.Lock()
			out = append(out, d)
			mu.Unlock()
			retry := d.Status == 0 || d.Status >= 500 || d.Status == http.StatusConflict || d.Status == http.StatusTooManyRequests
			if !retry || ctx.Err() != nil {
				return
			}
			select {
			case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
	}
	if !concurrent {
		for c := 0; c <= hook.Duplicates; c++ {
			one(c)
		}
		return out
	}
	var wg sync.WaitGroup
	for c := 0; c <= hook.Duplicates; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			one(c)
		}(c)
	}
	wg.Wait()
	return out
}

func (s *Server) post(ctx context.Context, hook WebhookConfig, ev WebhookEvent, body []byte, copyN, attempt int) (d WebhookDelivery) {
	d = WebhookDelivery{Account: ev.Data.Account, EventID: ev.Data.EventID, Type: ev.Type, Copy: copyN, Attempt: attempt}
	defer func() {
		d.At = time.Now().UTC()
		s.wh.log(d)
		s.log.Info("webhook", slog.String("account", d.Account), slog.String("eventId", d.EventID), slog.String("type", d.Type),
			slog.Int("copy", copyN), slog.Int("attempt", attempt), slog.Int("status", d.Status), slog.String("error", d.Error))
	}()
	sig, err := SignWebhook(hook.Secret, ev.Data.EventID, s.now(), body)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		d.Error = err.Error()
		return d
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", ev.Data.EventID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(s.now().Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := s.wh.httpClient().Do(req)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	d.Status = resp.StatusCode
	return d
}

// EmitRequest is the body of POST /_sandbox/emit.
type EmitRequest struct {
	Account string `json:"account"`
	// Type: "ack", "status", "echo" or "user_message".
	Type string `json:"type"`
	// MessageID names an effect (ack, status, echo of a committed message);
	// an echo with an unknown or no messageId is an echo of a message the
	// sandbox never committed through its API (sent by the bot elsewhere).
	MessageID string `json:"messageId,omitempty"`
	// IntentID or IdempotencyKey name an effect (ack, status) instead.
	IntentID       string `json:"intentId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	Status         string `json:"status,omitempty"` // status: delivered | read | failed | undelivered
	From           string `json:"from,omitempty"`   // user_message
	Target         string `json:"target,omitempty"`
	Text           string `json:"text,omitempty"`
	// EventID reuses an event id (a provider redelivering an old event).
	EventID string `json:"eventId,omitempty"`
	// Duplicates overrides the account's webhook.duplicates for this event.
	Duplicates *int `json:"duplicates,omitempty"`
	// Concurrent delivers the copies at the same time instead of one by one.
	Concurrent bool `json:"concurrent,omitempty"`
}

// EmitResponse is the answer of POST /_sandbox/emit: the event and every
// delivery attempt (emit is synchronous).
type EmitResponse struct {
	Event      WebhookEvent      `json:"event"`
	Deliveries []WebhookDelivery `json:"deliveries"`
}

// Emit builds and delivers one event now (the Go API of POST /_sandbox/emit).
// Errors wrap ErrInvalidConfig (bad request) or ErrNotFound (no such effect,
// or no webhook configured for the account).
func (s *Server) Emit(r EmitRequest) (EmitResponse, error) {
	if r.Account == "" {
		return EmitResponse{}, fmt.Errorf("%w: account is required", ErrInvalidConfig)
	}
	if r.Duplicates != nil && (*r.Duplicates < 0 || *r.Duplicates > MaxWebhookDuplicates) {
		return EmitResponse{}, fmt.Errorf("%w: duplicates must be 0..%d", ErrInvalidConfig, MaxWebhookDuplicates)
	}
	s.mu.Lock()
	a, ok := s.accounts[r.Account]
	if !ok || a.hook == nil {
		s.mu.Unlock()
		return EmitResponse{}, fmt.Errorf("%w: account %q has no webhook configured", ErrNotFound, r.Account)
	}
	hook := *a.hook
	genDone := s.genDone
	var effect *Effect
	for i := range s.effects {
		e := s.effects[i]
		if e.Account == r.Account && ((r.MessageID != "" && e.MessageID == r.MessageID) ||
			(r.MessageID == "" && r.IntentID != "" && e.IntentID == r.IntentID) ||
			(r.MessageID == "" && r.IdempotencyKey != "" && e.IdempotencyKey == r.IdempotencyKey)) {
			effect = &e
			break
		}
	}
	if !s.startHookLocked() {
		s.mu.Unlock()
		return EmitResponse{}, fmt.Errorf("%w: the sandbox is closed", ErrNotFound)
	}
	s.mu.Unlock()
	defer s.holds.Done()

	d := WebhookEventData{Account: r.Account}
	var typ string
	switch r.Type {
	case "ack", "status":
		if effect == nil {
			return EmitResponse{}, fmt.Errorf("%w: no effect on %q with that messageId, intentId or idempotencyKey", ErrNotFound, r.Account)
		}
		d.MessageID, d.IdempotencyKey, d.IntentID, d.Target = effect.MessageID, effect.IdempotencyKey, effect.IntentID, effect.Target
		typ, d.Status = EventAcknowledged, "sent"
		if r.Type == "status" {
			if !statusOK(r.Status) {
				return EmitResponse{}, fmt.Errorf("%w: status must be delivered, read, failed or undelivered", ErrInvalidConfig)
			}
			typ, d.Status = EventStatus, r.Status
		}
	case "echo":
		typ = EventEcho
		switch {
		case effect != nil && r.MessageID != "":
			d.MessageID, d.Target = effect.MessageID, effect.Target
		case r.MessageID != "":
			d.MessageID, d.Target = r.MessageID, r.Target
		default:
			s.mu.Lock()
			s.nextID++
			d.MessageID = "sbx_" + strconv.FormatInt(s.nextID, 10)
			s.mu.Unlock()
			d.Target = r.Target
		}
		d.Text = r.Text
	case "user_message":
		typ = EventReceived
		s.wh.mu.Lock()
		s.wh.nextUser++
		d.MessageID = "usr_" + strconv.FormatInt(s.wh.nextUser, 10)
		s.wh.mu.Unlock()
		d.From, d.Target, d.Text = r.From, r.Target, r.Text
		if d.From == "" {
			d.From = "user-1"
		}
	default:
		return EmitResponse{}, fmt.Errorf("%w: type must be ack, status, echo or user_message", ErrInvalidConfig)
	}
	d.EventID = r.EventID
	if d.EventID == "" {
		d.EventID = s.newEventID()
	}
	if r.Duplicates != nil {
		hook.Duplicates = *r.Duplicates
	}
	ctx, cancel := s.hookContext(genDone)
	defer cancel()
	ev := WebhookEvent{Type: typ, Data: d}
	ev.Timestamp = s.now().UTC().Format(time.RFC3339Nano)
	out := s.deliver(ctx, hook, ev, r.Concurrent)
	return EmitResponse{Event: ev, Deliveries: out}, nil
}

// ErrNotFound: the emit names no effect, or the account has no webhook.
var ErrNotFound = errors.New("not found")

// handleEmit is POST /_sandbox/emit.
func (s *Server) handleEmit(w http.ResponseWriter, r *http.Request) {
	var req EmitRequest
	if !s.decodeControl(w, r, &req, "bad emit request") {
		return
	}
	res, err := s.Emit(req)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, res)
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error(), nil)
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error(), nil)
	}
}

// handleWebhooks is GET /_sandbox/webhooks[?account=a1].
func (s *Server) handleWebhooks(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Deliveries []WebhookDelivery `json:"deliveries"`
	}{s.WebhookDeliveries(r.URL.Query().Get("account"))})
}
