package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
)

func TestHappyPathDeliversOnceInThreeWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id := e.mustSubmit("happy-1", intentBody("acct-h", "chan-1", "hello"))
	in := e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	if in.ExternalID == "" || len(in.Attempts) != 1 {
		t.Fatalf("external id %q, attempts %d", in.ExternalID, len(in.Attempts))
	}
	if got := e.writes.n.Load(); got != 3 {
		t.Fatalf("DynamoDB write requests for one delivered intent = %d, want 3 (intake, claim, outcome)", got)
	}
	e.assertEffectsStay(id, 1, 300*time.Millisecond)

	// The bot reads it back, with its attempt and evidence.
	r := e.do("GET", "/v1/intents/"+id, botToken, nil, "")
	var got core.Intent
	r.json(t, &got)
	if r.status != 200 || got.Status != core.StatusSucceeded || len(got.Attempts) != 1 || got.Attempts[0].Evidence.HTTPStatus != 201 {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
}

func TestFiftyConcurrentSubmissionsOneIntentOneEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	body := intentBody("acct-c", "chan-1", "once")
	var wg sync.WaitGroup
	results := make([]response, 50)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = e.submit(botToken, "same-key", body)
		}(i)
	}
	wg.Wait()
	ids := map[string]bool{}
	created := 0
	for _, r := range results {
		var in core.Intent
		r.json(t, &in)
		ids[in.ID] = true
		switch r.status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
			if r.headers.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay without Idempotent-Replayed header")
			}
		default:
			t.Fatalf("status %d %s", r.status, r.body)
		}
	}
	if len(ids) != 1 || created != 1 {
		t.Fatalf("ids=%d created=%d, want 1 and 1", len(ids), created)
	}
	if n := e.itemCount(); n != 1 {
		t.Fatalf("intent items = %d, want 1", n)
	}
	var id string
	for k := range ids {
		id = k
	}
	e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	e.assertEffectsStay(id, 1, 300*time.Millisecond)
}

func TestReplayIgnoresKeyOrderAndWhitespaceAndRefusesChangedBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	first := e.submit(botToken, "k-replay", intentBody("acct-r", "chan-1", "hi"))
	if first.status != 201 || first.headers.Get("Location") == "" {
		t.Fatalf("first: %d %v", first.status, first.headers)
	}
	var in core.Intent
	first.json(t, &in)
	reordered := "{ \"grant\": {\"version\": 1, \"id\": \"g-1\"},\n  \"payload\": {\"text\": \"hi\"}, \"target\":\"chan-1\", \"action\":\"send_message\",\n \"account\":\"acct-r\", \"provider\":\"sandbox\", \"kind\":\"reply\" }"
	r := e.submit(botToken, "k-replay", reordered)
	var again core.Intent
	r.json(t, &again)
	if r.status != 200 || again.ID != in.ID || r.headers.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("reordered replay: %d %s", r.status, r.body)
	}
	before := e.intent(in.ID)
	changed := e.submit(botToken, "k-replay", intentBody("acct-r", "chan-1", "something else"))
	if changed.status != 422 || changed.errorCode() != "idempotency_key_reused" {
		t.Fatalf("changed body: %d %s", changed.status, changed.body)
	}
	after := e.intent(in.ID)
	if after.Version != before.Version || after.PayloadHash != before.PayloadHash {
		t.Fatalf("stored intent changed by a refused reuse")
	}
	// The same key from another bot is another intent.
	other := e.submit(bot2Token, "k-replay", intentBody("acct-r", "chan-1", "hi"))
	var o core.Intent
	other.json(t, &o)
	if other.status != 201 || o.ID == in.ID {
		t.Fatalf("second bot: %d %s", other.status, other.body)
	}
	// A bot sees only its own intents.
	if r := e.do("GET", "/v1/intents/"+in.ID, bot2Token, nil, ""); r.status != 404 {
		t.Fatalf("other bot's intent: %d", r.status)
	}
}

func TestBadInputGetsClearErrorAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	good := intentBody("acct-b", "chan-1", "hi")
	cases := []struct {
		name, token, key, body string
		status                 int
		code                   string
	}{
		{"no token", "", "k1", good, 401, ""},
		{"bad token", "nope", "k1", good, 403, ""},
		{"no key", botToken, "", good, 400, "invalid_idempotency_key"},
		{"key too long", botToken, strings.Repeat("x", 256), good, 400, "invalid_idempotency_key"},
		{"malformed json", botToken, "k2", `{"kind":"reply",`, 400, "malformed_json"},
		{"schema violation", botToken, "k3", strings.Replace(good, `"kind":"reply"`, `"kind":"yell"`, 1), 400, "invalid_field"},
		{"missing target", botToken, "k4", strings.Replace(good, `"target":"chan-1",`, "", 1), 400, "invalid_field"},
		{"too large", botToken, "k5", strings.Replace(good, `"hi"`, `"`+strings.Repeat("a", 300<<10)+`"`, 1), 413, "payload_too_large"},
		{"unknown provider", botToken, "k6", strings.Replace(good, `"sandbox"`, `"carrier-pigeon"`, 1), 422, "unknown_provider"},
		{"unknown action", botToken, "k7", strings.Replace(good, testAction, "teleport", 1), 422, "unknown_action"},
		{"operator cannot submit", opToken, "k8", good, 403, "forbidden"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.submit(c.token, c.key, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if c.code != "" {
				if r.errorCode() != c.code {
					t.Fatalf("code %q, want %q: %s", r.errorCode(), c.code, r.body)
				}
				if !strings.Contains(string(r.body), `"message"`) {
					t.Fatalf("no human message: %s", r.body)
				}
			}
		})
	}
	if n := e.itemCount(); n != 0 {
		t.Fatalf("bad input wrote %d intent items", n)
	}
	if w := e.writes.n.Load(); w != 0 {
		t.Fatalf("bad input made %d DynamoDB writes", w)
	}
}

func TestDuplicateStreamRecordsCauseOneEffect(t *testing.T) {
	t.Parallel()
	// Deliver every stream record three times, twice concurrently, to the real dispatcher.
	e := newEnv(t, options{DisableStream: true})
	id := e.mustSubmit("dup-stream", intentBody("acct-d", "chan-1", "hi"))
	rec := pendingRecord(t, e, id)
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec, rec}}
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.st.Dispatcher.Handle(context.Background(), ev); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, err := e.st.Dispatcher.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(id, 5*time.Second, core.StatusSucceeded)
	e.assertEffectsStay(id, 1, 200*time.Millisecond)
}

func TestUnavailableBeforeCommitIsRetriedThroughSQS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.faults(`{"account":"acct-503","faults":[{"kind":"unavailable"}]}`)
	id := e.mustSubmit("retry-503", intentBody("acct-503", "chan-1", "hi"))
	in := e.waitStatus(id, 15*time.Second, core.StatusSucceeded)
	if len(in.Attempts) != 2 || in.Attempts[0].Result != core.AttemptResult(core.ClassTransient) || in.Attempts[1].Trigger != "retry" {
		t.Fatalf("attempts: %+v", in.Attempts)
	}
	if gap := in.Attempts[1].StartedAt.Sub(in.Attempts[0].EndedAt); gap < 500*time.Millisecond {
		t.Fatalf("retry came after %v, not after the queue delay", gap)
	}
	e.assertEffectsStay(id, 1, 300*time.Millisecond)
}

func TestRetryCapEndsFailedWithEveryAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.faults(`{"account":"acct-cap","faults":[{"kind":"unavailable"},{"kind":"rate_limit","retryAfterSeconds":1},{"kind":"unavailable"},{"kind":"unavailable"}]}`)
	id := e.mustSubmit("retry-cap", intentBody("acct-cap", "chan-1", "hi"))
	in := e.waitStatus(id, 20*time.Second, core.StatusFailed)
	if len(in.Attempts) != 3 {
		t.Fatalf("attempts kept = %d, want 3 (the policy's cap)", len(in.Attempts))
	}
	if in.Attempts[1].Result != core.AttemptResult(core.ClassRateLimited) || in.Attempts[1].Evidence.RetryAfter != "1" {
		t.Fatalf("second attempt evidence: %+v", in.Attempts[1])
	}
	e.assertEffectsStay(id, 0, 200*time.Millisecond)
}
