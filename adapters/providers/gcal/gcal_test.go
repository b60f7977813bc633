package gcal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/gcal"
	"github.com/botharness/outbox/core"
)

var ctx = context.Background()

// calendarServer answers the token endpoint through the fake's key file and
// every Calendar call with one canned answer.
func calendarServer(t *testing.T, status int, body string) (*gcal.Provider, *[]string) {
	t.Helper()
	fk := fakes.NewGCal(t, time.Now)
	key := fk.ServiceAccountKey("outbox@proj.iam.gserviceaccount.com")
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, r.Method+" "+r.URL.EscapedPath()+" "+r.Header.Get("Authorization")+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	p, err := gcal.New(nil, gcal.Config{BaseURL: srv.URL, Timeout: 2 * time.Second, Accounts: map[string]gcal.Account{"bookings": {ServiceAccount: key}}})
	if err != nil {
		t.Fatal(err)
	}
	return p, &bodies
}

func request(id string) core.SendRequest {
	return core.SendRequest{IntentID: id, IdempotencyKey: id, Account: "bookings", Action: "create_event", Target: "team@example.com",
		Payload: []byte(`{"summary":"x","start":{"date":"2030-01-01"},"end":{"date":"2030-01-02"}}`), Attempt: 1}
}

func gErr(status int, reason string) string {
	return fmt.Sprintf(`{"error":{"errors":[{"domain":"global","reason":%q,"message":"a Google error text"}],"code":%d,"message":"a Google error text"}}`, reason, status)
}

// Each documented Calendar error maps to its class by status and reason
// (https://developers.google.com/workspace/calendar/api/guides/errors).
func TestSendMapsDocumentedAnswers(t *testing.T) {
	id := gcal.EventID("it_1")
	for _, c := range []struct {
		name   string
		status int
		body   string
		class  core.ErrorClass
	}{
		{"inserted", 200, `{"kind":"calendar#event","id":"` + id + `","status":"confirmed"}`, ""},
		{"2xx with another id", 200, `{"kind":"calendar#event","id":"other1","status":"confirmed"}`, core.ClassUnknownOutcome},
		{"400 invalid", 400, gErr(400, "invalid"), core.ClassRejectedInput},
		{"400 required", 400, gErr(400, "required"), core.ClassRejectedInput},
		{"400 timeRangeEmpty", 400, gErr(400, "timeRangeEmpty"), core.ClassRejectedInput},
		{"401 authError", 401, gErr(401, "authError"), core.ClassUnauthorized},
		{"403 userRateLimitExceeded", 403, gErr(403, "userRateLimitExceeded"), core.ClassRateLimited},
		{"403 rateLimitExceeded", 403, gErr(403, "rateLimitExceeded"), core.ClassRateLimited},
		{"403 dailyLimitExceeded", 403, gErr(403, "dailyLimitExceeded"), core.ClassRateLimited},
		{"403 quotaExceeded", 403, gErr(403, "quotaExceeded"), core.ClassRateLimited},
		{"403 forbiddenForNonOrganizer", 403, gErr(403, "forbiddenForNonOrganizer"), core.ClassUnauthorized},
		{"403 requiredAccessLevel", 403, gErr(403, "requiredAccessLevel"), core.ClassUnauthorized},
		{"404 notFound", 404, gErr(404, "notFound"), core.ClassRejectedInput},
		{"409 duplicate: a hint, not proof", 409, gErr(409, "duplicate"), core.ClassUnknownOutcome},
		{"412 conditionNotMet", 412, gErr(412, "conditionNotMet"), core.ClassRejectedInput},
		{"429 rateLimitExceeded", 429, gErr(429, "rateLimitExceeded"), core.ClassRateLimited},
		{"500 backendError", 500, gErr(500, "backendError"), core.ClassUnknownOutcome},
		{"503 backendError", 503, gErr(503, "backendError"), core.ClassUnknownOutcome},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, _ := calendarServer(t, c.status, c.body)
			res, err := p.Send(ctx, request("it_1"))
			if c.class == "" {
				if err != nil || res.ExternalID != id {
					t.Fatalf("Send = %+v, %v", res, err)
				}
				return
			}
			if got := core.ClassOf(err); got != c.class {
				t.Fatalf("class %s (%v), want %s", got, err, c.class)
			}
		})
	}
}

