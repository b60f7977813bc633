package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/system"
)

// Issue 24, finding 2: accepted work is never refused on replay. Each test
// fails on main, where the replay got the refusal a new request would get.

// expectReplay submits body under key and requires 200 Idempotent-Replayed
// with the stored intent id.
func (e *env) expectReplay(key, body, id string) {
	e.t.Helper()
	r := e.submit(botToken, key, body)
	var in core.Intent
	r.json(e.t, &in)
	if r.status != http.StatusOK || r.headers.Get("Idempotent-Replayed") != "true" || in.ID != id {
		e.t.Fatalf("replay of %s: %d %s, want 200 Idempotent-Replayed", key, r.status, r.body)
	}
}

// expectRefused submits body under key and requires the refusal status
// and error code; what names the case in the failure.
func (e *env) expectRefused(what, key, body string, status int, code string) {
	e.t.Helper()
	if r := e.submit(botToken, key, body); r.status != status || r.errorCode() != code {
		e.t.Fatalf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
	}
}

func TestReplayAfterDeadlinePassedIsReplayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	// Long enough for a loaded host to deliver it first (at 3 s, cut to the
	// second by RFC 3339, two make test runs of 2026-12-03 expired it).
	deadline := time.Now().Add(6 * time.Second).UTC()
	body := strings.Replace(intentBody("acct-rd", "chan-1", "before the deadline"), `"grant"`,
		`"deadline":"`+deadline.Format(time.RFC3339)+`","grant"`, 1)
	id := e.mustSubmit("rd-1", body)
	e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	e.waitUntil(deadline.Add(time.Second))
	e.expectReplay("rd-1", body, id)
	// A new key with the same (now past) deadline is refused, as before.
	e.expectRefused("new key, past deadline", "rd-2", body, http.StatusUnprocessableEntity, "deadline_passed")
	// A different body under the replayed key is still a reuse.
	other := strings.Replace(body, "before the deadline", "something else", 1)
	e.expectRefused("different body", "rd-1", other, http.StatusUnprocessableEntity, "idempotency_key_reused")
	if n := e.effectsFor(id); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}

// TestReplayAfterProviderRemovedIsReplayed: a second system over the same
// table, configured without the sandbox provider (a redeploy that removed
// it), answers the stored intent's replay 200 and refuses only new keys.
func TestReplayAfterProviderRemovedIsReplayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	body := intentBody("acct-rp", "chan-1", "provider later removed")
	id := e.mustSubmit("rp-1", body)
	e.waitStatus(id, 10*time.Second, core.StatusSucceeded)

	ctx := context.Background()
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := system.Start(ctx, awsconfig.New(cfg), system.Options{
		Config: wire.Config{
			Table: e.table, ProviderConfig: `{}`,
			Owner: randName("worker-"), MetricsOut: io.Discard,
		},
		QueuePrefix:   e.prefix,
		DisableStream: true, DisableQueue: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	api, contract := serveChecked(t, st)
	without := &env{t: t, st: st, api: api, table: e.table, prefix: e.prefix, contract: contract}

	without.expectReplay("rp-1", body, id)
	without.expectRefused("new key, removed provider", "rp-2", body, http.StatusUnprocessableEntity, "unknown_provider")
	other := strings.Replace(body, "provider later removed", "other", 1)
	without.expectRefused("different body", "rp-1", other, http.StatusUnprocessableEntity, "idempotency_key_reused")
}

func TestReplayAfterGrantRevokedIsReplayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	body := intentBody("acct-rg", "chan-1", "grant later revoked")
	id := e.mustSubmit("rg-1", body)
	e.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	if r := e.do("POST", "/v1/admin/grants/g-1/revoke", opToken, nil, `{"reason":"consent withdrawn"}`); r.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	e.expectReplay("rg-1", body, id)
	e.expectRefused("new key, revoked grant", "rg-2", body, http.StatusForbidden, "grant_does_not_cover")
	if n := e.effectsFor(id); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}
