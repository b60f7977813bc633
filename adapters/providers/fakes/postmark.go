package fakes

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Postmark is a fake of Postmark's Email API, its outbound message search
// and its delivery and bounce webhooks.
//
// Written from Postmark's documentation:
//   - POST /email (https://postmarkapp.com/developer/api/email-api#send-a-single-email):
//     JSON with From (a confirmed sender signature), To, Subject, TextBody
//     and/or HtmlBody, Metadata, MessageStream, ...; the server token in
//     X-Postmark-Server-Token; answers 200 {"To", "SubmittedAt",
//     "MessageID", "ErrorCode": 0, "Message": "OK"}.
//   - Errors (https://postmarkapp.com/developer/api/overview#http-response-codes,
//     #error-codes): 401 {ErrorCode 10} for a bad or missing token; 422
//     {ErrorCode, Message}: 300 invalid request, 400 sender signature not
//     found, 402 invalid JSON, 406 inactive recipient, 409 JSON required,
//     1235 message stream not found; 429 rate limit exceeded; 500; 503.
//   - Metadata (https://postmarkapp.com/support/article/1125-custom-metadata-faq):
//     at most 10 fields, keys at most 20 characters, values at most 80.
//   - GET /messages/outbound (https://postmarkapp.com/developer/api/messages-api#outbound-message-search):
//     count (at most 500) and offset required; messagestream (default
//     "outbound"); one metadata_<key>=<value> filter; answers
//     {"TotalCount", "Messages": [{"MessageID", "MessageStream", "Status",
//     "Metadata", ...}]} newest first. SearchDelay makes a sent message
//     searchable only after a while.
//   - Webhooks (https://postmarkapp.com/developer/webhooks/delivery-webhook,
//     https://postmarkapp.com/developer/webhooks/bounce-webhook): a JSON
//     POST to the configured URL, with basic auth when the URL carries
//     credentials.
type Postmark struct {
	now    func() time.Time
	faults *faultQueue
	base   string

	mu          sync.Mutex
	tokens      map[string]bool
	senders     map[string]bool
	inactive    map[string]bool
	sent        []PostmarkMessage
	sendReqs    int
	searches    int
	SearchDelay time.Duration
}

// PostmarkMessage is an email the fake really sent (a side effect).
type PostmarkMessage struct {
	MessageID     string
	To, From      string
	Subject       string
	MessageStream string
	Metadata      map[string]string
	SubmittedAt   time.Time
}

// NewPostmark starts a Postmark fake.
func NewPostmark(tb TB, now func() time.Time) *Postmark {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	p := &Postmark{now: now, faults: newFaultQueue(), tokens: map[string]bool{}, senders: map[string]bool{}, inactive: map[string]bool{}}
	srv := start(tb, http.HandlerFunc(p.serve), p.faults)
	p.base = srv.URL
	return p
}

// URL is the API root (the equivalent of https://api.postmarkapp.com).
func (p *Postmark) URL() string { return p.base }

// AddServer makes a server token valid.
func (p *Postmark) AddServer(token string) { p.mu.Lock(); p.tokens[token] = true; p.mu.Unlock() }

// AddSender confirms a sender signature.
func (p *Postmark) AddSender(email string) { p.mu.Lock(); p.senders[email] = true; p.mu.Unlock() }

// Deactivate marks a recipient inactive (a hard bounce or spam complaint earlier).
func (p *Postmark) Deactivate(email string) { p.mu.Lock(); p.inactive[email] = true; p.mu.Unlock() }

// SetSearchDelay makes sent messages searchable only after d.
func (p *Postmark) SetSearchDelay(d time.Duration) { p.mu.Lock(); p.SearchDelay = d; p.mu.Unlock() }

// Inject queues faults for the next sends that pass authentication and validation.
func (p *Postmark) Inject(fs ...Fault) { p.faults.push(fs...) }

// Release lets held responses go.
func (p *Postmark) Release() { p.faults.Release() }

// Sent is the number of emails really sent.
func (p *Postmark) Sent() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.sent) }

// SendRequests is the number of POST /email requests received.
func (p *Postmark) SendRequests() int { p.mu.Lock(); defer p.mu.Unlock(); return p.sendReqs }

// Searches is the number of outbound message searches.
func (p *Postmark) Searches() int { p.mu.Lock(); defer p.mu.Unlock(); return p.searches }

