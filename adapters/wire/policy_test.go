package wire

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/core"
)

// TestParseAttemptPolicy: OUTBOX_ATTEMPT_POLICY's members replace the
// defaults' one by one (a sub-member alone keeps its siblings' defaults);
// unknown members and malformed values are errors naming the variable.
func TestParseAttemptPolicy(t *testing.T) {
	def := core.DefaultAttemptPolicy
	ok := []struct {
		doc  string
		want func(p *core.AttemptPolicy)
	}{
		{``, func(p *core.AttemptPolicy) {}},
		{`{}`, func(p *core.AttemptPolicy) {}},
		{`{"lease":"5s","sweepGrace":"1s"}`, func(p *core.AttemptPolicy) { p.Lease, p.SweepGrace = 5*time.Second, time.Second }},
		{`{"backoff":{"maxAttempts":4}}`, func(p *core.AttemptPolicy) { p.Backoff.MaxAttempts = 4 }},
		{`{"backoff":{"base":"1s","cap":"1m","maxAge":"2h"}}`, func(p *core.AttemptPolicy) {
			p.Backoff.Base, p.Backoff.Cap, p.Backoff.MaxAge = time.Second, time.Minute, 2*time.Hour
		}},
		{`{"reconcile":{"delay":"1s","window":"5m","settle":"30s"}}`, func(p *core.AttemptPolicy) {
			p.Reconcile = core.ReconcilePolicy{Delay: time.Second, Window: 5 * time.Minute, Settle: 30 * time.Second}
		}},
		{`{"breaker":{"failures":0}}`, func(p *core.AttemptPolicy) { p.Breaker.Failures = 0 }},
		{`{"breaker":{"failures":3,"cooldown":"5s","maxCooldown":"1m","probeLease":"10s"},"defaultRetryAfter":"2s","barrierRecheck":"3s"}`, func(p *core.AttemptPolicy) {
			p.Breaker.Failures, p.Breaker.Cooldown, p.Breaker.MaxCooldown, p.Breaker.ProbeLease = 3, 5*time.Second, time.Minute, 10*time.Second
			p.DefaultRetryAfter, p.BarrierRecheck = 2*time.Second, 3*time.Second
		}},
		{`{"lease":null}`, func(p *core.AttemptPolicy) {}},
	}
	for _, c := range ok {
		got, err := ParseAttemptPolicy(c.doc)
		if err != nil {
			t.Errorf("%s: %v", c.doc, err)
			continue
		}
		want := def
		c.want(&want)
		if got.Backoff.Rand == nil {
			t.Errorf("%s: the backoff lost its jitter", c.doc)
		}
		got.Backoff.Rand, want.Backoff.Rand = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.doc, got, want)
		}
	}
	bad := []struct{ doc, says string }{
		{`{"leese":"5s"}`, `unknown field "leese"`},
		{`{"backoff":{"jitter":true}}`, `unknown field "jitter"`},
		{`{"lease":5}`, `a duration is a string`},
		{`{"lease":"5 seconds"}`, `time: unknown unit`},
		{`{"backoff":{"maxAttempts":"8"}}`, `maxAttempts`},
		{`{"lease":"5s"} {}`, `one JSON object`},
		{`[`, `unexpected EOF`},
	}
	for _, c := range bad {
		_, err := ParseAttemptPolicy(c.doc)
		if err == nil || !strings.HasPrefix(err.Error(), EnvAttemptPolicy+": ") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one saying %q", c.doc, err, c.says)
		}
	}
}

// TestAppRefusesAnAttemptPolicyOutOfBounds: the assembly checks the policy
// before it builds anything, and FromEnv reads it from the environment.
func TestAppRefusesAnAttemptPolicyOutOfBounds(t *testing.T) {
	_, err := New(awsconfig.Clients{}, Config{Policy: core.AttemptPolicy{Lease: -time.Second}})
	if err == nil || !strings.Contains(err.Error(), "attempt policy: lease -1s must be positive") {
		t.Fatalf("New with a negative lease: %v", err)
	}
	t.Setenv(EnvAttemptPolicy, `{"lease":"7s"}`)
	c, err := FromEnv()
	if err != nil || c.Policy.Lease != 7*time.Second || c.Policy.SweepGrace != core.DefaultAttemptPolicy.SweepGrace {
		t.Fatalf("FromEnv: lease %v grace %v err %v", c.Policy.Lease, c.Policy.SweepGrace, err)
	}
	t.Setenv(EnvAttemptPolicy, `{"lease":"soon"}`)
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), EnvAttemptPolicy) {
		t.Fatalf("FromEnv with a malformed policy: %v", err)
	}
}

// TestFromEnvRefusesAMalformedDuration: a duration variable that is not a
// positive Go duration is an error naming it, never the default in silence.
func TestFromEnvRefusesAMalformedDuration(t *testing.T) {
	for _, v := range []string{"30", "-5s", "0s", "soon"} {
		t.Setenv("OUTBOX_INLINE_MAX_WAIT", v)
		_, err := FromEnv()
		if err == nil || !strings.Contains(err.Error(), "OUTBOX_INLINE_MAX_WAIT=") || !strings.Contains(err.Error(), "positive Go duration") {
			t.Errorf("OUTBOX_INLINE_MAX_WAIT=%q: %v", v, err)
		}
	}
	t.Setenv("OUTBOX_INLINE_MAX_WAIT", "3s")
	if c, err := FromEnv(); err != nil || c.InlineMaxWait != 3*time.Second {
		t.Fatalf("3s: %v %v", c.InlineMaxWait, err)
	}
	t.Setenv("OUTBOX_INLINE_MAX_WAIT", "")
	if c, err := FromEnv(); err != nil || c.InlineMaxWait != core.DefaultInlineMaxWait {
		t.Fatalf("unset: %v %v", c.InlineMaxWait, err)
	}
}

// TestLeaseMustOutliveEveryProviderTimeout: a lease no longer than a
// configured provider's request timeout is refused at assembly (and by the
// stack's check, which is the same function), naming the provider; the
// default lease outlives every provider left at its default timeout.
func TestLeaseMustOutliveEveryProviderTimeout(t *testing.T) {
	sandbox := `{"sandbox":{"baseUrl":"http://127.0.0.1:4100","timeoutMs":5000}}`
	_, err := New(awsconfig.Clients{}, Config{ProviderConfig: sandbox, Policy: core.AttemptPolicy{Lease: 5 * time.Second}})
	if err == nil || !strings.Contains(err.Error(), "lease 5s must outlive provider sandbox's request timeout 5s") {
		t.Fatalf("New with a 5 s lease and a 5 s provider timeout: %v", err)
	}
	for _, c := range []struct {
		policy, providers string
		ok                bool
	}{
		{`{"lease":"6s"}`, sandbox, true},
		{`{"lease":"5s"}`, sandbox, false},
		{``, `{"stripe":{"accounts":{"shop":{"secretKey":"env:K"}}}}`, true},                    // 60 s over the 10 s default
		{``, `{"stripe":{"timeoutMs":60000,"accounts":{"shop":{"secretKey":"env:K"}}}}`, false}, // 60 s is not over 60 s
		{`{"lease":"61s"}`, `{"stripe":{"timeoutMs":60000,"accounts":{"shop":{"secretKey":"env:K"}}}}`, true},
	} {
		err := CheckAttemptPolicy(c.policy, c.providers)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "must outlive provider")) {
			t.Errorf("policy %s, providers %s: %v, want ok=%v", c.policy, c.providers, err, c.ok)
		}
	}
}
