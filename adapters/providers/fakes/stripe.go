package fakes

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Stripe is a fake of Stripe's Refunds API and its webhooks.
//
// Written from Stripe's documentation:
//   - POST /v1/refunds (https://docs.stripe.com/api/refunds/create),
//     form-encoded parameters, the secret key as Bearer (or Basic user)
//     (https://docs.stripe.com/api/authentication); one of payment_intent or
//     charge; amount at most what is left to refund; metadata[...];
//     answers a Refund object (https://docs.stripe.com/api/refunds/object).
//   - Errors (https://docs.stripe.com/api/errors): {"error": {"type",
//     "code", "message", "param"}}; 401 for a missing or invalid key, 400
//     invalid_request_error (parameter_missing, resource_missing,
//     amount_too_large, charge_already_refunded), 429 rate_limit with no
//     Retry-After, 500 api_error.
//   - Idempotency (https://docs.stripe.com/idempotency): the status and
//     body of the first request with a key are saved once the endpoint
//     began executing (after authentication and validation) and replayed
//     for the same key with Idempotent-Replayed: true, a 500 too; the same
//     key with other parameters is a 400 idempotency_error; while the first
//     request with a key is still executing, a second is 409
//     idempotency_key_in_use (nothing saved).
//   - Webhook events (https://docs.stripe.com/api/events/object) signed
//     with Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>"
//     keyed with the whole whsec_ secret> (https://docs.stripe.com/webhooks#verify-manually).
type Stripe struct {
	now    func() time.Time
	faults *faultQueue
	base   string

	mu       sync.Mutex
	keys     map[string]bool // valid secret keys
	intents  map[string]*stripeIntent
	saved    map[string]*stripeSaved // idempotency key -> saved answer
	refunds  []StripeRefund
	requests []StripeRequest
	nextID   int
}

type stripeIntent struct {
	amount, refunded int64
}

type stripeSaved struct {
	params   string
	done     bool
	status   int
	body     []byte
	refundID string
}

// StripeRefund is a refund the fake really created (a side effect).
type StripeRefund struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	PaymentIntent string            `json:"payment_intent"`
	Status        string            `json:"status"`
	Created       int64             `json:"created"`
	Metadata      map[string]string `json:"metadata"`
}

// StripeRequest is one POST /v1/refunds the fake received (authenticated).
type StripeRequest struct {
	IdempotencyKey string
	IntentID       string // metadata[outbox_intent_id]
	Status         int
	Replayed       bool
}

// NewStripe starts a Stripe fake.
func NewStripe(tb TB, now func() time.Time) *Stripe {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	s := &Stripe{now: now, faults: newFaultQueue(), keys: map[string]bool{}, intents: map[string]*stripeIntent{}, saved: map[string]*stripeSaved{}}
	srv := start(tb, http.HandlerFunc(s.serve), s.faults)
	s.base = srv.URL
	return s
}

// URL is the API root (the equivalent of https://api.stripe.com).
func (s *Stripe) URL() string { return s.base }

// AddKey makes a secret key valid.
func (s *Stripe) AddKey(key string) { s.mu.Lock(); s.keys[key] = true; s.mu.Unlock() }

// AddPaymentIntent creates a succeeded PaymentIntent (pi_…) or Charge (ch_…)
// of amount (smallest currency unit).
func (s *Stripe) AddPaymentIntent(id string, amount int64) {
	s.mu.Lock()
	s.intents[id] = &stripeIntent{amount: amount}
	s.mu.Unlock()
}

// Inject queues faults for the next refunds that pass authentication and validation.
func (s *Stripe) Inject(fs ...Fault) { s.faults.push(fs...) }

// Release lets held responses go.
func (s *Stripe) Release() { s.faults.Release() }

// Refunds is the number of refunds really created.
func (s *Stripe) Refunds() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.refunds) }

// RefundsFor counts refunds whose metadata[outbox_intent_id] is intentID.
func (s *Stripe) RefundsFor(intentID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.refunds {
		if r.Metadata["outbox_intent_id"] == intentID {
			n++
		}
	}
	return n
}

// RefundFor returns the (first) refund created for intentID.
func (s *Stripe) RefundFor(intentID string) (StripeRefund, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.refunds {
		if r.Metadata["outbox_intent_id"] == intentID {
			return r, true
		}
	}
	return StripeRefund{}, false
}

// RequestsFor lists the refund requests carrying intentID in their metadata, in order.
func (s *Stripe) RequestsFor(intentID string) []StripeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []StripeRequest
	for _, r := range s.requests {
		if r.IntentID == intentID {
			out = append(out, r)
		}
	}
	return out
}