// The event id is the intent's, base32hex (a-v, 0-9), 5 to 1024 characters,
// the same on every attempt; the intent id rides in a private property; the
// token comes from the key file's token_uri.
func TestInsertWireFormat(t *testing.T) {
	id := gcal.EventID("it_wire")
	p, bodies := calendarServer(t, 200, `{"id":"`+id+`","status":"confirmed"}`)
	for i := 0; i < 2; i++ {
		if _, err := p.Send(ctx, request("it_wire")); err != nil {
			t.Fatal(err)
		}
	}
	if len(*bodies) != 2 || (*bodies)[0] != (*bodies)[1] {
		t.Fatalf("attempts differ: %q", *bodies)
	}
	got := (*bodies)[0]
	if !strings.HasPrefix(got, "POST /calendar/v3/calendars/team@example.com/events Bearer ya29.fake-1 ") {
		t.Fatalf("request %q", got)
	}
	var ev struct {
		ID                 string
		ExtendedProperties struct{ Private map[string]string }
	}
	_ = json.Unmarshal([]byte(got[strings.Index(got, "{"):]), &ev)
	if ev.ID != id || ev.ExtendedProperties.Private["outbox_intent_id"] != "it_wire" {
		t.Fatalf("event %+v", ev)
	}
	if !regexp.MustCompile(`^[a-v0-9]+$`).MatchString(id) || len(id) < 5 || gcal.EventID("it_wire") != id || gcal.EventID("it_wirf") == id {
		t.Fatalf("EventID %q", id)
	}
	if e := gcal.EventID("a"); len(e) < 5 {
		t.Fatalf("short intent id: %q", e)
	}
}

func TestLookupRefusesAForeignEventAndReportsAbsence(t *testing.T) {
	p, _ := calendarServer(t, 200, `{"id":"`+gcal.EventID("it_1")+`","status":"confirmed","extendedProperties":{"private":{"outbox_intent_id":"it_someone_else"}}}`)
	if lr, err := p.Lookup(ctx, request("it_1")); err == nil {
		t.Fatalf("a foreign event with our id: %+v", lr)
	}
	p, _ = calendarServer(t, 404, gErr(404, "notFound"))
	if lr, err := p.Lookup(ctx, request("it_1")); err != nil || lr.State != core.LookupAbsent {
		t.Fatalf("404: %+v %v", lr, err)
	}
	p, _ = calendarServer(t, 200, `{"id":"`+gcal.EventID("it_1")+`","status":"cancelled","extendedProperties":{"private":{"outbox_intent_id":"it_1"}}}`)
	if lr, err := p.Lookup(ctx, request("it_1")); err != nil || lr.State != core.LookupFound {
		t.Fatalf("a cancelled event was still inserted: %+v %v", lr, err)
	}
}

func TestRevokedKeyIsUnauthorizedWithoutACalendarCall(t *testing.T) {
	fk := fakes.NewGCal(t, time.Now)
	fk.AddCalendar("team@example.com")
	key := fk.ServiceAccountKey("outbox@proj.iam.gserviceaccount.com")
	fk.RevokeKeys()
	p, err := gcal.New(nil, gcal.Config{BaseURL: fk.URL(), Accounts: map[string]gcal.Account{"bookings": {ServiceAccount: key}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Send(ctx, request("it_rev"))
	if core.ClassOf(err) != core.ClassUnauthorized || fk.Events() != 0 || len(fk.InsertsOf(gcal.EventID("it_rev"))) != 0 {
		t.Fatalf("revoked key: %v, %d events", err, fk.Events())
	}
	if strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Fatal("the key in an error")
	}
	if _, err := gcal.New(nil, gcal.Config{Accounts: map[string]gcal.Account{"b": {ServiceAccount: `{"type":"authorized_user","private_key":"secret-value"}`}}}); err == nil || strings.Contains(err.Error(), "secret-value") {
		t.Fatalf("not a service-account key: %v", err)
	}
}
