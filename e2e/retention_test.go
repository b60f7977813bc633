package e2e

// Issue 27: a stated idempotency window and a table that prunes itself.
// Windows are shortened by configuration (IntentRetention, TombstoneRetention)
// and the local TTL reaper runs every 200 ms; the tombstones and archived
// records are written by the pruner from AWS-shaped stream records.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/archive"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/intake"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
)

func retentionOpts(intent, tomb time.Duration) options {
	return options{Config: wire.Config{IntentRetention: intent, TombstoneRetention: tomb}, TTLReaperInterval: 200 * time.Millisecond}
}

// rawIntentItem reads the item under an intent's key as stored.
func (e *env) rawIntentItem(id string) (map[string]any, int) {
	e.t.Helper()
	out, err := e.clients.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(e.table), Key: map[string]types.AttributeValue{"pk": strAV(dynamo.IntentPK(id)), "sk": strAV("INTENT")}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(out.Item) == 0 {
		return nil, 0
	}
	keys := map[string]any{}
	for k := range out.Item {
		keys[k] = true
	}
	return keys, dynamo.ItemSize(out.Item, dynamo.NumberBytesDynamoDB)
}

// waitPruned waits until the intent's key holds its tombstone.
func (e *env) waitPruned(id string, within time.Duration) *core.Intent {
	e.t.Helper()
	var in *core.Intent
	e.eventually(within, "intent "+id+" is pruned to its tombstone", func() bool {
		got, err := e.st.App.Store.Get(context.Background(), id)
		if err != nil {
			return false
		}
		in = got
		return got.Pruned != nil
	})
	return in
}

func (e *env) archived(loc string) *archive.Record {
	e.t.Helper()
	if e.st.App.Archive == nil {
		e.t.Fatal("the archive is off")
	}
	rec, err := e.st.App.Archive.Read(context.Background(), loc)
	if err != nil {
		e.t.Fatalf("read archive %s: %v", loc, err)
	}
	return rec
}

func TestPrunedKeyReplaysTheOriginalOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t, retentionOpts(2*time.Second, 12*time.Second))
	body := intentBody("acct-ret", "chan-1", "hello, once")
	id := e.mustSubmit("ret-1", body)
	done := e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	if done.EndedAt == nil || done.ExpiresAt.IsZero() || done.ExpiresAt.Before(done.EndedAt.Add(2*time.Second)) {
		t.Fatalf("the terminal write set no TTL: ended %v, expires %v", done.EndedAt, done.ExpiresAt)
	}
	if n := e.effectsFor(id); n != 1 {
		t.Fatalf("%d effects before pruning, want 1", n)
	}

	// Within the window (unless a loaded machine already passed it) a
	// replay is an ordinary one.
	if r := e.submit(botToken, "ret-1", body); r.status != http.StatusOK || (e.intent(id).Pruned == nil && strings.Contains(string(r.body), `"pruned"`)) {
		t.Fatalf("replay within the window: %d %s", r.status, r.body)
	}

	tomb := e.waitPruned(id, 20*time.Second)
	if tomb.Status != core.StatusSucceeded || tomb.ExternalID != done.ExternalID || tomb.RequestHash != done.RequestHash ||
		tomb.PayloadHash != done.PayloadHash || !tomb.Pruned.EndedAt.Equal(done.EndedAt.Truncate(time.Millisecond)) {
		t.Fatalf("tombstone %+v (pruned %+v) does not keep the first answer of %+v", tomb, tomb.Pruned, done)
	}
	if _, size := e.rawIntentItem(id); size > 300 {
		t.Fatalf("tombstone is %d bytes, want <= 300", size)
	}

	// The same key and body: the original outcome, marked as pruned; nothing is sent.
	r := e.submit(botToken, "ret-1", body)
	if r.status != http.StatusOK || r.headers.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after pruning: %d %s", r.status, r.body)
	}
	var v intake.PrunedIntentView
	r.json(t, &v)
	if v.ID != id || v.Status != core.StatusSucceeded || v.ExternalID != done.ExternalID || v.Pruned == nil || v.Pruned.Archive == "" {
		t.Fatalf("replay after pruning answered %s", r.body)
	}
	e.assertEffectsStay(id, 1, 500*time.Millisecond)

	// A different body under the key: refused.
	e.expectRefused("different body after pruning", "ret-1", intentBody("acct-ret", "chan-1", "something else"), http.StatusUnprocessableEntity, "idempotency_key_reused")
	// Reads answer the tombstone's summary; the history is gone (410), never a 500.
	if r := e.do("GET", "/v1/intents/"+id, botToken, nil, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"pruned"`) {
		t.Fatalf("GET pruned intent: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/admin/intents/"+id, opToken, nil, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"pruned"`) {
		t.Fatalf("admin GET pruned intent: %d %s", r.status, r.body)
	}
	for _, p := range []struct{ path, tok string }{{"/v1/intents/" + id + "/history", botToken}, {"/v1/admin/intents/" + id + "/history", opToken}} {
		if r := e.do("GET", p.path, p.tok, nil, ""); r.status != http.StatusGone || r.errorCode() != "pruned" {
			t.Fatalf("GET %s: %d %s", p.path, r.status, r.body)
		}
	}
	if r := e.do("POST", "/v1/admin/intents/"+id+"/resolution", opToken, map[string]string{"Idempotency-Key": "d-pruned"},
		`{"decision":"abandon","reason":"late"}`); r.status != http.StatusGone || r.errorCode() != "pruned" {
		t.Fatalf("decision on a pruned intent: %d %s", r.status, r.body)
	}

	// The archive holds what the table no longer does.
	rec := e.archived(v.Pruned.Archive)
	if rec.Intent.ID != id || len(rec.Intent.Attempts) != len(done.Attempts) || rec.Intent.Attempts[0].ExternalID != done.ExternalID {
		t.Fatalf("archived record %+v, want the attempts of %+v", rec.Intent, done)
	}

	// After the tombstone's own window the key starts a new intent. The
	// window ends at the tombstone's TTL: wait for that moment by the clock
	// (submitting every 25 ms until then was some 500 intake requests),
	// then for the reaper to take it.
	if tomb.ExpiresAt.IsZero() {
		t.Fatalf("the tombstone has no TTL: %+v", tomb)
	}
	e.waitUntil(tomb.ExpiresAt)
	var created response
	e.eventually(40*time.Second, "the key starts a new intent after the tombstone window", func() bool {
		created = e.submit(botToken, "ret-1", body)
		return created.status == http.StatusCreated
	})
	e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	if n := e.effectsFor(id); n != 2 {
		t.Fatalf("%d effects after the key was reused past both windows, want 2 (a new intent)", n)
	}
}

