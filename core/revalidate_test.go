package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/registry"
	"github.com/botharness/outbox/core/resolve"
)

// rvRig is the dispatcher rig with revalidation wired as production wires it.
type rvRig struct {
	*core.Rig
	reg  *core.MemRegistry
	rv   *core.Revalidation
	auth *registry.Authority
	res  *resolve.Resolver
	src  *registry.Sources
}

var rvOperator = core.Principal{Kind: core.PrincipalOperator, Name: "op-ann"}

func newRVRig(t *testing.T, caps core.Capabilities, script ...error) *rvRig {
	t.Helper()
	r := core.NewRig(caps, script...)
	reg := core.NewMemRegistryForContract()
	rv := &core.Revalidation{Facts: reg, Grants: reg, Clock: r.Clock}
	r.D.Revalidator = rv
	r.In.Grants = rv
	provs := core.ProviderMap{"fake": r.Prov}
	x := &rvRig{Rig: r, reg: reg, rv: rv,
		auth: &registry.Authority{Grants: reg, Capabilities: reg, Providers: provs, Clock: r.Clock},
		res:  &resolve.Resolver{Store: r.D.Store, Reconcile: r.D, Clock: r.D.Clock, Gate: rv},
		src:  &registry.Sources{Store: reg, Clock: r.Clock},
	}
	x.putGrant(t, "g1", registry.GrantSpec{Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"c*"}})
	return x
}

