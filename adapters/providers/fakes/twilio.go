package fakes

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Twilio is a fake of Twilio's Messages and Calls resources and of the
// status callbacks Twilio makes.
//
// Written from Twilio's documentation:
//   - POST /2010-04-01/Accounts/{AccountSid}/Messages.json
//     (https://www.twilio.com/docs/messaging/api/message-resource#create-a-message-resource):
//     form-encoded To, From or MessagingServiceSid, Body and/or MediaUrl,
//     StatusCallback; answers 201 with the Message resource (sid SM…,
//     status queued, or accepted through a Messaging Service).
//   - POST /2010-04-01/Accounts/{AccountSid}/Calls.json
//     (https://www.twilio.com/docs/voice/api/call-resource#create-a-call-resource):
//     To, From, Twiml or Url, StatusCallback, StatusCallbackEvent,
//     StatusCallbackMethod; answers 201 with the Call resource (sid CA…,
//     status queued).
//   - HTTP basic auth with the account SID and auth token, or an API key SID
//     and secret (https://www.twilio.com/docs/usage/requests-to-twilio).
//   - Errors (https://www.twilio.com/docs/usage/twilios-response#response-formats-exceptions):
//     {"code", "message", "more_info", "status"}: 401 20003, 400 21211
//     (invalid To), 21212 (invalid From), 21602 (body required), 21617
//     (body over 1600 characters), 21205 (Url/Twiml), 429 20429, 500 20500,
//     503 20503. Twilio documents no Retry-After.
//   - Status callbacks (https://www.twilio.com/docs/messaging/guides/track-outbound-message-status,
//     https://www.twilio.com/docs/voice/api/call-resource#statuscallback):
//     a form POST to the StatusCallback URL exactly as given, with
//     MessageSid/MessageStatus (SmsSid/SmsStatus, ErrorCode on failure) or
//     CallSid/CallStatus/CallbackSource/SequenceNumber, signed with
//     X-Twilio-Signature (https://www.twilio.com/docs/usage/webhooks/webhooks-security):
//     base64 HMAC-SHA1, keyed with the auth token, of the URL followed by
//     the parameters sorted by name, name and value without delimiters.
type Twilio struct {
	now    func() time.Time
	faults *faultQueue
	base   string

	mu        sync.Mutex
	accounts  map[string]string    // account SID -> auth token
	keys      map[string][2]string // API key SID -> {secret, account SID}
	numbers   map[string]bool      // numbers the accounts own (From)
	created   []TwilioResource
	posted    []string // StatusCallback of every authenticated create request
	requests  int
	callbacks int
}

// TwilioResource is a message or call the fake really created (a side
// effect).
type TwilioResource struct {
	Kind           string // "message" or "call"
	SID            string
	AccountSID     string
	To, From       string
	Body, TwiML    string
	StatusCallback string
	sequence       int
}

// NewTwilio starts a Twilio fake.
func NewTwilio(tb TB, now func() time.Time) *Twilio {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	t := &Twilio{now: now, faults: newFaultQueue(), accounts: map[string]string{}, keys: map[string][2]string{}, numbers: map[string]bool{}}
	srv := start(tb, http.HandlerFunc(t.serve), t.faults)
	t.base = srv.URL
	return t
}

// URL is the API root (the equivalent of https://api.twilio.com).
func (t *Twilio) URL() string { return t.base }

// AddAccount makes an account SID and auth token valid.
func (t *Twilio) AddAccount(sid, authToken string) {
	t.mu.Lock()
	t.accounts[sid] = authToken
	t.mu.Unlock()
}

// AddAPIKey makes an API key valid for an account.
func (t *Twilio) AddAPIKey(keySID, secret, accountSID string) {
	t.mu.Lock()
	t.keys[keySID] = [2]string{secret, accountSID}
	t.mu.Unlock()
}

// AddNumber gives the accounts a number to send from and call from.
func (t *Twilio) AddNumber(e164 string) { t.mu.Lock(); t.numbers[e164] = true; t.mu.Unlock() }

// Inject queues faults for the next creates that pass authentication and validation.
func (t *Twilio) Inject(fs ...Fault) { t.faults.push(fs...) }

// Release lets held responses go.
func (t *Twilio) Release() { t.faults.Release() }

// Created is the number of messages and calls really created.
func (t *Twilio) Created() int { t.mu.Lock(); defer t.mu.Unlock(); return len(t.created) }

// Requests is the number of create requests received (authenticated or not).
func (t *Twilio) Requests() int { t.mu.Lock(); defer t.mu.Unlock(); return t.requests }

// RequestsWith counts the authenticated create requests whose
// StatusCallback URL ends with s (e.g. "intent=<intent id>").
func (t *Twilio) RequestsWith(s string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, cb := range t.posted {
		if strings.HasSuffix(cb, s) {
			n++
		}
	}
	return n
}

