package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/intake"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
)

// Revalidation (issue 4): grants, capabilities and source revisions are
// managed over the real HTTP API and every assertion about delivery counts
// the sandbox's side effects.

func rvGrant(bot, account string, targets ...string) map[string]any {
	return map[string]any{"bot": bot, "provider": "sandbox", "account": account, "actions": []string{testAction}, "targets": targets}
}

func rvJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// rvPutGrant writes a grant as the operator and returns it.
func (e *env) rvPutGrant(id string, body map[string]any, want int) core.Grant {
	e.t.Helper()
	r := e.do("PUT", "/v1/admin/grants/"+id, opToken, nil, rvJSON(body))
	if r.status != want {
		e.t.Fatalf("PUT grant %s: %d %s", id, r.status, r.body)
	}
	var g core.Grant
	if want < 300 {
		r.json(e.t, &g)
	}
	return g
}

// rvIntent is an intent body naming grant id/version and optionally a source.
func rvIntent(account, target, grantID string, grantVersion int, source string) string {
	b := fmt.Sprintf(`{"kind":"reply","provider":"sandbox","account":%q,"action":%q,"target":%q,"payload":{"text":"hi"},"grant":{"id":%q,"version":%d}`,
		account, testAction, target, grantID, grantVersion)
	if source != "" {
		b += `,"source":` + source
	}
	return b + "}"
}

// rvDeliver hands the intent's real INSERT stream record to the real dispatcher.
func (e *env) rvDeliver(id string) {
	e.t.Helper()
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{pendingRecord(e.t, e, id)}}
	if _, err := e.st.Dispatcher.Handle(context.Background(), ev); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) rvPutSource(token, id, body string) (int, intake.SourceResultBody) {
	e.t.Helper()
	r := e.do("PUT", "/v1/sources/"+id, token, nil, body)
	var out intake.SourceResultBody
	if r.status == http.StatusOK {
		r.json(e.t, &out)
	}
	return r.status, out
}

func lastChecks(t *testing.T, in *core.Intent) *core.Checks {
	t.Helper()
	if len(in.Attempts) == 0 || in.Attempts[len(in.Attempts)-1].Checks == nil {
		t.Fatalf("no revalidation checks recorded: %s", trail(in))
	}
	return in.Attempts[len(in.Attempts)-1].Checks
}

