package fakes

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// WhatsApp is a fake of the WhatsApp Cloud API's messages endpoint and of
// its status webhooks.
//
// Written from Meta's documentation:
//   - POST /{version}/{phone-number-id}/messages
//     (https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages):
//     JSON with messaging_product "whatsapp", recipient_type, to, type and
//     its object (text.body, template, ...), biz_opaque_callback_data (at
//     most 512 characters); a Bearer access token; answers 200
//     {"messaging_product", "contacts": [{"input", "wa_id"}],
//     "messages": [{"id": "wamid.…", "message_status": "accepted"}]}.
//   - Errors (https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes,
//     https://developers.facebook.com/docs/graph-api/guides/error-handling):
//     {"error": {"message", "type", "code", "error_data", "fbtrace_id"}}:
//     401 code 190 (access token), 400 code 100 (invalid parameter), 400
//     code 131008/131009 (parameter missing/invalid), the rate-limit codes
//     (130429, 131056, 80007, 4) also as HTTP 400, 500 code 131000.
//   - Webhooks (https://developers.facebook.com/docs/graph-api/webhooks/getting-started):
//     the GET verification request (hub.mode, hub.verify_token,
//     hub.challenge) and the status payloads
//     (https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples#message-status-updates)
//     signed X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body with
//     the app secret>.
type WhatsApp struct {
	now    func() time.Time
	faults *faultQueue
	base   string

	mu       sync.Mutex
	tokens   map[string]string // access token -> phone number id
	sent     []WhatsAppMessage
	requests int
}

// WhatsAppMessage is a message the fake really accepted (a side effect).
type WhatsAppMessage struct {
	ID                    string // wamid
	PhoneNumberID         string
	To                    string
	Type                  string
	BizOpaqueCallbackData string
	Body                  json.RawMessage
}

// NewWhatsApp starts a WhatsApp Cloud API fake.
func NewWhatsApp(tb TB, now func() time.Time) *WhatsApp {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	w := &WhatsApp{now: now, faults: newFaultQueue(), tokens: map[string]string{}}
	srv := start(tb, http.HandlerFunc(w.serve), w.faults)
	w.base = srv.URL
	return w
}

// URL is the API root (the equivalent of https://graph.facebook.com).
func (w *WhatsApp) URL() string { return w.base }

// AddNumber makes token valid for sending from the phone number id.
func (w *WhatsApp) AddNumber(phoneNumberID, token string) {
	w.mu.Lock()
	w.tokens[token] = phoneNumberID
	w.mu.Unlock()
}

// Inject queues faults for the next sends that pass authentication and validation.
func (w *WhatsApp) Inject(fs ...Fault) { w.faults.push(fs...) }

// Release lets held responses go.
func (w *WhatsApp) Release() { w.faults.Release() }

// Messages is the number of messages really accepted.
func (w *WhatsApp) Messages() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.sent) }

// Requests is the number of send requests received.
func (w *WhatsApp) Requests() int { w.mu.Lock(); defer w.mu.Unlock(); return w.requests }

// SentWith lists the messages whose biz_opaque_callback_data is data.
func (w *WhatsApp) SentWith(data string) []WhatsAppMessage {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []WhatsAppMessage
	for _, m := range w.sent {
		if m.BizOpaqueCallbackData == data {
			out = append(out, m)
		}
	}
	return out
}

func writeGraphError(w http.ResponseWriter, status, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "code": code,
		"error_data": map[string]any{"messaging_product": "whatsapp", "details": msg}, "fbtrace_id": "AbCdEfGhIjKlMnOp"}})
}

var (
	waPath  = regexp.MustCompile(`^/v[0-9]+\.[0-9]+/([0-9]+)/messages$`)
	waPhone = regexp.MustCompile(`^\+?[1-9][0-9]{6,14}$`)
)