func writeStripeError(w http.ResponseWriter, status int, typ, code, param, msg string) []byte {
	e := map[string]any{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
		e["doc_url"] = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(code, "_", "-")
	}
	if param != "" {
		e["param"] = param
	}
	body, _ := json.Marshal(map[string]any{"error": e})
	writeStripe(w, status, body, false)
	return body
}

func writeStripe(w http.ResponseWriter, status int, body []byte, replayed bool) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_fake")
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Stripe) authorized(r *http.Request) bool {
	key := ""
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		key = tok
	} else if user, _, ok := r.BasicAuth(); ok {
		key = user
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return key != "" && s.keys[key]
}

func (s *Stripe) serve(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeStripeError(w, http.StatusUnauthorized, "invalid_request_error", "", "", "Invalid API Key provided: sk_****")
		return
	}
	if r.URL.Path != "/v1/refunds" || r.Method != http.MethodPost {
		writeStripeError(w, http.StatusNotFound, "invalid_request_error", "", "", "Unrecognized request URL ("+r.Method+": "+r.URL.Path+").")
		return
	}
	if err := r.ParseForm(); err != nil {
		writeStripeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "Invalid request body.")
		return
	}
	form := r.PostForm
	key := r.Header.Get("Idempotency-Key")
	intentID := form.Get("metadata[outbox_intent_id]")
	record := func(status int, replayed bool) {
		s.mu.Lock()
		s.requests = append(s.requests, StripeRequest{IdempotencyKey: key, IntentID: intentID, Status: status, Replayed: replayed})
		s.mu.Unlock()
	}
	if len(key) > 255 {
		record(http.StatusBadRequest, false)
		writeStripeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "Invalid idempotency key: keys are up to 255 characters long.")
		return
	}
	params := form.Encode()
	// Idempotency first: a saved answer is replayed before anything else.
	if key != "" {
		s.mu.Lock()
		sv := s.saved[key]
		switch {
		case sv != nil && sv.params != params:
			s.mu.Unlock()
			record(http.StatusBadRequest, false)
			writeStripeError(w, http.StatusBadRequest, "idempotency_error", "", "", "Keys for idempotent requests can only be used with the same parameters they were first used with.")
			return
		case sv != nil && !sv.done:
			s.mu.Unlock()
			record(http.StatusConflict, false)
			writeStripeError(w, http.StatusConflict, "invalid_request_error", "idempotency_key_in_use",
				"", "There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through).")
			return
		case sv != nil:
			st, body := sv.status, sv.body
			s.mu.Unlock()
			record(st, true)
			writeStripe(w, st, body, true)
			return
		}
		s.mu.Unlock()
	}
	// Validation (nothing saved: the endpoint has not begun executing).
	pi, ch := form.Get("payment_intent"), form.Get("charge")
	var amount int64
	if a := form.Get("amount"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n <= 0 {
			record(http.StatusBadRequest, false)
			writeStripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_integer", "amount", "Invalid positive integer")
			return
		}
		amount = n
	}
	s.mu.Lock()
	target := s.intents[pi]
	if pi == "" {
		target = s.intents[ch]
	}
	s.mu.Unlock()
	switch {
	case pi == "" && ch == "":
		record(http.StatusBadRequest, false)
		writeStripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_missing", "payment_intent", "One of the following params should be provided for this request: payment_intent or charge.")
		return
	case target == nil:
		param, id := "payment_intent", pi
		if pi == "" {
			param, id = "charge", ch
		}
		record(http.StatusBadRequest, false)
		writeStripeError(w, http.StatusBadRequest, "invalid_request_error", "resource_missing", param, fmt.Sprintf("No such %s: '%s'", param, id))
		return
	}
	// Execution begins: from here the answer is saved under the key.
	var sv *stripeSaved
	if key != "" {
		s.mu.Lock()
		if s.saved[key] != nil { // a concurrent first request won
			s.mu.Unlock()
			record(http.StatusConflict, false)
			writeStripeError(w, http.StatusConflict, "invalid_request_error", "idempotency_key_in_use", "", "There is currently another in-progress request using this Idempotent Key.")
			return
		}
		sv = &stripeSaved{params: params}
		s.saved[key] = sv
		s.mu.Unlock()
	}
	finish := func(status int, body []byte, refundID string) {
		s.mu.Lock()
		if sv != nil {
			sv.done, sv.status, sv.body, sv.refundID = true, status, body, refundID
		}
		s.mu.Unlock()
		record(status, false)
	}
	unsave := func() {
		if key != "" {
			s.mu.Lock()
			delete(s.saved, key)
			s.mu.Unlock()
		}
	}
	f, hasFault := s.faults.pop()
	if hasFault {
		switch f.Kind {
		case Reject:
			finish(http.StatusBadRequest, writeStripeError(w, http.StatusBadRequest, "invalid_request_error", "charge_disputed", "", "Charge has been disputed and cannot be refunded."), "")
			return
		case Unauthorized:
			unsave()
			record(http.StatusUnauthorized, false)
			writeStripeError(w, http.StatusUnauthorized, "invalid_request_error", "", "", "Invalid API Key provided: sk_****")
			return
		case RateLimit:
			// Stripe's 429 carries no Retry-After; nothing is saved.
			unsave()
			record(http.StatusTooManyRequests, false)
			writeStripeError(w, http.StatusTooManyRequests, "invalid_request_error", "rate_limit", "", "Request rate limit exceeded.")
			return
		case Unavailable:
			unsave()
			record(http.StatusServiceUnavailable, false)
			writeStripeError(w, http.StatusServiceUnavailable, "api_error", "", "", "The server is temporarily unavailable.")
			return
		case ProviderError:
			st := f.Status
			if st == 0 {
				st = http.StatusBadRequest
			}
			typ := "invalid_request_error"
			if st >= 500 {
				typ = "api_error"
			}
			if st == http.StatusPaymentRequired {
				typ = "card_error"
			}
			if st == http.StatusUnauthorized || st == http.StatusTooManyRequests || st == http.StatusConflict {
				unsave()
				record(st, false)
				writeStripeError(w, st, typ, f.Code, "", f.Description)
				return
			}
			finish(st, writeStripeError(w, st, typ, f.Code, "", f.Description), "")
			return
		case HangNoCommit:
			s.faults.hold(r)
			unsave()
			record(http.StatusServiceUnavailable, false)
			writeStripeError(w, http.StatusServiceUnavailable, "api_error", "", "", "The server is temporarily unavailable.")
			return
		}
	}
	s.mu.Lock()
	left := target.amount - target.refunded
	if amount == 0 {
		amount = left
	}
	if left <= 0 || amount > left {
		s.mu.Unlock()
		code, msg := "amount_too_large", fmt.Sprintf("Refund amount (%d) is greater than unrefunded amount on charge (%d)", amount, left)
		if left <= 0 {
			code, msg = "charge_already_refunded", "Charge has already been refunded."
		}
		finish(http.StatusBadRequest, writeStripeError(w, http.StatusBadRequest, "invalid_request_error", code, "amount", msg), "")
		return
	}
	target.refunded += amount
	s.nextID++
	meta := map[string]string{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(v) > 0 {
			meta[strings.TrimSuffix(name, "]")] = v[0]
		}
	}
	rf := StripeRefund{ID: fmt.Sprintf("re_fake%06d", s.nextID), Object: "refund", Amount: amount, PaymentIntent: pi,
		Status: "succeeded", Created: s.now().Unix(), Metadata: meta}
	s.refunds = append(s.refunds, rf)
	s.mu.Unlock()
	body, _ := json.Marshal(rf)

	if hasFault {
		switch f.Kind {
		case DropAfterCommit:
			finish(http.StatusOK, body, rf.ID)
			drop(w)
			return
		case ErrorAfterCommit:
			// The refund exists, and the saved answer is a 500: every retry
			// with this key gets the same 500.
			eb, _ := json.Marshal(map[string]any{"error": map[string]any{"type": "api_error", "message": "An unknown error occurred"}})
			finish(http.StatusInternalServerError, eb, rf.ID)
			writeStripe(w, http.StatusInternalServerError, eb, false)
			return
		case Hang:
			finish(http.StatusOK, body, rf.ID)
			if s.faults.hold(r) {
				writeStripe(w, http.StatusOK, body, false)
			}
			return
		}
	}
	finish(http.StatusOK, body, rf.ID)
	writeStripe(w, http.StatusOK, body, false)
}

// StripeSign returns a Stripe-Signature value for body at t with secret
// (the whole whsec_ string is the HMAC key).
func StripeSign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// RefundEvent returns the body of an Event of type (refund.created,
// refund.updated, ...) for the refund created for intentID, as Stripe sends
// it: request.idempotency_key may be null, so only metadata ties it to us.
func (s *Stripe) RefundEvent(eventID, typ, intentID string) ([]byte, bool) {
	rf, ok := s.RefundFor(intentID)
	if !ok {
		return nil, false
	}
	obj, _ := json.Marshal(rf)
	body, _ := json.Marshal(map[string]any{
		"id": eventID, "object": "event", "api_version": "2025-04-30.basil", "type": typ,
		"created": s.now().Unix(), "livemode": false, "pending_webhooks": 1,
		"data":    map[string]any{"object": json.RawMessage(obj)},
		"request": map[string]any{"id": nil, "idempotency_key": nil},
	})
	return body, true
}

// Deliver posts a signed event to url (an endpoint) and returns its status.
func (s *Stripe) Deliver(url, secret string, signedAt time.Time, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", StripeSign(secret, signedAt, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