func TestRevalidateGrantRevokedBetweenIntakeAndDispatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	g := e.rvPutGrant("g-rev", rvGrant(testBot, "acct-rev", "chan-*"), http.StatusCreated)
	if g.Version != 1 {
		t.Fatalf("new grant version %d", g.Version)
	}
	// Operators only.
	for _, tok := range []string{orchToken, botToken} {
		if r := e.do("PUT", "/v1/admin/grants/g-x", tok, nil, rvJSON(rvGrant(testBot, "a", "*"))); r.status != http.StatusForbidden {
			t.Fatalf("PUT grant as %s: %d %s", tok, r.status, r.body)
		}
		if r := e.do("POST", "/v1/admin/grants/g-rev/revoke", tok, nil, `{"reason":"x"}`); r.status != http.StatusForbidden {
			t.Fatalf("revoke as %s: %d %s", tok, r.status, r.body)
		}
		if r := e.do("GET", "/v1/admin/grants", tok, nil, ""); r.status != http.StatusForbidden {
			t.Fatalf("list as %s: %d %s", tok, r.status, r.body)
		}
	}

	id := e.mustSubmit("rev-1", rvIntent("acct-rev", "chan-7", "g-rev", 1, ""))
	r := e.do("POST", "/v1/admin/grants/g-rev/revoke", opToken, nil, `{"reason":"the user disconnected the workspace"}`)
	var revoked core.Grant
	r.json(t, &revoked)
	if r.status != http.StatusOK || revoked.Version != 2 || revoked.RevokedAt == nil || revoked.RevokedBy != "op-ann" {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}

	e.rvDeliver(id)
	in := e.waitStatus(id, 5*time.Second, core.StatusGrantRevoked)
	e.assertEffectsStay(id, 0, 300*time.Millisecond)
	c := lastChecks(t, in)
	if c.Result != string(core.StatusGrantRevoked) || c.GrantVersion != 2 || !strings.Contains(c.Reason, "the user disconnected the workspace") {
		t.Fatalf("checks %+v", c)
	}
	// The bot sees why.
	var seen core.Intent
	e.do("GET", "/v1/intents/"+id, botToken, nil, "").json(t, &seen)
	if seen.Status != core.StatusGrantRevoked || !strings.Contains(seen.StatusReason, "revoked") {
		t.Fatalf("bot view: %s %q", seen.Status, seen.StatusReason)
	}
	// A duplicate stream record changes nothing.
	e.rvDeliver(id)
	e.assertEffectsStay(id, 0, 200*time.Millisecond)

	// New intents under the revoked grant are refused at intake; nothing is written.
	before := e.itemCount()
	r = e.submit(botToken, "rev-2", rvIntent("acct-rev", "chan-7", "g-rev", 2, ""))
	if r.status != http.StatusForbidden || r.errorCode() != "grant_does_not_cover" || !strings.Contains(string(r.body), "revoked") {
		t.Fatalf("submit under revoked grant: %d %s", r.status, r.body)
	}
	if e.itemCount() != before {
		t.Fatalf("a refused intent was written")
	}
	// A revoked grant cannot be brought back under the same id.
	if r := e.do("PUT", "/v1/admin/grants/g-rev", opToken, nil, rvJSON(rvGrant(testBot, "acct-rev", "*"))); r.status != http.StatusConflict || r.errorCode() != "grant_revoked" {
		t.Fatalf("replace revoked: %d %s", r.status, r.body)
	}
	// Read and list.
	var got core.Grant
	if r := e.do("GET", "/v1/admin/grants/g-rev", opToken, nil, ""); r.status != 200 {
		t.Fatalf("GET grant: %d %s", r.status, r.body)
	} else if r.json(t, &got); got.Version != 2 || got.RevokeReason == "" {
		t.Fatalf("GET grant: %s", r.body)
	}
	if r := e.do("GET", "/v1/admin/grants/nope", opToken, nil, ""); r.status != http.StatusNotFound {
		t.Fatalf("GET missing grant: %d", r.status)
	}
	var list struct {
		Items []core.Grant `json:"items"`
	}
	e.do("GET", "/v1/admin/grants", opToken, nil, "").json(t, &list)
	ids := []string{}
	for _, g := range list.Items {
		ids = append(ids, g.ID)
	}
	if strings.Join(ids, ",") != "g-1,g-rev" {
		t.Fatalf("list: %v", ids)
	}
}

func TestRevalidateGrantIntakeRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	in1h := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	ago := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	cover := rvGrant(testBot, "acct-i", "chan-1", "team-*")
	cover["expiresAt"] = in1h
	e.rvPutGrant("g-cover", cover, http.StatusCreated)
	exp := rvGrant(testBot, "acct-i", "*")
	exp["expiresAt"] = ago
	e.rvPutGrant("g-expired", exp, http.StatusCreated)
	e.rvPutGrant("g-bot2", rvGrant(testBot2, "acct-i", "*"), http.StatusCreated)
	e.rvPutGrant("g-revoked", rvGrant(testBot, "acct-i", "*"), http.StatusCreated)
	if r := e.do("POST", "/v1/admin/grants/g-revoked/revoke", opToken, nil, `{"reason":"rotated"}`); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	// Bad grant definitions are refused with a field; an unknown provider or
	// action is 422, as at intake (one error table).
	for _, bad := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"bot":"bot-1","provider":"sandbox","account":"a","actions":["send_message"],"targets":[]}`, http.StatusBadRequest, "invalid_field"},
		{`{"bot":"bot-1","provider":"pigeon","account":"a","actions":["send_message"],"targets":["*"]}`, http.StatusUnprocessableEntity, "unknown_provider"},
		{`{"bot":"bot-1","provider":"sandbox","account":"a","actions":["teleport"],"targets":["*"]}`, http.StatusUnprocessableEntity, "unknown_action"},
		{`{"bot":"bot-1","provider":"sandbox","account":"a","actions":["send_message"],"targets":["a*b"]}`, http.StatusBadRequest, "invalid_field"},
		{`{"bot":"bot-1","provider":"sandbox","account":"a","actions":["send_message"],"targets":["*"],"extra":1}`, http.StatusBadRequest, "invalid_field"},
	} {
		if r := e.do("PUT", "/v1/admin/grants/g-bad", opToken, nil, bad.body); r.status != bad.status || r.errorCode() != bad.code {
			t.Fatalf("bad grant %s: %d %s, want %d %s", bad.body, r.status, r.body, bad.status, bad.code)
		}
	}

	e.writes.n.Store(0)
	cases := []struct{ name, body, reason string }{
		{"missing grant", rvIntent("acct-i", "chan-1", "g-none", 1, ""), "does not exist or is not issued"},
		{"other bot's grant", rvIntent("acct-i", "chan-1", "g-bot2", 1, ""), "does not exist or is not issued"},
		{"other account", rvIntent("acct-other", "chan-1", "g-cover", 1, ""), `account \"acct-other\"`},
		{"action not listed", strings.Replace(rvIntent("acct-i", "chan-1", "g-cover", 1, ""), testAction, "create_booking", 1), `action \"create_booking\"`},
		{"target not matched", rvIntent("acct-i", "chan-2", "g-cover", 1, ""), `target \"chan-2\"`},
		{"expired", rvIntent("acct-i", "chan-1", "g-expired", 1, ""), "expired at"},
		{"revoked", rvIntent("acct-i", "chan-1", "g-revoked", 1, ""), "rotated"},
		{"version newer than stored", rvIntent("acct-i", "chan-1", "g-cover", 2, ""), "the intent names version 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.submit(botToken, "ref-"+strings.ReplaceAll(c.name, " ", "-"), c.body)
			if r.status != http.StatusForbidden || r.errorCode() != "grant_does_not_cover" || !strings.Contains(string(r.body), c.reason) {
				t.Fatalf("%d %s, want 403 grant_does_not_cover mentioning %s", r.status, r.body, c.reason)
			}
		})
	}
	if n, w := e.itemCount(), e.writes.n.Load(); n != 0 || w != 0 {
		t.Fatalf("refused intents: %d items, %d writes", n, w)
	}
	// Covered: an exact target and a prefix pattern.
	e.mustSubmit("ok-1", rvIntent("acct-i", "chan-1", "g-cover", 1, ""))
	e.mustSubmit("ok-2", rvIntent("acct-i", "team-red", "g-cover", 1, ""))
}

func TestRevalidateNewerGrantVersionThatStillCoversDoesNotRevoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	e.rvPutGrant("g-nv", rvGrant(testBot, "acct-nv", "chan-1"), http.StatusCreated)
	keep := e.mustSubmit("nv-1", rvIntent("acct-nv", "chan-1", "g-nv", 1, ""))
	narrowed := e.mustSubmit("nv-2", rvIntent("acct-nv", "chan-1", "g-nv", 1, ""))
	v2 := rvGrant(testBot, "acct-nv", "chan-1", "chan-2")
	v2["expectedVersion"] = 1
	if g := e.rvPutGrant("g-nv", v2, http.StatusOK); g.Version != 2 {
		t.Fatalf("v2: %+v", g)
	}
	// A write against a stale version is refused.
	if r := e.do("PUT", "/v1/admin/grants/g-nv", opToken, nil, rvJSON(v2)); r.status != http.StatusConflict || r.errorCode() != "version_conflict" {
		t.Fatalf("stale write: %d %s", r.status, r.body)
	}
	e.rvDeliver(keep)
	in := e.waitStatus(keep, 10*time.Second, core.StatusSucceeded)
	if c := lastChecks(t, in); c.GrantVersion != 2 || c.Result != core.CheckOK {
		t.Fatalf("checks %+v", c)
	}
	e.assertEffectsStay(keep, 1, 200*time.Millisecond)
	// Version 3 no longer covers chan-1: the intent accepted under version 1 is blocked.
	e.rvPutGrant("g-nv", rvGrant(testBot, "acct-nv", "chan-2"), http.StatusOK)
	e.rvDeliver(narrowed)
	in = e.waitStatus(narrowed, 10*time.Second, core.StatusGrantRevoked)
	if c := lastChecks(t, in); c.GrantVersion != 3 || !strings.Contains(c.Reason, `does not cover target "chan-1"`) {
		t.Fatalf("checks %+v", c)
	}
	e.assertEffectsStay(narrowed, 0, 200*time.Millisecond)
}