func (w *WhatsApp) serve(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	w.requests++
	w.mu.Unlock()
	m := waPath.FindStringSubmatch(r.URL.Path)
	if m == nil || r.Method != http.MethodPost {
		writeGraphError(rw, http.StatusBadRequest, 100, "GraphMethodException", "Unsupported post request.")
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	w.mu.Lock()
	owner, ok := w.tokens[tok]
	w.mu.Unlock()
	if !ok || owner != m[1] {
		writeGraphError(rw, http.StatusUnauthorized, 190, "OAuthException", "Error validating access token.")
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var msg map[string]json.RawMessage
	if err != nil || json.Unmarshal(raw, &msg) != nil {
		writeGraphError(rw, http.StatusBadRequest, 100, "OAuthException", "Invalid parameter")
		return
	}
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(msg[k], &s)
		return s
	}
	typ := str("type")
	if typ == "" {
		typ = "text"
	}
	switch {
	case str("messaging_product") != "whatsapp":
		writeGraphError(rw, http.StatusBadRequest, 131008, "OAuthException", "Required parameter is missing: messaging_product")
		return
	case !waPhone.MatchString(str("to")):
		writeGraphError(rw, http.StatusBadRequest, 131009, "OAuthException", "Parameter value is not valid: to")
		return
	case len(msg[typ]) == 0:
		writeGraphError(rw, http.StatusBadRequest, 131008, "OAuthException", "Required parameter is missing: "+typ)
		return
	case len(str("biz_opaque_callback_data")) > 512:
		writeGraphError(rw, http.StatusBadRequest, 131009, "OAuthException", "Parameter value is not valid: biz_opaque_callback_data")
		return
	}
	if typ == "text" {
		var t struct {
			Body string `json:"body"`
		}
		if json.Unmarshal(msg["text"], &t) != nil || t.Body == "" || len([]rune(t.Body)) > 4096 {
			writeGraphError(rw, http.StatusBadRequest, 131009, "OAuthException", "Parameter value is not valid: text.body")
			return
		}
	}
	fault, hasFault := w.faults.pop()
	if hasFault {
		switch fault.Kind {
		case Reject:
			writeGraphError(rw, http.StatusBadRequest, 131026, "OAuthException", "Message Undeliverable.")
			return
		case Unauthorized:
			writeGraphError(rw, http.StatusUnauthorized, 190, "OAuthException", "Error validating access token: Session has expired.")
			return
		case RateLimit:
			// The Cloud API's throughput limit arrives as HTTP 400, code 130429.
			writeGraphError(rw, errorStatus(rw, fault, http.StatusBadRequest), 130429, "OAuthException", "Rate limit hit")
			return
		case Unavailable:
			writeGraphError(rw, http.StatusServiceUnavailable, 131016, "OAuthException", "Service unavailable")
			return
		case HangNoCommit:
			w.faults.hold(r)
			return
		case ProviderError:
			code, _ := strconv.Atoi(fault.Code)
			writeGraphError(rw, errorStatus(rw, fault, http.StatusBadRequest), code, "OAuthException", fault.Description)
			return
		}
	}
	var id [18]byte
	_, _ = rand.Read(id[:])
	wamid := "wamid." + base64.RawURLEncoding.EncodeToString(id[:])
	to := str("to")
	w.mu.Lock()
	w.sent = append(w.sent, WhatsAppMessage{ID: wamid, PhoneNumberID: m[1], To: to, Type: typ, BizOpaqueCallbackData: str("biz_opaque_callback_data"), Body: raw})
	w.mu.Unlock()
	if w.faults.afterCommit(rw, r, fault, hasFault, func() {
		writeGraphError(rw, http.StatusInternalServerError, 131000, "OAuthException", "Something went wrong")
	}) {
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]any{"messaging_product": "whatsapp",
		"contacts": []map[string]string{{"input": to, "wa_id": strings.TrimPrefix(to, "+")}},
		"messages": []map[string]string{{"id": wamid, "message_status": "accepted"}}})
}

// WhatsAppStatus is one status update of a sent message (ErrorCode on
// failed).
type WhatsAppStatus struct {
	ID, Status string
	ErrorCode  int
}

// StatusPayload is the status webhook body for sent messages, all with the
// same status.
func (w *WhatsApp) StatusPayload(status string, errorCode int, wamids ...string) []byte {
	var us []WhatsAppStatus
	for _, id := range wamids {
		us = append(us, WhatsAppStatus{ID: id, Status: status, ErrorCode: errorCode})
	}
	return w.Statuses(us...)
}

// Statuses is one status webhook body carrying several status updates (as
// WhatsApp may batch them).
func (w *WhatsApp) Statuses(updates ...WhatsAppStatus) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	var statuses []map[string]any
	phone := ""
	for _, u := range updates {
		status, errorCode := u.Status, u.ErrorCode
		for _, m := range w.sent {
			if m.ID != u.ID {
				continue
			}
			phone = m.PhoneNumberID
			s := map[string]any{"id": m.ID, "status": status, "timestamp": strconv.FormatInt(w.now().Unix(), 10),
				"recipient_id": strings.TrimPrefix(m.To, "+"),
				"conversation": map[string]any{"id": "CONVERSATION_ID", "origin": map[string]string{"type": "service"}},
				"pricing":      map[string]any{"billable": true, "pricing_model": "PMP", "category": "service"}}
			if m.BizOpaqueCallbackData != "" {
				s["biz_opaque_callback_data"] = m.BizOpaqueCallbackData
			}
			if status == "failed" {
				s["errors"] = []map[string]any{{"code": errorCode, "title": "Message undeliverable", "error_data": map[string]string{"details": "Message Undeliverable."}}}
			}
			statuses = append(statuses, s)
		}
	}
	b, _ := json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": []map[string]any{{
		"id": "WHATSAPP_BUSINESS_ACCOUNT_ID",
		"changes": []map[string]any{{"field": "messages", "value": map[string]any{
			"messaging_product": "whatsapp",
			"metadata":          map[string]string{"display_phone_number": "15550783881", "phone_number_id": phone},
			"statuses":          statuses}}},
	}}})
	return b
}

// WhatsAppSign is X-Hub-Signature-256 for body.
func WhatsAppSign(appSecret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(appSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Deliver posts a webhook payload to url signed with appSecret and returns
// the answer's status.
func (w *WhatsApp) Deliver(url, appSecret string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "facebookexternalua")
	req.Header.Set("X-Hub-Signature-256", WhatsAppSign(appSecret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// Verify makes the verification request Meta makes when a webhook URL is
// configured and returns the answer's status, content type and body.
func (w *WhatsApp) Verify(endpoint, mode, token, challenge string) (int, string, string, error) {
	q := url.Values{"hub.mode": {mode}, "hub.verify_token": {token}, "hub.challenge": {challenge}}
	resp, err := http.Get(endpoint + "?" + q.Encode())
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b), nil
}