// CreatedWith lists the messages and calls whose StatusCallback URL ends
// with s (e.g. "intent=<intent id>"), in order.
func (t *Twilio) CreatedWith(s string) []TwilioResource {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []TwilioResource
	for _, r := range t.created {
		if strings.HasSuffix(r.StatusCallback, s) {
			out = append(out, r)
		}
	}
	return out
}

type twilioError struct {
	Code     int    `json:"code"`
	Message  string `json:"message"`
	MoreInfo string `json:"more_info"`
	Status   int    `json:"status"`
}

func writeTwilioError(w http.ResponseWriter, status, code int, msg string) {
	writeTwilio(w, status, twilioError{Code: code, Message: msg, MoreInfo: "https://www.twilio.com/docs/errors/" + strconv.Itoa(code), Status: status})
}

func writeTwilio(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Twilio-Request-Id", "RQ"+strings.Repeat("0", 32))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

var (
	twilioPath = regexp.MustCompile(`^/2010-04-01/Accounts/(AC[0-9a-fA-F]{32})/(Messages|Calls)\.json$`)
	twilioE164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)
)

// account authenticates the request for the path's account.
func (t *Twilio) authenticated(r *http.Request, account string) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tok, ok := t.accounts[user]; ok {
		return user == account && hmac.Equal([]byte(tok), []byte(pass))
	}
	if k, ok := t.keys[user]; ok {
		return k[1] == account && hmac.Equal([]byte(k[0]), []byte(pass))
	}
	return false
}