func TestRevalidateSourceRevisedBetweenFailedAttemptAndRetry(t *testing.T) {
	t.Parallel()
	// A 3 s backoff leaves room to revise the source between the attempts.
	e := newEnv(t, options{Config: wire.Config{Policy: core.AttemptPolicy{Backoff: core.BackoffPolicy{Base: 3 * time.Second, Cap: 3 * time.Second, MaxAttempts: 3, MaxAge: time.Hour}}}})
	e.faults(`{"account":"acct-src","faults":[{"kind":"unavailable"}]}`)
	if st, res := e.rvPutSource(botToken, "msg-1", `{"revision":1}`); st != 200 || !res.Applied || res.Revision != 1 {
		t.Fatalf("source rev 1: %d %+v", st, res)
	}
	id := e.mustSubmit("src-1", rvIntent("acct-src", "chan-1", "g-1", 1, `{"id":"msg-1","revision":1}`))
	in := e.waitStatus(id, 10*time.Second, core.StatusRetryableFailure)
	if c := lastChecks(t, in); c.Result != core.CheckOK || c.SourceRevision != 1 {
		t.Fatalf("first attempt checks %+v", c)
	}
	before := e.effectsFor(id) // what the attempts before the retry did
	// The user edits the message before the retry is due.
	if st, res := e.rvPutSource(botToken, "msg-1", `{"revision":2}`); st != 200 || !res.Applied || res.Revision != 2 {
		t.Fatalf("source rev 2: %d %+v", st, res)
	}
	in = e.waitStatus(id, 15*time.Second, core.StatusSourceRevised)
	if len(in.Attempts) != 2 || in.Attempts[1].Trigger != "retry" {
		t.Fatalf("want the queue's retry to be the blocked attempt: %s", trail(in))
	}
	if c := lastChecks(t, in); c.Result != string(core.StatusSourceRevised) || c.SourceRevision != 2 || !strings.Contains(c.Reason, "revision 2") {
		t.Fatalf("retry checks %+v", c)
	}
	e.assertEffectsStay(id, before, 500*time.Millisecond)
	if before != 0 {
		t.Fatalf("the failed attempt (503, not committed) made %d effects", before)
	}
}

func TestRevalidateHumanRetryRefusedAfterGrantExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	// Long enough for the first attempt to reach needs-human before the
	// grant expires on a loaded machine (3 s was seen to be too short).
	expiresAt := time.Now().Add(8 * time.Second)
	g := rvGrant(testBot, "acct-nh", "*")
	g["expiresAt"] = expiresAt.UTC().Format(time.RFC3339Nano)
	e.rvPutGrant("g-short", g, http.StatusCreated)
	// Neither idempotency keys nor lookup, and the response is dropped after
	// the commit: one effect, then a human must decide.
	e.faults(`{"account":"acct-nh","capabilities":{"idempotencyKeys":false,"lookup":false},"faults":[{"kind":"drop_after_commit"}]}`)
	id := e.mustSubmit("nh-1", rvIntent("acct-nh", "chan-1", "g-short", 1, ""))
	e.waitStatus(id, 10*time.Second, core.StatusNeedsHuman)
	if n := e.effectsFor(id); n != 1 {
		t.Fatalf("effects before the decision = %d, want 1", n)
	}
	e.waitUntil(expiresAt.Add(200 * time.Millisecond))

	r := e.do("POST", "/v1/admin/intents/"+id+"/resolution", opToken, map[string]string{"Idempotency-Key": "d-1"},
		`{"decision":"retry","reason":"the customer says nothing arrived"}`)
	if r.status != http.StatusConflict || r.errorCode() != "refused_by_revalidation" || !strings.Contains(string(r.body), `grant \"g-short\" expired at`) {
		t.Fatalf("retry after expiry: %d %s", r.status, r.body)
	}
	e.assertEffectsStay(id, 1, 800*time.Millisecond)
	in := e.intent(id)
	if in.Status != core.StatusNeedsHuman || len(in.Resolutions) != 0 || in.AttemptCount != 1 {
		t.Fatalf("the refusal changed the intent: %s", trail(in))
	}
	// The operator can still close it.
	if r := e.do("POST", "/v1/admin/intents/"+id+"/resolution", opToken, nil, `{"decision":"accept-success","reason":"the customer found it"}`); r.status != 200 {
		t.Fatalf("accept-success: %d %s", r.status, r.body)
	}
}