func (x *rvRig) putGrant(t *testing.T, id string, req registry.GrantSpec) *core.Grant {
	t.Helper()
	g, _, err := x.auth.PutGrant(context.Background(), rvOperator, id, req)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (x *rvRig) submitBody(t *testing.T, key, b string) *core.Intent {
	t.Helper()
	res, err := x.In.Submit(context.Background(), "bot1", key, []byte(b))
	if err != nil {
		t.Fatal(err)
	}
	return res.Intent
}

func (x *rvRig) attempt(t *testing.T, id string) *core.Intent {
	t.Helper()
	if _, err := x.D.Attempt(context.Background(), core.AttemptRequest{ID: id, Trigger: core.TriggerStream}); err != nil {
		t.Fatal(err)
	}
	return x.Get(t, id)
}

func rvBody(target string, source string) string {
	b := fmt.Sprintf(`{"kind":"reply","provider":"fake","account":"a1","action":"send","target":%q,"payload":{"text":"hi"},"grant":{"id":"g1","version":1}`, target)
	if source != "" {
		b += `,"source":` + source
	}
	return b + "}"
}

func rvRev(n int64) *int64 { return &n }

func TestRevalidateMatchScope(t *testing.T) {
	for _, c := range []struct {
		p, v string
		want bool
	}{
		{"*", "anything", true}, {"*", "", true}, {"chan-*", "chan-1", true}, {"chan-*", "chan-", true},
		{"chan-*", "chat-1", false}, {"chan-1", "chan-1", true}, {"chan-1", "chan-12", false}, {"", "x", false},
	} {
		if got := core.MatchScope(c.p, c.v); got != c.want {
			t.Errorf("MatchScope(%q, %q) = %v", c.p, c.v, got)
		}
	}
}

func TestRevalidateEvaluate(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	base := core.Grant{ID: "g1", Version: 1, Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"c*"}}
	in := &core.Intent{ID: "i1", Bot: "bot1", Provider: "fake", Account: "a1", Action: "send", Target: "c1",
		Grant: core.GrantRef{ID: "g1", Version: 1}, Source: &core.SourceRef{ID: "m1", Revision: 3}}
	with := func(f func(g *core.Grant)) *core.Grant { g := base; f(&g); return &g }
	cases := []struct {
		name   string
		f      core.RevalidationFacts
		status core.Status // "" = not blocked
		reason string
	}{
		{"current", core.RevalidationFacts{Grant: &base}, "", ""},
		{"newer version still covers", core.RevalidationFacts{Grant: with(func(g *core.Grant) { g.Version = 4; g.Targets = []string{"c1", "d*"} })}, "", ""},
		{"unexpired", core.RevalidationFacts{Grant: with(func(g *core.Grant) { g.ExpiresAt = &future })}, "", ""},
		{"missing", core.RevalidationFacts{}, core.StatusGrantRevoked, "no longer exists"},
		{"other bot", core.RevalidationFacts{Grant: with(func(g *core.Grant) { g.Bot = "bot2" })}, core.StatusGrantRevoked, "not issued to bot"},
		{"version went back", core.RevalidationFacts{Grant: with(func(g *core.Grant) { g.Version = 0 })}, core.StatusGrantRevoked, "older than version 1"},
		{"revoked", core.RevalidationFacts{Grant: with(func(g *core.Grant) { g.RevokedAt, g.RevokedBy, g.RevokeReason = &past, "op-ann", "leak" })}, core.StatusGrantRevoked, "revoked at 2026-03-02T08:59:59Z by op-ann: leak"},
		{"expired", core.RevalidationFacts{Grant: with(func(g *core.Grant) { g.ExpiresAt = &now })}, core.StatusGrantRevoked, "expired at"},
		{"provider", core.RevalidationFacts{Grant: with(func(g *core.Grant) { g.Provider = "other" })}, core.StatusGrantRevoked, "provider"},
		{"account", core.RevalidationFacts{Grant: with(func(g *core.Grant) { g.Account = "a2" })}, core.StatusGrantRevoked, `account "a1"`},
		{"action", core.RevalidationFacts{Grant: with(func(g *core.Grant) { g.Actions = []string{"charge"} })}, core.StatusGrantRevoked, `action "send"`},
		{"target", core.RevalidationFacts{Grant: with(func(g *core.Grant) { g.Version = 2; g.Targets = []string{"d*"} })}, core.StatusGrantRevoked, `(version 2) does not cover target "c1"`},
		{"account withdrawn", core.RevalidationFacts{Grant: &base, Capability: &core.Capability{Provider: "fake", Account: "a1", AccountWithdrawal: &core.Withdrawal{Reason: "maintenance", By: "op", At: past}}}, core.StatusGrantRevoked, "capability withdrawn for fake account \"a1\""},
		{"action withdrawn", core.RevalidationFacts{Grant: &base, Capability: &core.Capability{Provider: "fake", Account: "a1", Actions: map[string]core.Withdrawal{"send": {Reason: "compliance"}}}}, core.StatusGrantRevoked, "compliance"},
		{"other action withdrawn", core.RevalidationFacts{Grant: &base, Capability: &core.Capability{Actions: map[string]core.Withdrawal{"charge": {Reason: "x"}}}}, "", ""},
		{"source same", core.RevalidationFacts{Grant: &base, Source: &core.SourceState{Revision: 3}}, "", ""},
		{"source behind", core.RevalidationFacts{Grant: &base, Source: &core.SourceState{Revision: 2}}, "", ""},
		{"source revised", core.RevalidationFacts{Grant: &base, Source: &core.SourceState{Revision: 4}}, core.StatusSourceRevised, "revision 4; the intent answers revision 3"},
		{"source deleted", core.RevalidationFacts{Grant: &base, Source: &core.SourceState{Revision: 3, Deleted: true}}, core.StatusSourceRevised, "deleted"},
		{"revoked wins over revised", core.RevalidationFacts{Source: &core.SourceState{Revision: 9}}, core.StatusGrantRevoked, "no longer exists"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checks, b := core.Evaluate(in, c.f, now)
			if c.status == "" {
				if b != nil || checks.Result != core.CheckOK {
					t.Fatalf("blocked: %+v %+v", b, checks)
				}
				return
			}
			if b == nil || b.Status != c.status || !strings.Contains(b.Reason, c.reason) {
				t.Fatalf("got %+v, want %s containing %q", b, c.status, c.reason)
			}
			if checks.Result != string(c.status) || checks.Reason != b.Reason {
				t.Fatalf("checks %+v", checks)
			}
			if c.f.Grant != nil && checks.GrantVersion != c.f.Grant.Version || c.f.Source != nil && checks.SourceRevision != c.f.Source.Revision {
				t.Fatalf("checks did not record what was seen: %+v", checks)
			}
		})
	}
}