func (t *Twilio) serve(w http.ResponseWriter, r *http.Request) {
	t.mu.Lock()
	t.requests++
	t.mu.Unlock()
	m := twilioPath.FindStringSubmatch(r.URL.Path)
	if m == nil || r.Method != http.MethodPost {
		writeTwilioError(w, http.StatusNotFound, 20404, "The requested resource was not found")
		return
	}
	account, kind := m[1], m[2]
	if !t.authenticated(r, account) {
		writeTwilioError(w, http.StatusUnauthorized, 20003, "Authenticate")
		return
	}
	if err := r.ParseForm(); err != nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		writeTwilioError(w, http.StatusBadRequest, 21205, "the request parameters must be form encoded")
		return
	}
	f := r.PostForm
	t.mu.Lock()
	t.posted = append(t.posted, f.Get("StatusCallback"))
	t.mu.Unlock()
	res := TwilioResource{AccountSID: account, To: f.Get("To"), From: f.Get("From"), StatusCallback: f.Get("StatusCallback")}
	if !twilioE164.MatchString(res.To) {
		writeTwilioError(w, http.StatusBadRequest, 21211, "The 'To' number is not a valid phone number.")
		return
	}
	if cb := res.StatusCallback; cb != "" {
		if u, err := url.Parse(cb); err != nil || u.Host == "" {
			writeTwilioError(w, http.StatusBadRequest, 21609, "Invalid StatusCallback URL")
			return
		}
	}
	t.mu.Lock()
	owned := t.numbers[res.From]
	t.mu.Unlock()
	switch kind {
	case "Messages":
		res.Kind, res.Body = "message", f.Get("Body")
		if f.Get("MessagingServiceSid") == "" && !owned {
			writeTwilioError(w, http.StatusBadRequest, 21212, "The 'From' number is not a valid phone number, shortcode, or alphanumeric sender ID.")
			return
		}
		if res.Body == "" && len(f["MediaUrl"]) == 0 {
			writeTwilioError(w, http.StatusBadRequest, 21602, "Message body is required.")
			return
		}
		if len([]rune(res.Body)) > 1600 {
			writeTwilioError(w, http.StatusBadRequest, 21617, "The concatenated message body exceeds the 1600 character limit.")
			return
		}
	case "Calls":
		res.Kind, res.TwiML = "call", f.Get("Twiml")
		if !owned {
			writeTwilioError(w, http.StatusBadRequest, 21210, "The source phone number provided is not yet verified for your account.")
			return
		}
		if res.TwiML == "" && f.Get("Url") == "" {
			writeTwilioError(w, http.StatusBadRequest, 21205, "Url or Twiml is required")
			return
		}
	}
	fault, hasFault := t.faults.pop()
	if hasFault {
		switch fault.Kind {
		case Reject:
			writeTwilioError(w, http.StatusBadRequest, 21211, "The 'To' number is not a valid phone number.")
			return
		case Unauthorized:
			writeTwilioError(w, http.StatusUnauthorized, 20003, "Authenticate")
			return
		case RateLimit:
			writeTwilioError(w, errorStatus(w, fault, http.StatusTooManyRequests), 20429, "Too Many Requests")
			return
		case Unavailable:
			writeTwilioError(w, http.StatusServiceUnavailable, 20503, "Service Unavailable")
			return
		case HangNoCommit:
			t.faults.hold(r)
			return
		case ProviderError:
			code, _ := strconv.Atoi(fault.Code)
			writeTwilioError(w, errorStatus(w, fault, http.StatusBadRequest), code, fault.Description)
			return
		}
	}
	t.mu.Lock()
	prefix := "SM"
	if res.Kind == "call" {
		prefix = "CA"
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	res.SID = prefix + hex.EncodeToString(id[:])
	t.created = append(t.created, res)
	t.mu.Unlock()
	if t.faults.afterCommit(w, r, fault, hasFault, func() { writeTwilioError(w, http.StatusInternalServerError, 20500, "Internal Server Error") }) {
		return
	}
	status := "queued"
	if res.Kind == "message" && f.Get("MessagingServiceSid") != "" {
		status = "accepted"
	}
	created := t.now().UTC().Format(time.RFC1123Z)
	body := map[string]any{
		"sid": res.SID, "account_sid": account, "to": res.To, "from": nullable(res.From), "status": status,
		"direction": "outbound-api", "api_version": "2010-04-01", "date_created": created, "date_updated": created,
		"uri": "/2010-04-01/Accounts/" + account + "/" + kind + "/" + res.SID + ".json",
	}
	if res.Kind == "message" {
		body["body"], body["num_segments"], body["error_code"], body["error_message"] = res.Body, "1", nil, nil
		body["messaging_service_sid"] = nullable(f.Get("MessagingServiceSid"))
	}
	writeTwilio(w, http.StatusCreated, body)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TwilioSign is X-Twilio-Signature for a request to fullURL with params
// (from Twilio's documentation, independently of the adapter).
func TwilioSign(authToken, fullURL string, params url.Values) string {
	var keys []string
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	data := fullURL
	for _, k := range keys {
		vs := append([]string(nil), params[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			data += k + v
		}
	}
	m := hmac.New(sha1.New, []byte(authToken))
	m.Write([]byte(data))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// CallbackParams are the parameters Twilio posts for a status of a created
// message or call (errorCode, when set, goes in ErrorCode).
func (t *Twilio) CallbackParams(sid, status, errorCode string) (TwilioResource, url.Values, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.created {
		res := &t.created[i]
		if res.SID != sid {
			continue
		}
		p := url.Values{"AccountSid": {res.AccountSID}, "ApiVersion": {"2010-04-01"}, "From": {res.From}, "To": {res.To}}
		if res.Kind == "message" {
			p.Set("MessageSid", sid)
			p.Set("MessageStatus", status)
			p.Set("SmsSid", sid)
			p.Set("SmsStatus", status)
		} else {
			res.sequence++
			p.Set("CallSid", sid)
			p.Set("CallStatus", status)
			p.Set("Called", res.To)
			p.Set("Caller", res.From)
			p.Set("Direction", "outbound-api")
			p.Set("CallbackSource", "call-progress-events")
			p.Set("SequenceNumber", strconv.Itoa(res.sequence-1))
			p.Set("Timestamp", t.now().UTC().Format(time.RFC1123Z))
			if status == "completed" {
				p.Set("CallDuration", "12")
			}
		}
		if errorCode != "" {
			p.Set("ErrorCode", errorCode)
		}
		return *res, p, nil
	}
	return TwilioResource{}, nil, errors.New("twilio fake: no message or call " + sid)
}

// Callback makes the status callback Twilio makes for a created message or
// call: a form POST to its StatusCallback URL, signed over that URL exactly.
// via, when set, is the scheme and host the request actually goes to (a
// proxy in front of the public URL); the path and query stay the
// StatusCallback's. token overrides the account's auth token ("" for the
// account's): a wrong one makes a forged callback. It returns the answer's
// status.
func (t *Twilio) Callback(sid, status, errorCode, via, token string) (int, error) {
	res, params, err := t.CallbackParams(sid, status, errorCode)
	if err != nil {
		return 0, err
	}
	if res.StatusCallback == "" {
		return 0, errors.New("twilio fake: " + sid + " was created without a StatusCallback")
	}
	if token == "" {
		t.mu.Lock()
		token = t.accounts[res.AccountSID]
		t.mu.Unlock()
	}
	return t.Post(res.StatusCallback, via, TwilioSign(token, res.StatusCallback, params), params)
}

// Post sends a callback to signedURL (or to its path and query on via) with
// the given signature, as Twilio's callback requests look.
func (t *Twilio) Post(signedURL, via, signature string, params url.Values) (int, error) {
	target := signedURL
	if via != "" {
		u, err := url.Parse(signedURL)
		if err != nil {
			return 0, err
		}
		target = strings.TrimSuffix(via, "/") + u.RequestURI()
	}
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(params.Encode()))
	if err != nil {
		return 0, err
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("User-Agent", "TwilioProxy/1.1")
	req.Header.Set("I-Twilio-Idempotency-Token", hex.EncodeToString(tok[:]))
	if signature != "" {
		req.Header.Set("X-Twilio-Signature", signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	t.mu.Lock()
	t.callbacks++
	t.mu.Unlock()
	return resp.StatusCode, nil
}