func TestRevalidateCapabilityWithdrawnThenRestored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	capPath := "/v1/admin/capabilities/sandbox/acct-cap"
	if r := e.do("PUT", capPath, orchToken, nil, `{"withdrawn":true,"reason":"x"}`); r.status != http.StatusForbidden {
		t.Fatalf("orchestrator: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", capPath, opToken, nil, `{"withdrawn":true,"reason":"provider maintenance"}`); r.status != 200 {
		t.Fatalf("withdraw: %d %s", r.status, r.body)
	}
	var blocked []string
	for i := 0; i < 3; i++ {
		blocked = append(blocked, e.mustSubmit(fmt.Sprintf("cap-%d", i), intentBody("acct-cap", "chan-1", "hi")))
	}
	for _, id := range blocked {
		in := e.waitStatus(id, 10*time.Second, core.StatusGrantRevoked)
		if c := lastChecks(t, in); !strings.Contains(c.Reason, "provider maintenance") || !strings.Contains(in.StatusReason, "capability withdrawn") {
			t.Fatalf("reason %q / %+v", in.StatusReason, c)
		}
	}
	r := e.do("PUT", capPath, opToken, nil, `{"withdrawn":false,"reason":"maintenance over"}`)
	var c core.Capability
	r.json(t, &c)
	if r.status != 200 || c.AccountWithdrawal != nil || c.Version != 2 {
		t.Fatalf("restore: %d %s", r.status, r.body)
	}
	fresh := e.mustSubmit("cap-new", intentBody("acct-cap", "chan-1", "hi"))
	e.waitStatus(fresh, 10*time.Second, core.StatusSucceeded)
	e.sweep() // nothing brings the blocked ones back
	e.assertEffectsStay(fresh, 1, 300*time.Millisecond)
	for _, id := range blocked {
		if in := e.intent(id); in.Status != core.StatusGrantRevoked || e.effectsFor(id) != 0 {
			t.Fatalf("blocked intent %s is now %s", id, in.Status)
		}
	}

	// Withdrawing one action leaves the others.
	if r := e.do("PUT", "/v1/admin/capabilities/sandbox/acct-act", opToken, nil, `{"withdrawn":true,"actions":["send_message"],"reason":"compliance hold"}`); r.status != 200 {
		t.Fatalf("withdraw action: %d %s", r.status, r.body)
	}
	msg := e.mustSubmit("act-1", intentBody("acct-act", "chan-1", "hi"))
	booking := e.mustSubmit("act-2", strings.Replace(intentBody("acct-act", "chan-1", "hi"), testAction, "create_booking", 1))
	in := e.waitStatus(msg, 10*time.Second, core.StatusGrantRevoked)
	if !strings.Contains(in.StatusReason, "compliance hold") {
		t.Fatalf("reason %q", in.StatusReason)
	}
	e.waitStatus(booking, 10*time.Second, core.StatusSucceeded)
	var state core.Capability
	e.do("GET", "/v1/admin/capabilities/sandbox/acct-act", opToken, nil, "").json(t, &state)
	if _, ok := state.Actions[testAction]; !ok || state.AccountWithdrawal != nil {
		t.Fatalf("state %+v", state)
	}
	e.assertEffectsStay(msg, 0, 200*time.Millisecond)
}

