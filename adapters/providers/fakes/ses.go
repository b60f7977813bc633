package fakes

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/mail"
	"regexp"
	"strings"
	"sync"
	"time"
)

// SES is a fake of Amazon SES API v2's SendEmail, spoken as the AWS SDK
// speaks it (restJson1), and of the events SES publishes.
//
// Written from AWS's documentation:
//   - POST /v2/email/outbound-emails
//     (https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html):
//     JSON FromEmailAddress, Destination.ToAddresses, Content.Simple
//     (Subject, Body.Text / Body.Html), EmailTags [{Name, Value}],
//     ConfigurationSetName; a SigV4-signed request (service "ses"); answers
//     200 {"MessageId"}.
//   - Errors (same page, "Errors"; https://docs.aws.amazon.com/ses/latest/APIReference-V2/CommonErrors.html):
//     the code in X-Amzn-ErrorType and {"message"}: MessageRejected 400
//     (e.g. an unverified identity), BadRequestException 400 (e.g. a tag
//     with characters other than letters, digits, _ and -), NotFoundException
//     404 (an unknown configuration set), TooManyRequestsException 429,
//     ThrottlingException 400 ("Maximum sending rate exceeded",
//     https://docs.aws.amazon.com/ses/latest/dg/manage-sending-quotas-errors.html),
//     InternalFailure 500, ServiceUnavailable 503.
//   - Events (https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html,
//     https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-examples.html):
//     {"eventType", "mail": {..., "messageId", "tags": {"ses:configuration-set": [...], <EmailTags>}}, "delivery" | "bounce" | ...}.
type SES struct {
	now    func() time.Time
	faults *faultQueue
	base   string

	mu         sync.Mutex
	identities map[string]bool
	configSets map[string]bool
	sent       []SESEmail
	requests   int
	accessKeys []string // the access key id of every signed request, in order
}

// SESEmail is an email the fake really accepted (a side effect).
type SESEmail struct {
	MessageID        string
	From             string
	To               []string
	Subject          string
	Tags             map[string]string
	ConfigurationSet string
	At               time.Time
}

// NewSES starts an SES v2 fake.
func NewSES(tb TB, now func() time.Time) *SES {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	s := &SES{now: now, faults: newFaultQueue(), identities: map[string]bool{}, configSets: map[string]bool{}}
	srv := start(tb, http.HandlerFunc(s.serve), s.faults)
	s.base = srv.URL
	return s
}

// URL is the endpoint (AWS_ENDPOINT_URL_SESV2).
func (s *SES) URL() string { return s.base }

// AddIdentity verifies an identity: a domain or an address.
func (s *SES) AddIdentity(id string) { s.mu.Lock(); s.identities[id] = true; s.mu.Unlock() }

// AddConfigurationSet creates a configuration set.
func (s *SES) AddConfigurationSet(name string) { s.mu.Lock(); s.configSets[name] = true; s.mu.Unlock() }

// Inject queues faults for the next sends that pass validation.
func (s *SES) Inject(fs ...Fault) { s.faults.push(fs...) }

// Release lets held responses go.
func (s *SES) Release() { s.faults.Release() }

// Sent is the number of emails accepted.
func (s *SES) Sent() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.sent) }

// Requests is the number of SendEmail requests received.
func (s *SES) Requests() int { s.mu.Lock(); defer s.mu.Unlock(); return s.requests }

// AccessKeys lists the access key id each signed request was made with.
func (s *SES) AccessKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.accessKeys...)
}

// SentWithTag lists the emails tagged name=value.
func (s *SES) SentWithTag(name, value string) []SESEmail {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SESEmail
	for _, e := range s.sent {
		if e.Tags[name] == value {
			out = append(out, e)
		}
	}
	return out
}

func writeSESError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.Header().Set("X-Amzn-RequestId", "00000000-0000-0000-0000-000000000000")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

var sesTagRE = regexp.MustCompile(`^[A-Za-z0-9_:-]{1,256}$`)

func (s *SES) verified(from string) bool {
	addr, err := mail.ParseAddress(from)
	if err != nil {
		return false
	}
	at := strings.LastIndexByte(addr.Address, '@')
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.identities[addr.Address] || (at >= 0 && s.identities[addr.Address[at+1:]])
}

