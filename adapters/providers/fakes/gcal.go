package fakes

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// GCal is a fake of Google's OAuth 2.0 token endpoint for service accounts
// and of the Calendar API's events.insert and events.get.
//
// Written from Google's documentation:
//   - Service-account tokens (https://developers.google.com/identity/protocols/oauth2/service-account#httprest,
//     RFC 7523): POST the token_uri with grant_type
//     urn:ietf:params:oauth:grant-type:jwt-bearer and assertion = an RS256
//     JWT {iss: client_email, scope, aud: token_uri, exp, iat} signed with
//     the key file's private key; answers {"access_token", "expires_in",
//     "token_type": "Bearer"}, or 400 {"error": "invalid_grant"}.
//   - events.insert (https://developers.google.com/workspace/calendar/api/v3/reference/events/insert):
//     POST /calendar/v3/calendars/{calendarId}/events, JSON Event; a
//     client-chosen id is base32hex (a-v, 0-9), 5 to 1024 characters,
//     unique per calendar: a second insert with it is 409 duplicate
//     (https://developers.google.com/workspace/calendar/api/v3/reference/events#id).
//   - events.get (https://developers.google.com/workspace/calendar/api/v3/reference/events/get):
//     GET .../events/{eventId}: the Event, or 404 notFound.
//   - Errors (https://developers.google.com/workspace/calendar/api/guides/errors):
//     {"error": {"errors": [{"domain", "reason", "message"}], "code", "message"}};
//     400 invalid/required, 401 authError, 403 requiredAccessLevel /
//     rateLimitExceeded, 404 notFound, 409 duplicate, 429 rateLimitExceeded,
//     500 backendError.
type GCal struct {
	now    func() time.Time
	faults *faultQueue
	base   string
	key    *rsa.PrivateKey

	mu        sync.Mutex
	accounts  map[string]bool // client_email of key files issued
	tokens    map[string]bool
	calendars map[string]map[string]json.RawMessage // calendar -> event id -> event
	inserts   []GCalInsert
	created   []GCalEvent
	tokenReqs int
	nextTok   int
}

// GCalInsert is one events.insert the fake received (authenticated).
type GCalInsert struct {
	Calendar, EventID string
	Status            int
}

// GCalEvent is an event the fake really created (a side effect).
type GCalEvent struct {
	Calendar, ID, IntentID string
}

var base32hexID = regexp.MustCompile(`^[a-v0-9]+$`) // and 5 to 1024 long

// NewGCal starts a Google Calendar fake.
func NewGCal(tb TB, now func() time.Time) *GCal {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	g := &GCal{now: now, faults: newFaultQueue(), key: k, accounts: map[string]bool{}, tokens: map[string]bool{}, calendars: map[string]map[string]json.RawMessage{}}
	srv := start(tb, http.HandlerFunc(g.serve), g.faults)
	g.base = srv.URL
	return g
}

// URL is the API root (the equivalent of https://www.googleapis.com).
func (g *GCal) URL() string { return g.base }

// ServiceAccountKey returns a service-account key file for clientEmail
// whose token_uri is this fake's token endpoint.
func (g *GCal) ServiceAccountKey(clientEmail string) string {
	g.mu.Lock()
	g.accounts[clientEmail] = true
	g.mu.Unlock()
	der, _ := x509.MarshalPKCS8PrivateKey(g.key)
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "outbox-fake", "private_key_id": "fake-key-1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": clientEmail, "client_id": "1000", "auth_uri": "https://accounts.google.com/o/oauth2/auth",
		"token_uri": g.base + "/token",
	})
	return string(b)
}

// RevokeKeys makes the token endpoint refuse every key file (invalid_grant).
func (g *GCal) RevokeKeys() {
	g.mu.Lock()
	g.accounts = map[string]bool{}
	g.mu.Unlock()
}

// AddCalendar creates a calendar the service account may write to.
func (g *GCal) AddCalendar(id string) {
	g.mu.Lock()
	g.calendars[id] = map[string]json.RawMessage{}
	g.mu.Unlock()
}