// SentWith lists the emails whose Metadata[key] is value, oldest first.
func (p *Postmark) SentWith(key, value string) []PostmarkMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []PostmarkMessage
	for _, m := range p.sent {
		if m.Metadata[key] == value {
			out = append(out, m)
		}
	}
	return out
}

func writePostmarkError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"ErrorCode": code, "Message": msg})
}

func (p *Postmark) authorized(r *http.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	tok := r.Header.Get("X-Postmark-Server-Token")
	return tok != "" && p.tokens[tok]
}

func (p *Postmark) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/email" && r.Method == http.MethodPost:
		p.mu.Lock()
		p.sendReqs++
		p.mu.Unlock()
		p.send(w, r)
	case r.URL.Path == "/messages/outbound" && r.Method == http.MethodGet:
		p.search(w, r)
	default:
		writePostmarkError(w, http.StatusNotFound, 0, "Entity doesn't exist")
	}
}

func (p *Postmark) send(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r) {
		writePostmarkError(w, http.StatusUnauthorized, 10, "No Account or Server API tokens were supplied in the HTTP headers.")
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writePostmarkError(w, http.StatusUnprocessableEntity, 409, "JSON data required")
		return
	}
	var m struct {
		From, To, Cc, Bcc, Subject, TextBody, HtmlBody, Tag, MessageStream string
		Metadata                                                           map[string]string
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 10<<20))
	if err := dec.Decode(&m); err != nil {
		writePostmarkError(w, http.StatusUnprocessableEntity, 402, "Received invalid JSON input.")
		return
	}
	from, err := mail.ParseAddress(m.From)
	p.mu.Lock()
	known := err == nil && p.senders[from.Address]
	p.mu.Unlock()
	if !known {
		writePostmarkError(w, http.StatusUnprocessableEntity, 400, "The 'From' address you supplied is not a Sender Signature on your account.")
		return
	}
	to, err := mail.ParseAddressList(m.To)
	if err != nil || len(to) == 0 || len(to) > 50 {
		writePostmarkError(w, http.StatusUnprocessableEntity, 300, "Invalid 'To' address.")
		return
	}
	if m.TextBody == "" && m.HtmlBody == "" {
		writePostmarkError(w, http.StatusUnprocessableEntity, 300, "Provide either email TextBody or HtmlBody or both.")
		return
	}
	if len(m.Metadata) > 10 {
		writePostmarkError(w, http.StatusUnprocessableEntity, 300, "Metadata: at most 10 fields.")
		return
	}
	for k, v := range m.Metadata {
		if len(k) > 20 || len(v) > 80 {
			writePostmarkError(w, http.StatusUnprocessableEntity, 300, "Metadata: keys at most 20 characters, values at most 80.")
			return
		}
	}
	if m.MessageStream == "" {
		m.MessageStream = "outbound"
	} else if m.MessageStream != "outbound" && m.MessageStream != "broadcast" {
		writePostmarkError(w, http.StatusUnprocessableEntity, 1235, "The message stream for the provided 'ID' was not found.")
		return
	}
	p.mu.Lock()
	for _, a := range to {
		if p.inactive[a.Address] {
			p.mu.Unlock()
			writePostmarkError(w, http.StatusUnprocessableEntity, 406, "You tried to send to a recipient that has been marked as inactive.")
			return
		}
	}
	p.mu.Unlock()
	fault, hasFault := p.faults.pop()
	if hasFault {
		switch fault.Kind {
		case Reject:
			writePostmarkError(w, http.StatusUnprocessableEntity, 300, "Invalid email request")
			return
		case Unauthorized:
			writePostmarkError(w, http.StatusUnauthorized, 10, "The Server API token is invalid.")
			return
		case RateLimit:
			writePostmarkError(w, errorStatus(w, fault, http.StatusTooManyRequests), 0, "Rate limit exceeded")
			return
		case Unavailable:
			writePostmarkError(w, http.StatusServiceUnavailable, 0, "Service Unavailable")
			return
		case HangNoCommit:
			p.faults.hold(r)
			return
		case ProviderError:
			code, _ := strconv.Atoi(fault.Code)
			writePostmarkError(w, errorStatus(w, fault, http.StatusUnprocessableEntity), code, fault.Description)
			return
		}
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	msgID := fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
	now := p.now()
	p.mu.Lock()
	p.sent = append(p.sent, PostmarkMessage{MessageID: msgID, To: m.To, From: m.From, Subject: m.Subject, MessageStream: m.MessageStream, Metadata: m.Metadata, SubmittedAt: now})
	p.mu.Unlock()
	if p.faults.afterCommit(w, r, fault, hasFault, func() { writePostmarkError(w, http.StatusInternalServerError, 0, "Internal Server Error") }) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"To": m.To, "SubmittedAt": now.Format(time.RFC3339Nano), "MessageID": msgID, "ErrorCode": 0, "Message": "OK"})
}