func TestRevalidateOutOfOrderSourceUpdatesLeaveTheHighestRevision(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{DisableStream: true})
	if st, res := e.rvPutSource(botToken, "thread-9", `{"revision":5}`); st != 200 || !res.Applied || res.Revision != 5 {
		t.Fatalf("rev 5: %d %+v", st, res)
	}
	if st, res := e.rvPutSource(botToken, "thread-9", `{"revision":3}`); st != 200 || res.Applied || res.Revision != 5 {
		t.Fatalf("an older revision must answer 200 with the current state: %d %+v", st, res)
	}
	// Shuffled and concurrent.
	revs := rand.Perm(20)
	var wg sync.WaitGroup
	for _, r := range revs {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			req, _ := http.NewRequest("PUT", e.api.URL+"/v1/sources/thread-9", strings.NewReader(fmt.Sprintf(`{"revision":%d}`, r+6)))
			req.Header.Set("Authorization", "Bearer "+botToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("rev %d: %d", r+6, resp.StatusCode)
			}
		}(r)
	}
	wg.Wait()
	if st, res := e.rvPutSource(botToken, "thread-9", `{"revision":0}`); st != 200 || res.Revision != 25 || res.Deleted {
		t.Fatalf("after shuffled updates: %d %+v, want revision 25", st, res)
	}
	// Sources are per bot, and only bots report them.
	if st, res := e.rvPutSource(bot2Token, "thread-9", `{"revision":1}`); st != 200 || res.Revision != 1 {
		t.Fatalf("bot-2's own thread-9: %d %+v", st, res)
	}
	if r := e.do("PUT", "/v1/sources/thread-9", opToken, nil, `{"revision":99}`); r.status != http.StatusForbidden {
		t.Fatalf("operator: %d %s", r.status, r.body)
	}
	for _, bad := range []string{`{"revision":-1}`, `{}`, `{"revision":"7"}`, `{"revision":7,"x":1}`, `not json`} {
		if r := e.do("PUT", "/v1/sources/thread-9", botToken, nil, bad); r.status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", bad, r.status, r.body)
		}
	}
	// The registry decides delivery: an intent answering revision 24 is stale,
	// one answering 25 goes out.
	stale := e.mustSubmit("src-24", rvIntent("acct-ooo", "chan-1", "g-1", 1, `{"id":"thread-9","revision":24}`))
	current := e.mustSubmit("src-25", rvIntent("acct-ooo", "chan-1", "g-1", 1, `{"id":"thread-9","revision":25}`))
	e.rvDeliver(stale)
	e.rvDeliver(current)
	in := e.waitStatus(stale, 10*time.Second, core.StatusSourceRevised)
	if c := lastChecks(t, in); c.SourceRevision != 25 {
		t.Fatalf("checks %+v", c)
	}
	e.waitStatus(current, 10*time.Second, core.StatusSucceeded)
	e.assertEffectsStay(stale, 0, 200*time.Millisecond)
	if e.effectsFor(current) != 1 {
		t.Fatalf("current intent not delivered once")
	}
	// A deletion, even reported with an old revision, blocks what is still pending.
	pending := e.mustSubmit("src-del", rvIntent("acct-ooo", "chan-1", "g-1", 1, `{"id":"thread-9","revision":25}`))
	if st, res := e.rvPutSource(botToken, "thread-9", `{"revision":2,"deleted":true}`); st != 200 || !res.Deleted || res.Revision != 25 || !res.Applied {
		t.Fatalf("delete: %d %+v", st, res)
	}
	e.rvDeliver(pending)
	in = e.waitStatus(pending, 10*time.Second, core.StatusSourceRevised)
	if !strings.Contains(in.StatusReason, "deleted") {
		t.Fatalf("reason %q", in.StatusReason)
	}
	e.assertEffectsStay(pending, 0, 200*time.Millisecond)
}
