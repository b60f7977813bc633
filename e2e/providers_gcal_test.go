package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/gcal"
	"github.com/botharness/outbox/core"
)

func gcalEvent(summary string) string {
	return fmt.Sprintf(`{"kind":"action","provider":"gcal","account":"bookings","action":"create_event","target":"tables@example.com","payload":{"summary":%q,"start":{"dateTime":"2030-01-01T19:00:00Z"},"end":{"dateTime":"2030-01-01T21:00:00Z"}},"grant":{"id":"g-gcal","version":1}}`, summary)
}

// Google Calendar bookings against the Calendar fake
// (adapters/providers/fakes/gcal.go): a client-chosen event id and events.get
// as the lookup; a lost answer ends succeeded with one event.
func TestGCalBookings(t *testing.T) {
	t.Parallel()
	fk := fakes.NewGCal(t, time.Now)
	fk.AddCalendar("tables@example.com")
	key := fk.ServiceAccountKey("outbox@e2e.iam.gserviceaccount.com")
	keyJSON := fmt.Sprintf("%q", key)
	e := providerEnv(t, "gcal", fmt.Sprintf(`{"baseUrl":%q,"timeoutMs":2000,"accounts":{"bookings":{"serviceAccount":%s}}}`, fk.URL(), keyJSON))
	one := func(id string, in *core.Intent) {
		t.Helper()
		if n := fk.EventsFor(id); n != 1 || in.ExternalID != gcal.EventID(id) {
			t.Fatalf("%d events, external id %q, want 1 and %q (%s)", n, in.ExternalID, gcal.EventID(id), trail(in))
		}
		for _, ins := range fk.InsertsOf(gcal.EventID(id)) {
			if ins.EventID != gcal.EventID(id) {
				t.Fatalf("an insert with another id: %+v", ins)
			}
		}
	}
	t.Run("happy path", func(t *testing.T) {
		id := e.mustSubmit("gcal-happy", gcalEvent("happy"))
		one(id, e.waitStatus(id, 15*time.Second, core.StatusSucceeded))
	})
	for _, c := range []struct {
		name  string
		fault fakes.Kind
	}{{"response lost after commit", fakes.DropAfterCommit}, {"500 after commit", fakes.ErrorAfterCommit}} {
		t.Run(c.name+": settled by events.get", func(t *testing.T) {
			fk.Inject(fakes.Fault{Kind: c.fault})
			id := e.mustSubmit("gcal-"+string(c.fault), gcalEvent(c.name))
			in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded, core.StatusNeedsHuman, core.StatusFailed)
			if in.Status != core.StatusSucceeded {
				t.Fatalf("%s", trail(in))
			}
			one(id, in)
		})
	}
	t.Run("a documented rejection fails without a retry", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.Reject})
		id := e.mustSubmit("gcal-reject", gcalEvent("rejected"))
		in := e.waitStatus(id, 15*time.Second, core.StatusFailed)
		if n := len(fk.InsertsOf(gcal.EventID(id))); n != 1 || fk.EventsFor(id) != 0 || in.AttemptCount != 1 {
			t.Fatalf("%d inserts, %d events, %s", n, fk.EventsFor(id), trail(in))
		}
	})
	t.Run("429 is honoured", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.RateLimit})
		id := e.mustSubmit("gcal-429", gcalEvent("rate limited"))
		in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		ins := fk.InsertsOf(gcal.EventID(id))
		if len(ins) < 2 || ins[0].Status != http.StatusTooManyRequests {
			t.Fatalf("inserts %+v", ins)
		}
		one(id, in)
	})
	t.Run("Prefer: wait answers succeeded inline", func(t *testing.T) {
		r := e.submitWait(botToken, "gcal-inline", gcalEvent("inline"), 5)
		var in core.Intent
		r.json(t, &in)
		if r.status != http.StatusCreated || in.Status != core.StatusSucceeded {
			t.Fatalf("inline: %d %s", r.status, r.body)
		}
		one(in.ID, &in)
	})
}