// Inject queues faults for the next inserts that pass authentication and validation.
func (g *GCal) Inject(fs ...Fault) { g.faults.push(fs...) }

// Release lets held responses go.
func (g *GCal) Release() { g.faults.Release() }

// Events is the number of events really created.
func (g *GCal) Events() int { g.mu.Lock(); defer g.mu.Unlock(); return len(g.created) }

// EventsFor counts events whose private extended property outbox_intent_id is intentID.
func (g *GCal) EventsFor(intentID string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, e := range g.created {
		if e.IntentID == intentID {
			n++
		}
	}
	return n
}

// InsertsOf lists the inserts of event id eventID, in order.
func (g *GCal) InsertsOf(eventID string) []GCalInsert {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []GCalInsert
	for _, i := range g.inserts {
		if i.EventID == eventID {
			out = append(out, i)
		}
	}
	return out
}

// TokenRequests counts token endpoint calls.
func (g *GCal) TokenRequests() int { g.mu.Lock(); defer g.mu.Unlock(); return g.tokenReqs }

func writeGoogleError(w http.ResponseWriter, status int, domain, reason, msg string) {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"errors": []map[string]string{{"domain": domain, "reason": reason, "message": msg}},
		"code":   status, "message": msg,
	}})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (g *GCal) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		g.serveToken(w, r)
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	g.mu.Lock()
	ok := g.tokens[tok]
	g.mu.Unlock()
	if !ok {
		writeGoogleError(w, http.StatusUnauthorized, "global", "authError", "Invalid Credentials")
		return
	}
	rest, found := strings.CutPrefix(r.URL.EscapedPath(), "/calendar/v3/calendars/")
	if !found {
		writeGoogleError(w, http.StatusNotFound, "global", "notFound", "Not Found")
		return
	}
	parts := strings.Split(rest, "/")
	cal, _ := url.PathUnescape(parts[0])
	g.mu.Lock()
	events := g.calendars[cal]
	g.mu.Unlock()
	if events == nil {
		writeGoogleError(w, http.StatusNotFound, "global", "notFound", "Not Found")
		return
	}
	switch {
	case len(parts) == 2 && parts[1] == "events" && r.Method == http.MethodPost:
		g.insert(w, r, cal)
	case len(parts) == 3 && parts[1] == "events" && r.Method == http.MethodGet:
		id, _ := url.PathUnescape(parts[2])
		g.mu.Lock()
		e, ok := g.calendars[cal][id]
		g.mu.Unlock()
		if !ok {
			writeGoogleError(w, http.StatusNotFound, "global", "notFound", "Not Found")
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write(e)
	default:
		writeGoogleError(w, http.StatusNotFound, "global", "notFound", "Not Found")
	}
}

// serveToken checks the JWT bearer grant (RS256 signature with the issued
// key, iss a known client_email, aud this token_uri, scope, unexpired).
func (g *GCal) serveToken(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.tokenReqs++
	g.mu.Unlock()
	invalid := func(desc string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": desc})
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		invalid("Invalid grant_type")
		return
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		invalid("Invalid JWT")
		return
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err != nil || rsa.VerifyPKCS1v15(&g.key.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		invalid("Invalid JWT Signature.")
		return
	}
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c struct {
		Iss, Scope, Aud string
		Exp             int64
	}
	if json.Unmarshal(raw, &c) != nil {
		invalid("Invalid JWT")
		return
	}
	g.mu.Lock()
	known := g.accounts[c.Iss]
	g.mu.Unlock()
	switch {
	case !known:
		invalid("Invalid grant: account not found")
		return
	case c.Aud != g.base+"/token":
		invalid("Invalid JWT: aud")
		return
	case !strings.Contains(c.Scope, "https://www.googleapis.com/auth/calendar"):
		invalid("Invalid scope")
		return
	case c.Exp < g.now().Unix():
		invalid("Invalid JWT: Token must be a short-lived token")
		return
	}
	g.mu.Lock()
	g.nextTok++
	tok := fmt.Sprintf("ya29.fake-%d", g.nextTok)
	g.tokens[tok] = true
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "expires_in": 3599, "token_type": "Bearer"})
}