func (s *SES) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v2/email/outbound-emails" || r.Method != http.MethodPost {
		writeSESError(w, http.StatusNotFound, "NotFoundException", "not found")
		return
	}
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || !strings.Contains(auth, "/ses/aws4_request") {
		writeSESError(w, http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
		return
	}
	if _, cred, ok := strings.Cut(auth, "Credential="); ok {
		key, _, _ := strings.Cut(cred, "/")
		s.mu.Lock()
		s.accessKeys = append(s.accessKeys, key)
		s.mu.Unlock()
	}
	var in struct {
		FromEmailAddress string
		Destination      struct{ ToAddresses, CcAddresses, BccAddresses []string }
		Content          struct {
			Simple *struct {
				Subject struct{ Data string }
				Body    struct{ Text, Html *struct{ Data string } }
			}
		}
		EmailTags            []struct{ Name, Value string }
		ConfigurationSetName string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeSESError(w, http.StatusBadRequest, "BadRequestException", "invalid JSON")
		return
	}
	switch {
	case in.FromEmailAddress == "" || len(in.Destination.ToAddresses)+len(in.Destination.CcAddresses)+len(in.Destination.BccAddresses) == 0:
		writeSESError(w, http.StatusBadRequest, "BadRequestException", "FromEmailAddress and a destination are required")
		return
	case in.Content.Simple == nil || in.Content.Simple.Subject.Data == "" || (in.Content.Simple.Body.Text == nil && in.Content.Simple.Body.Html == nil):
		writeSESError(w, http.StatusBadRequest, "BadRequestException", "Content.Simple needs a subject and a body")
		return
	case !s.verified(in.FromEmailAddress):
		writeSESError(w, http.StatusBadRequest, "MessageRejected", "Email address is not verified. The following identities failed the check in region US-EAST-1: "+in.FromEmailAddress)
		return
	}
	tags := map[string]string{}
	for _, t := range in.EmailTags {
		if !sesTagRE.MatchString(t.Name) || !sesTagRE.MatchString(t.Value) || strings.HasPrefix(t.Name, "ses:") {
			writeSESError(w, http.StatusBadRequest, "BadRequestException", "Tag names and values may contain only letters, numbers, _ and -")
			return
		}
		tags[t.Name] = t.Value
	}
	if cs := in.ConfigurationSetName; cs != "" {
		s.mu.Lock()
		ok := s.configSets[cs]
		s.mu.Unlock()
		if !ok {
			writeSESError(w, http.StatusNotFound, "NotFoundException", "Configuration set <"+cs+"> does not exist.")
			return
		}
	}
	fault, hasFault := s.faults.pop()
	if hasFault {
		switch fault.Kind {
		case Reject:
			writeSESError(w, http.StatusBadRequest, "MessageRejected", "Email address is not verified.")
			return
		case Unauthorized:
			writeSESError(w, http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
			return
		case RateLimit:
			writeSESError(w, errorStatus(w, fault, http.StatusBadRequest), "ThrottlingException", "Maximum sending rate exceeded.")
			return
		case Unavailable:
			writeSESError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "Service is unavailable.")
			return
		case HangNoCommit:
			s.faults.hold(r)
			return
		case ProviderError:
			writeSESError(w, errorStatus(w, fault, http.StatusBadRequest), fault.Code, fault.Description)
			return
		}
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	msgID := "0100" + hex.EncodeToString(id[:]) + "-000000"
	to := append(append(append([]string(nil), in.Destination.ToAddresses...), in.Destination.CcAddresses...), in.Destination.BccAddresses...)
	s.mu.Lock()
	s.sent = append(s.sent, SESEmail{MessageID: msgID, From: in.FromEmailAddress, To: to, Subject: in.Content.Simple.Subject.Data, Tags: tags, ConfigurationSet: in.ConfigurationSetName, At: s.now()})
	s.mu.Unlock()
	if s.faults.afterCommit(w, r, fault, hasFault, func() { writeSESError(w, http.StatusInternalServerError, "InternalFailure", "internal failure") }) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-RequestId", "00000000-0000-0000-0000-000000000001")
	_ = json.NewEncoder(w).Encode(map[string]string{"MessageId": msgID})
}

// Event is the event SES publishes for an accepted email (eventType
// Delivery, Bounce, Complaint, Reject or Send), in the documented shape.
func (s *SES) Event(messageID, eventType string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.sent {
		if e.MessageID != messageID {
			continue
		}
		tags := map[string][]string{"ses:source-ip": {"192.0.2.0"}, "ses:caller-identity": {"outbox"}}
		if e.ConfigurationSet != "" {
			tags["ses:configuration-set"] = []string{e.ConfigurationSet}
		}
		for k, v := range e.Tags {
			tags[k] = []string{v}
		}
		ts := s.now().UTC().Format("2006-01-02T15:04:05.000Z")
		ev := map[string]any{"eventType": eventType, "mail": map[string]any{
			"timestamp": e.At.UTC().Format("2006-01-02T15:04:05.000Z"), "source": e.From, "sendingAccountId": "123456789012",
			"messageId": e.MessageID, "destination": e.To, "headersTruncated": false, "tags": tags,
			"commonHeaders": map[string]any{"from": []string{e.From}, "to": e.To, "subject": e.Subject}}}
		switch eventType {
		case "Delivery":
			ev["delivery"] = map[string]any{"timestamp": ts, "processingTimeMillis": 1200, "recipients": e.To, "smtpResponse": "250 2.6.0 Message received", "reportingMTA": "mta.example.com"}
		case "Bounce":
			ev["bounce"] = map[string]any{"bounceType": "Permanent", "bounceSubType": "General", "timestamp": ts, "feedbackId": "0100" + messageID[4:20] + "-bounce",
				"bouncedRecipients": []map[string]string{{"emailAddress": e.To[0], "action": "failed", "status": "5.1.1", "diagnosticCode": "smtp; 550 5.1.1 user unknown"}}}
		case "Complaint":
			ev["complaint"] = map[string]any{"timestamp": ts, "feedbackId": "0100" + messageID[4:20] + "-complaint", "complainedRecipients": []map[string]string{{"emailAddress": e.To[0]}}}
		case "Reject":
			ev["reject"] = map[string]any{"reason": "Bad content"}
		case "Send":
			ev["send"] = map[string]any{}
		}
		b, _ := json.Marshal(ev)
		return b, true
	}
	return nil, false
}