func TestNeedsHumanOutlivesTheWindowAndItsArchiveHasEverything(t *testing.T) {
	t.Parallel()
	// 4 s: the window must outlast the decision and the status binding
	// after it (it is counted from the decision, the intent's end).
	e := whEnv(t, retentionOpts(4*time.Second, time.Hour))
	acct := "acct-ret-nh"
	e.faults(fmt.Sprintf(`{"account":%q,"capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}]}`, acct))
	id := e.mustSubmit("ret-nh", intentBody(acct, "chan-1", "charge 10 EUR"))
	e.waitStatus(id, 10*time.Second, core.StatusNeedsHuman)

	// Past the window and many reaper sweeps it is still there, listed and whole.
	e.consistently(5*time.Second, "a needs-human intent is never pruned", func() bool {
		in := e.intent(id)
		return in.Status == core.StatusNeedsHuman && in.Pruned == nil && in.ExpiresAt.IsZero()
	})
	r := e.do("GET", "/v1/admin/intents?status=needs-human&limit=100", opToken, nil, "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), id) {
		t.Fatalf("needs-human listing: %d %s", r.status, r.body)
	}
	// Decidable: the decision ends it (and that write sets its TTL).
	r = e.do("POST", "/v1/admin/intents/"+id+"/resolution", opToken, map[string]string{"Idempotency-Key": "ret-d-1"},
		`{"decision":"accept-success","reason":"customer saw it"}`)
	if r.status != http.StatusOK {
		t.Fatalf("decision: %d %s", r.status, r.body)
	}
	// A provider's delivery status binds to the ended intent.
	e.whConfigure(acct, whSecret, "")
	if er := e.whEmit(fmt.Sprintf(`{"account":%q,"type":"status","intentId":%q,"status":"delivered"}`, acct, id)); !allOK(er.Deliveries) {
		t.Fatalf("deliveries %+v", er.Deliveries)
	}
	var whole *core.Intent
	e.eventually(5*time.Second, "the status is bound", func() bool {
		in, err := e.st.App.Store.Get(context.Background(), id)
		if err != nil || in.Pruned != nil {
			return false
		}
		whole = in
		return len(webhookEntries(in)) == 1
	})
	if n := e.effectsFor(id); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}

	tomb := e.waitPruned(id, 20*time.Second)
	if tomb.Status != core.StatusSucceeded || tomb.Pruned.Archive == "" {
		t.Fatalf("tombstone %+v", tomb)
	}
	rec := e.archived(tomb.Pruned.Archive)
	if len(rec.Intent.Attempts) != len(whole.Attempts) || len(rec.Intent.Resolutions) != len(whole.Resolutions) || len(rec.Intent.Resolutions) == 0 {
		t.Fatalf("archived %d attempts and %d decisions, the intent had %d and %d", len(rec.Intent.Attempts), len(rec.Intent.Resolutions), len(whole.Attempts), len(whole.Resolutions))
	}
	for i, a := range whole.Attempts {
		if got := rec.Intent.Attempts[i]; got.N != a.N || got.Result != a.Result || got.Trigger != a.Trigger || got.Evidence.HTTPStatus != a.Evidence.HTTPStatus {
			t.Fatalf("archived attempt %d = %+v, want %+v", i, got, a)
		}
	}
	if rec.Intent.Resolutions[len(rec.Intent.Resolutions)-1].Decision != "accept-success" {
		t.Fatalf("archived decisions %+v", rec.Intent.Resolutions)
	}
	if len(rec.WebhookBindings) != 1 || rec.WebhookBindings[0].Trigger != core.TriggerWebhook {
		t.Fatalf("archived webhook bindings %+v", rec.WebhookBindings)
	}
	if len(rec.Intent.Payload) != 0 {
		t.Fatal("the archive holds the payload body")
	}
}

// DynamoDB Local deletes expired items itself (promptly in a quiet emulator,
// not dependably beside busy tables; docs/decisions.md "Retention"), reaper
// or not: a stack that expires intents reads the stream for the pruner even
// with the reaper off, so such a delete still leaves a tombstone.
func TestPrunerReadsTheStreamWithoutTheReaper(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{Config: wire.Config{IntentRetention: time.Second, TombstoneRetention: time.Hour}})
	if e.st.Reaper != nil {
		t.Fatal("the reaper runs; this test is about a stack without it")
	}
	if e.st.PruneStream == nil {
		t.Fatal("with the reaper off the pruner reads no stream: DynamoDB Local's own TTL deletes would free keys without tombstones")
	}
}