func TestRevalidateIntakeRefusesWhatTheGrantDoesNotCover(t *testing.T) {
	x := newRVRig(t, core.Capabilities{})
	past := x.Clock.Now().Add(-time.Minute)
	x.putGrant(t, "g-other-bot", registry.GrantSpec{Bot: "bot2", Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"*"}})
	x.putGrant(t, "g-expired", registry.GrantSpec{Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"*"}, ExpiresAt: &past})
	x.putGrant(t, "g-revoked", registry.GrantSpec{Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"*"}})
	if _, err := x.auth.RevokeGrant(context.Background(), rvOperator, "g-revoked", registry.Revocation{Reason: "compromised"}); err != nil {
		t.Fatal(err)
	}
	x.putGrant(t, "g-other-account", registry.GrantSpec{Bot: "bot1", Provider: "fake", Account: "a2", Actions: []string{"send"}, Targets: []string{"*"}})
	with := func(grant, target string) string {
		return strings.Replace(rvBody(target, ""), `"id":"g1","version":1`, grant, 1)
	}
	for _, c := range []struct{ name, body, reason string }{
		{"missing", with(`"id":"nope","version":1`, "c1"), "does not exist or is not issued"},
		{"other bot", with(`"id":"g-other-bot","version":1`, "c1"), "does not exist or is not issued"},
		{"other account", with(`"id":"g-other-account","version":1`, "c1"), `account "a1"`},
		{"target", rvBody("x1", ""), `target "x1"`},
		{"expired", with(`"id":"g-expired","version":1`, "c1"), "expired"},
		{"revoked", with(`"id":"g-revoked","version":2`, "c1"), "revoked"},
		{"version newer than stored", with(`"id":"g1","version":2`, "c1"), "at version 1; the intent names version 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := x.In.Submit(context.Background(), "bot1", "k-"+c.name, []byte(c.body))
			if !errors.Is(err, core.ErrGrantDoesNotCover) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("err = %v, want grant_does_not_cover with %q", err, c.reason)
			}
		})
	}
	if x.Store.Puts() != 0 {
		t.Fatalf("refused intents wrote %d items", x.Store.Puts())
	}
}