func (g *GCal) insert(w http.ResponseWriter, r *http.Request, cal string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var ev map[string]json.RawMessage
	if err != nil || json.Unmarshal(body, &ev) != nil || ev == nil {
		writeGoogleError(w, http.StatusBadRequest, "global", "parseError", "Parse Error")
		return
	}
	var id string
	_ = json.Unmarshal(ev["id"], &id)
	record := func(st int) {
		g.mu.Lock()
		g.inserts = append(g.inserts, GCalInsert{Calendar: cal, EventID: id, Status: st})
		g.mu.Unlock()
	}
	switch {
	case ev["start"] == nil:
		record(400)
		writeGoogleError(w, http.StatusBadRequest, "global", "required", "Missing start time.")
		return
	case ev["end"] == nil:
		record(400)
		writeGoogleError(w, http.StatusBadRequest, "global", "required", "Missing end time.")
		return
	case id != "" && (!base32hexID.MatchString(id) || len(id) < 5 || len(id) > 1024):
		record(400)
		writeGoogleError(w, http.StatusBadRequest, "global", "invalid", "Invalid resource id value.")
		return
	}
	g.mu.Lock()
	_, dup := g.calendars[cal][id]
	g.mu.Unlock()
	if dup {
		record(409)
		writeGoogleError(w, http.StatusConflict, "global", "duplicate", "The requested identifier already exists.")
		return
	}
	f, hasFault := g.faults.pop()
	if hasFault {
		switch f.Kind {
		case Reject:
			record(400)
			writeGoogleError(w, http.StatusBadRequest, "calendar", "timeRangeEmpty", "The specified time range is empty.")
			return
		case Unauthorized:
			record(403)
			writeGoogleError(w, http.StatusForbidden, "calendar", "requiredAccessLevel", "You need to have writer access to this calendar.")
			return
		case RateLimit:
			record(429)
			writeGoogleError(w, http.StatusTooManyRequests, "usageLimits", "rateLimitExceeded", "Rate Limit Exceeded")
			return
		case Unavailable:
			record(503)
			writeGoogleError(w, http.StatusServiceUnavailable, "global", "backendError", "Backend Error")
			return
		case ProviderError:
			st := f.Status
			if st == 0 {
				st = http.StatusBadRequest
			}
			record(st)
			writeGoogleError(w, st, "global", f.Code, f.Description)
			return
		case HangNoCommit:
			g.faults.hold(r)
			record(503)
			writeGoogleError(w, http.StatusServiceUnavailable, "global", "backendError", "Backend Error")
			return
		}
	}
	var xp struct {
		Private map[string]string `json:"private"`
	}
	_ = json.Unmarshal(ev["extendedProperties"], &xp)
	g.mu.Lock()
	if id == "" {
		id = fmt.Sprintf("fake%08d", len(g.created)+1)
		ev["id"], _ = json.Marshal(id)
	}
	now := g.now().UTC().Format(time.RFC3339Nano)
	ev["kind"], _ = json.Marshal("calendar#event")
	ev["status"], _ = json.Marshal("confirmed")
	ev["htmlLink"], _ = json.Marshal("https://www.google.com/calendar/event?eid=" + id)
	ev["created"], _ = json.Marshal(now)
	ev["updated"], _ = json.Marshal(now)
	ev["iCalUID"], _ = json.Marshal(id + "@google.com")
	ev["etag"], _ = json.Marshal(fmt.Sprintf("\"%d\"", g.now().UnixNano()))
	stored, _ := json.Marshal(ev)
	g.calendars[cal][id] = stored
	g.created = append(g.created, GCalEvent{Calendar: cal, ID: id, IntentID: xp.Private["outbox_intent_id"]})
	g.inserts = append(g.inserts, GCalInsert{Calendar: cal, EventID: id, Status: 200})
	g.mu.Unlock()
	if g.faults.afterCommit(w, r, f, hasFault, func() {
		writeGoogleError(w, http.StatusInternalServerError, "global", "backendError", "Backend Error")
	}) {
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(stored)
}