func (p *Postmark) search(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r) {
		writePostmarkError(w, http.StatusUnauthorized, 10, "No Account or Server API tokens were supplied in the HTTP headers.")
		return
	}
	q := r.URL.Query()
	count, err1 := strconv.Atoi(q.Get("count"))
	offset, err2 := strconv.Atoi(q.Get("offset"))
	if err1 != nil || err2 != nil || count < 1 || count > 500 || offset < 0 || count+offset > 10000 {
		writePostmarkError(w, http.StatusUnprocessableEntity, 300, "count (1-500) and offset are required")
		return
	}
	stream := q.Get("messagestream")
	if stream == "" {
		stream = "outbound"
	}
	var metaKey, metaVal string
	for k, vs := range q {
		if name, ok := strings.CutPrefix(k, "metadata_"); ok {
			if metaKey != "" || len(vs) != 1 {
				writePostmarkError(w, http.StatusUnprocessableEntity, 300, "only one metadata filter per search")
				return
			}
			metaKey, metaVal = name, vs[0]
		}
	}
	p.mu.Lock()
	p.searches++
	cutoff := p.now().Add(-p.SearchDelay)
	var hits []map[string]any
	for i := len(p.sent) - 1; i >= 0; i-- { // newest first
		m := p.sent[i]
		if m.MessageStream != stream || m.SubmittedAt.After(cutoff) || (metaKey != "" && m.Metadata[metaKey] != metaVal) {
			continue
		}
		if q.Get("recipient") != "" && !strings.Contains(m.To, q.Get("recipient")) {
			continue
		}
		hits = append(hits, map[string]any{"MessageID": m.MessageID, "MessageStream": m.MessageStream, "To": []map[string]string{{"Email": m.To}},
			"From": m.From, "Subject": m.Subject, "Status": "Sent", "ReceivedAt": m.SubmittedAt.Format(time.RFC3339Nano), "Metadata": m.Metadata})
	}
	p.mu.Unlock()
	total := len(hits)
	if offset > len(hits) {
		offset = len(hits)
	}
	hits = hits[offset:]
	if len(hits) > count {
		hits = hits[:count]
	}
	if hits == nil {
		hits = []map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"TotalCount": total, "Messages": hits})
}

// DeliveryEvent is a Delivery webhook body for a sent message
// (https://postmarkapp.com/developer/webhooks/delivery-webhook).
func (p *Postmark) DeliveryEvent(messageID string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.sent {
		if m.MessageID == messageID {
			b, _ := json.Marshal(map[string]any{"RecordType": "Delivery", "ServerID": 23, "MessageStream": m.MessageStream, "MessageID": m.MessageID,
				"Recipient": m.To, "Tag": "", "DeliveredAt": p.now().UTC().Format(time.RFC3339Nano), "Details": "Test delivery webhook details", "Metadata": m.Metadata})
			return b, true
		}
	}
	return nil, false
}

// BounceEvent is a Bounce webhook body for a sent message
// (https://postmarkapp.com/developer/webhooks/bounce-webhook).
func (p *Postmark) BounceEvent(bounceID int, messageID, typ string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.sent {
		if m.MessageID == messageID {
			b, _ := json.Marshal(map[string]any{"RecordType": "Bounce", "ID": bounceID, "Type": typ, "TypeCode": 1, "Name": "Hard bounce", "Tag": "",
				"MessageID": m.MessageID, "Metadata": m.Metadata, "ServerID": 23, "MessageStream": m.MessageStream, "Description": "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
				"Details": "Test bounce details", "Email": m.To, "From": m.From, "BouncedAt": p.now().UTC().Format(time.RFC3339Nano),
				"DumpAvailable": true, "Inactive": true, "CanActivate": true, "Subject": m.Subject})
			return b, true
		}
	}
	return nil, false
}

// Deliver posts a webhook body to url with basic auth user:pass (as
// Postmark does when the webhook URL carries credentials; both empty: none)
// and returns the answer's status.
func (p *Postmark) Deliver(url, user, pass string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Postmark")
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}