func TestRevalidateReplayAfterRevocationGetsStoredIntent(t *testing.T) {
	x := newRVRig(t, core.Capabilities{})
	first := x.submitBody(t, "k1", rvBody("c1", ""))
	if _, err := x.auth.RevokeGrant(context.Background(), rvOperator, "g1", registry.Revocation{Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	res, err := x.In.Submit(context.Background(), "bot1", "k1", []byte(rvBody("c1", "")))
	if err != nil || !res.Replayed || res.Intent.ID != first.ID {
		t.Fatalf("replay: %+v %v", res, err)
	}
	// A new intent under the revoked grant is refused.
	if _, err := x.In.Submit(context.Background(), "bot1", "k2", []byte(rvBody("c1", ""))); !errors.Is(err, core.ErrGrantDoesNotCover) {
		t.Fatalf("new intent: %v", err)
	}
}

func TestRevalidateRevokedBeforeAttemptSendsNothing(t *testing.T) {
	x := newRVRig(t, core.Capabilities{})
	in := x.submitBody(t, "k1", rvBody("c1", ""))
	if _, err := x.auth.RevokeGrant(context.Background(), rvOperator, "g1", registry.Revocation{Reason: "user withdrew consent"}); err != nil {
		t.Fatal(err)
	}
	got := x.attempt(t, in.ID)
	if got.Status != core.StatusGrantRevoked || x.Prov.Sends() != 0 {
		t.Fatalf("status %s, sends %d", got.Status, x.Prov.Sends())
	}
	a := got.Attempts[0]
	if a.Result != core.AttemptResult(core.StatusGrantRevoked) || a.Checks == nil || a.Checks.GrantVersion != 2 || !strings.Contains(a.Checks.Reason, "user withdrew consent") || !strings.Contains(got.StatusReason, "revoked") {
		t.Fatalf("attempt %+v checks %+v reason %q", a, a.Checks, got.StatusReason)
	}
	if x.reg.Reads() != 1 {
		t.Fatalf("revalidation reads = %d, want 1 per attempt", x.reg.Reads())
	}
}

func TestRevalidateNewerGrantVersionThatCoversDoesNotRevoke(t *testing.T) {
	x := newRVRig(t, core.Capabilities{})
	in := x.submitBody(t, "k1", rvBody("c1", ""))
	x.putGrant(t, "g1", registry.GrantSpec{Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send", "*"}, Targets: []string{"c1"}})
	got := x.attempt(t, in.ID)
	if got.Status != core.StatusSucceeded || got.Attempts[0].Checks.GrantVersion != 2 || got.Attempts[0].Checks.Result != core.CheckOK {
		t.Fatalf("%s %+v", got.Status, got.Attempts[0].Checks)
	}
}

func TestRevalidateSourceRevisedBeforeRetry(t *testing.T) {
	x := newRVRig(t, core.Capabilities{}, &core.RetryableError{Class: core.ClassTransient, Err: errors.New("503")})
	in := x.submitBody(t, "k1", rvBody("c1", `{"id":"msg-1","revision":1}`))
	bot := core.Principal{Kind: core.PrincipalBot, Name: "bot1"}
	if _, err := x.src.Put(context.Background(), bot, "msg-1", registry.SourceUpdate{Revision: rvRev(1)}); err != nil {
		t.Fatal(err)
	}
	if got := x.attempt(t, in.ID); got.Status != core.StatusRetryableFailure || got.Attempts[0].Checks.SourceRevision != 1 {
		t.Fatalf("first attempt: %s %+v", got.Status, got.Attempts[0].Checks)
	}
	// The user edits the message; another bot's source of the same id does not matter.
	if _, err := x.src.Put(context.Background(), core.Principal{Kind: core.PrincipalBot, Name: "bot2"}, "msg-1", registry.SourceUpdate{Revision: rvRev(7)}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.src.Put(context.Background(), bot, "msg-1", registry.SourceUpdate{Revision: rvRev(2)}); err != nil {
		t.Fatal(err)
	}
	x.Drain(t)
	got := x.Get(t, in.ID)
	if got.Status != core.StatusSourceRevised || x.Prov.Sends() != 1 || len(got.Attempts) != 2 {
		t.Fatalf("status %s sends %d attempts %d", got.Status, x.Prov.Sends(), len(got.Attempts))
	}
	if c := got.Attempts[1].Checks; c.SourceRevision != 2 || c.Result != string(core.StatusSourceRevised) || got.Attempts[1].Trigger != "retry" {
		t.Fatalf("retry checks %+v", c)
	}
}

func TestRevalidateHumanRetryRefusedWhenGrantExpired(t *testing.T) {
	x := newRVRig(t, core.Capabilities{}, &core.UnknownOutcomeError{Err: errors.New("reset")})
	exp := x.Clock.Now().Add(time.Hour)
	x.putGrant(t, "g1", registry.GrantSpec{Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"*"}, ExpiresAt: &exp})
	in := x.submitBody(t, "k1", rvBody("c1", ""))
	if got := x.attempt(t, in.ID); got.Status != core.StatusNeedsHuman {
		t.Fatalf("status %s", got.Status)
	}
	x.Clock.Advance(2 * time.Hour)
	_, err := x.res.Resolve(context.Background(), rvOperator, in.ID, "", core.Ruling{Decision: core.DecisionRetry, Reason: "customer asked"})
	var re *resolve.RefusedError
	if !errors.As(err, &re) || re.Status != core.StatusGrantRevoked || !strings.Contains(re.Reason, "expired") {
		t.Fatalf("err = %v", err)
	}
	got := x.Get(t, in.ID)
	if got.Status != core.StatusNeedsHuman || len(got.Resolutions) != 0 || x.Prov.Sends() != 1 {
		t.Fatalf("refusal changed the intent: %s resolutions=%d sends=%d", got.Status, len(got.Resolutions), x.Prov.Sends())
	}
	// Abandon is still possible.
	if _, err := x.res.Resolve(context.Background(), rvOperator, in.ID, "", core.Ruling{Decision: core.DecisionAbandon, Reason: "grant expired"}); err != nil {
		t.Fatal(err)
	}
}

func TestRevalidateCapabilityWithdrawnThenRestored(t *testing.T) {
	x := newRVRig(t, core.Capabilities{})
	ctx := context.Background()
	yes, no := true, false
	if _, err := x.auth.SetCapability(ctx, rvOperator, "fake", "a1", registry.CapabilityChange{Withdrawn: &yes, Reason: "maintenance window"}); err != nil {
		t.Fatal(err)
	}
	blocked := x.submitBody(t, "k1", rvBody("c1", ""))
	if got := x.attempt(t, blocked.ID); got.Status != core.StatusGrantRevoked || !strings.Contains(got.StatusReason, "maintenance window") {
		t.Fatalf("%s %q", got.Status, got.StatusReason)
	}
	c, err := x.auth.SetCapability(ctx, rvOperator, "fake", "a1", registry.CapabilityChange{Withdrawn: &no, Reason: "maintenance over"})
	if err != nil || c.AccountWithdrawal != nil || c.Version != 2 {
		t.Fatalf("restore: %+v %v", c, err)
	}
	fresh := x.submitBody(t, "k2", rvBody("c1", ""))
	if got := x.attempt(t, fresh.ID); got.Status != core.StatusSucceeded {
		t.Fatalf("new intent after restore: %s", got.Status)
	}
	if got := x.attempt(t, blocked.ID); got.Status != core.StatusGrantRevoked || x.Prov.Sends() != 1 {
		t.Fatalf("blocked intent moved: %s sends %d", got.Status, x.Prov.Sends())
	}
	// Per-action withdrawal.
	if _, err := x.auth.SetCapability(ctx, rvOperator, "fake", "a1", registry.CapabilityChange{Withdrawn: &yes, Actions: []string{"send"}, Reason: "compliance"}); err != nil {
		t.Fatal(err)
	}
	third := x.submitBody(t, "k3", rvBody("c1", ""))
	if got := x.attempt(t, third.ID); got.Status != core.StatusGrantRevoked || !strings.Contains(got.StatusReason, `action "send"`) {
		t.Fatalf("%s %q", got.Status, got.StatusReason)
	}
	if _, err := x.auth.SetCapability(ctx, rvOperator, "fake", "a1", registry.CapabilityChange{Withdrawn: &yes, Actions: []string{"teleport"}, Reason: "x"}); err == nil {
		t.Fatal("unknown action accepted")
	}
}

func TestRevalidateErrorIsRetryableNotASend(t *testing.T) {
	x := newRVRig(t, core.Capabilities{})
	in := x.submitBody(t, "k1", rvBody("c1", ""))
	x.reg.SetFail(errors.New("throttled"))
	got := x.attempt(t, in.ID)
	if got.Status != core.StatusRetryableFailure || x.Prov.Sends() != 0 {
		t.Fatalf("%s sends %d", got.Status, x.Prov.Sends())
	}
	x.reg.SetFail(nil)
	x.Drain(t)
	if got := x.Get(t, in.ID); got.Status != core.StatusSucceeded || x.Prov.Sends() != 1 {
		t.Fatalf("%s sends %d", got.Status, x.Prov.Sends())
	}
}

func TestRevalidateAuthorityGrants(t *testing.T) {
	x := newRVRig(t, core.Capabilities{})
	ctx := context.Background()
	req := registry.GrantSpec{Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"c1"}}
	for _, p := range []core.Principal{{Kind: core.PrincipalOrchestrator, Name: "o"}, {Kind: core.PrincipalBot, Name: "bot1"}} {
		if _, _, err := x.auth.PutGrant(ctx, p, "g2", req); !errors.Is(err, core.ErrForbidden) {
			t.Fatalf("%s: %v", p.Kind, err)
		}
		if _, err := x.auth.RevokeGrant(ctx, p, "g1", registry.Revocation{Reason: "x"}); !errors.Is(err, core.ErrForbidden) {
			t.Fatalf("%s revoke: %v", p.Kind, err)
		}
		if _, err := x.auth.GetGrant(ctx, p, "g1"); !errors.Is(err, core.ErrForbidden) {
			t.Fatalf("%s get: %v", p.Kind, err)
		}
	}
	g, created, err := x.auth.PutGrant(ctx, rvOperator, "g2", req)
	if err != nil || !created || g.Version != 1 {
		t.Fatalf("%+v %v %v", g, created, err)
	}
	g, created, err = x.auth.PutGrant(ctx, rvOperator, "g2", req)
	if err != nil || created || g.Version != 1 {
		t.Fatalf("an unchanged PUT must keep the version: %+v %v %v", g, created, err)
	}
	req.Targets = []string{"c1", "c2"}
	g, created, err = x.auth.PutGrant(ctx, rvOperator, "g2", req)
	if err != nil || created || g.Version != 2 {
		t.Fatalf("%+v %v %v", g, created, err)
	}
	req.Targets = []string{"c1"}
	stale := int64(1)
	if _, _, err := x.auth.PutGrant(ctx, rvOperator, "g2", registry.GrantSpec{Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"c1"}, ExpectedVersion: &stale}); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("stale expected version: %v", err)
	}
	for name, bad := range map[string]registry.GrantSpec{
		"no targets":       {Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send"}},
		"star in middle":   {Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"c*1"}},
		"unknown provider": {Bot: "bot1", Provider: "nope", Account: "a1", Actions: []string{"send"}, Targets: []string{"c1"}},
		"unknown action":   {Bot: "bot1", Provider: "fake", Account: "a1", Actions: []string{"teleport"}, Targets: []string{"c1"}},
		"no bot":           {Provider: "fake", Account: "a1", Actions: []string{"send"}, Targets: []string{"c1"}},
	} {
		var ve *core.ValidationError
		if _, _, err := x.auth.PutGrant(ctx, rvOperator, "g3", bad); !errors.As(err, &ve) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var ve *core.ValidationError
	if _, _, err := x.auth.PutGrant(ctx, rvOperator, "bad#id", req); !errors.As(err, &ve) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := x.auth.RevokeGrant(ctx, rvOperator, "g2", registry.Revocation{}); !errors.As(err, &ve) {
		t.Fatalf("revoke without reason: %v", err)
	}
	r1, err := x.auth.RevokeGrant(ctx, rvOperator, "g2", registry.Revocation{Reason: "done"})
	if err != nil || r1.Version != 3 || r1.RevokedAt == nil {
		t.Fatalf("%+v %v", r1, err)
	}
	if r2, err := x.auth.RevokeGrant(ctx, rvOperator, "g2", registry.Revocation{Reason: "again"}); err != nil || r2.Version != 3 || r2.RevokeReason != "done" {
		t.Fatalf("second revoke changed it: %+v %v", r2, err)
	}
	if _, _, err := x.auth.PutGrant(ctx, rvOperator, "g2", req); !errors.Is(err, core.ErrGrantRevoked) {
		t.Fatalf("replacing a revoked grant: %v", err)
	}
}

func TestRevalidateSourcesPut(t *testing.T) {
	x := newRVRig(t, core.Capabilities{})
	ctx := context.Background()
	bot := core.Principal{Kind: core.PrincipalBot, Name: "bot1"}
	if _, err := x.src.Put(ctx, rvOperator, "m1", registry.SourceUpdate{Revision: rvRev(1)}); !errors.Is(err, core.ErrForbidden) {
		t.Fatalf("operator: %v", err)
	}
	var ve *core.ValidationError
	for _, u := range []registry.SourceUpdate{{}, {Revision: rvRev(-1)}} {
		if _, err := x.src.Put(ctx, bot, "m1", u); !errors.As(err, &ve) {
			t.Fatalf("%+v: %v", u, err)
		}
	}
	r, err := x.src.Put(ctx, bot, "m1", registry.SourceUpdate{Revision: rvRev(5)})
	if err != nil || !r.Applied || r.Revision != 5 {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = x.src.Put(ctx, bot, "m1", registry.SourceUpdate{Revision: rvRev(3)})
	if err != nil || r.Applied || r.Revision != 5 {
		t.Fatalf("older revision: %+v %v", r, err)
	}
	r, err = x.src.Put(ctx, bot, "m1", registry.SourceUpdate{Deleted: true})
	if err != nil || !r.Applied || !r.Deleted || r.Revision != 5 {
		t.Fatalf("delete: %+v %v", r, err)
	}
	r, err = x.src.Put(ctx, bot, "m1", registry.SourceUpdate{Revision: rvRev(9)})
	if err != nil || !r.Deleted || r.Revision != 9 {
		t.Fatalf("deleted is sticky: %+v %v", r, err)
	}
}
