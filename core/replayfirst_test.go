package core

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/core/clocktest"
)

// TestReplayFirst: the whole decision table. A stored intent answers before
// any refusal; a refusal stands only when the key holds nothing.
func TestReplayFirst(t *testing.T) {
	stored := &Intent{ID: "it_1", Bot: "bot1", RequestHash: "h1"}
	refusals := map[string]error{
		"none":             nil,
		"deadline passed":  &ValidationError{Code: CodeDeadlinePassed},
		"unknown provider": &ValidationError{Code: CodeUnknownProvider},
		"unknown action":   &ValidationError{Code: CodeUnknownAction},
		"grant":            ErrGrantDoesNotCover,
		"rate limited":     &testLimit{"rate_limited"},
		"too many open":    &testLimit{"too_many_open_intents"},
	}
	for name, refusal := range refusals {
		cases := []struct {
			what   string
			stored *Intent
			bot    string
			hash   string
			want   submitAnswer
		}{
			{"same request stored", stored, "bot1", "h1", answerReplay},
			{"other request stored", stored, "bot1", "h2", answerKeyReused},
			{"another bot's intent under the id", stored, "bot2", "h1", answerKeyReused},
			{"nothing stored", nil, "bot1", "h1", map[bool]submitAnswer{true: answerCreate, false: answerRefuse}[refusal == nil]},
		}
		for _, c := range cases {
			h := RequestHashes{Whole: func() string { return c.hash }}
			if got := ReplayFirst(c.stored, c.bot, h, refusal); got != c.want {
				t.Errorf("refusal %s, %s: got %d, want %d", name, c.what, got, c.want)
			}
		}
	}
}

// countingStore counts the reads intake makes.
type countingStore struct {
	*memStore
	mu   sync.Mutex
	gets int
}

func (c *countingStore) Get(ctx context.Context, id string) (*Intent, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.memStore.Get(ctx, id)
}

// fakeLimiter refuses while refuse is set and counts admissions.
type fakeLimiter struct {
	refuse   error
	admitted int
	released int
}

func (f *fakeLimiter) Admit(context.Context, *Intent, time.Time) (func(context.Context), error) {
	if f.refuse != nil {
		return nil, f.refuse
	}
	f.admitted++
	return func(context.Context) { f.released++ }, nil
}

// TestSubmitReplaysBeforeTimeAndConfigurationRefusals: finding 2 at the
// core. A stored intent is replayed after its deadline passed, after its
// provider or action left the configuration, after its grant stopped
// covering it, and while its bot is limited; a different request under the
// key is still 422; a new key gets the refusal. The happy path reads nothing.
func TestSubmitReplaysBeforeTimeAndConfigurationRefusals(t *testing.T) {
	clock := clocktest.New(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	store := &countingStore{memStore: newMemStore()}
	reg := newMemRegistry()
	rv := &Revalidation{Facts: reg, Grants: reg, Clock: clock}
	// The grant is written straight to the registry: the operators' Authority
	// (core/registry) is built on core, and its own tests cover it.
	if err := reg.PutGrant(context.Background(), &Grant{ID: "g1", Version: 1, Bot: "bot1", Provider: "fake", Account: "a1",
		Actions: []string{"send"}, Targets: []string{"*"}, CreatedAt: clock.Now(), UpdatedAt: clock.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	limits := &fakeLimiter{}
	intake := func(p ProviderMap) *Intake {
		return &Intake{Store: store, Providers: p, Clock: clock, Grants: rv, Limits: limits}
	}
	full := intake(ProviderMap{"fake": &fakeProvider{}})
	b := strings.Replace(body, `"grant"`, `"deadline":"2030-01-01T09:01:00Z","grant"`, 1)
	first, err := full.Submit(context.Background(), "bot1", "k1", []byte(b))
	if err != nil || first.Replayed {
		t.Fatal(first, err)
	}
	if store.gets != 0 || store.puts != 1 || limits.admitted != 1 || limits.released != 0 {
		t.Fatalf("new intent: %d reads, %d puts, %d admitted, %d released; want 0, 1, 1, 0", store.gets, store.puts, limits.admitted, limits.released)
	}
	// A plain replay: the conditional put answers, and the limit's count is
	// given back (the intent was not created).
	if r, err := full.Submit(context.Background(), "bot1", "k1", []byte(b)); err != nil || !r.Replayed || limits.released != 1 {
		t.Fatalf("replay: %+v %v, released %d", r, err, limits.released)
	}

	replays := []struct {
		name   string
		in     *Intake
		change func()
		undo   func()
		code   string
		is     error
	}{
		{"deadline passed", full, func() { clock.Advance(2 * time.Minute) }, func() { clock.Advance(-2 * time.Minute) }, CodeDeadlinePassed, nil},
		{"provider removed", intake(ProviderMap{}), func() {}, func() {}, CodeUnknownProvider, nil},
		{"action removed", intake(ProviderMap{"fake": actionless{&fakeProvider{}}}), func() {}, func() {}, CodeUnknownAction, nil},
		{"rate limited", full, func() { limits.refuse = &testLimit{"rate_limited"} }, func() { limits.refuse = nil }, "", ErrLimited},
		{"too many open", full, func() { limits.refuse = &testLimit{"too_many_open_intents"} }, func() { limits.refuse = nil }, "", ErrLimited},
		{"grant revoked", full, func() {
			g, err := reg.GetGrant(context.Background(), "g1")
			if err != nil {
				t.Fatal(err)
			}
			now := clock.Now()
			g.RevokedAt, g.RevokedBy, g.RevokeReason = &now, "op", "r"
			v := g.Version
			g.Version++
			if err := reg.PutGrant(context.Background(), g, v); err != nil {
				t.Fatal(err)
			}
		}, func() {}, "", ErrGrantDoesNotCover},
	}
	for _, c := range replays {
		t.Run(c.name, func(t *testing.T) {
			c.change()
			defer c.undo()
			puts := store.puts
			r, err := c.in.Submit(context.Background(), "bot1", "k1", []byte(b))
			if err != nil || !r.Replayed || r.Intent.ID != first.Intent.ID {
				t.Fatalf("replay: %+v %v", r, err)
			}
			other := strings.Replace(b, `"hi"`, `"bye"`, 1)
			if _, err := c.in.Submit(context.Background(), "bot1", "k1", []byte(other)); !errors.Is(err, ErrIdempotencyKeyReused) {
				t.Fatalf("a different request under the key: %v, want key reused", err)
			}
			_, err = c.in.Submit(context.Background(), "bot1", "k-new-"+c.name, []byte(b))
			var ve *ValidationError
			switch {
			case c.code != "" && (!errors.As(err, &ve) || ve.Code != c.code):
				t.Fatalf("new key: %v, want %s", err, c.code)
			case c.is != nil && !errors.Is(err, c.is):
				t.Fatalf("new key: %v, want %v", err, c.is)
			}
			if store.puts != puts {
				t.Fatalf("refusals and replays wrote %d items", store.puts-puts)
			}
		})
	}
}

// actionless is a provider that offers no action.
type actionless struct{ *fakeProvider }

func (actionless) SupportsAction(string) bool { return false }

// testLimit is a bot limit's refusal as a BotLimiter returns it (the limits'
// own *botlimit.LimitError lives in core/botlimit, which imports core).
type testLimit struct{ code string }

func (e *testLimit) Error() string        { return e.code }
func (e *testLimit) Is(target error) bool { return target == ErrLimited }

type failingGets struct{ *memStore }

func (f failingGets) Get(context.Context, string) (*Intent, error) {
	return nil, errors.New("ThrottlingException: rate exceeded")
}

// Chaos seed 3925073398: a refused grant plus a failed replay check answered
// 403 to an identical resubmission. Not knowing must mean "try again".
func TestIntakeReplayCheckFailureIsNotARefusal(t *testing.T) {
	reg := newMemRegistry()
	clock := clocktest.New(time.Now())
	rv := &Revalidation{Facts: reg, Grants: reg, Clock: clock}
	in := &Intake{Store: failingGets{newMemStore()}, Providers: ProviderMap{"fake": &fakeProvider{}}, Clock: clock, Grants: rv}
	_, err := in.Submit(context.Background(), "bot1", "k1", []byte(body))
	var ve *ValidationError
	if err == nil || errors.Is(err, ErrGrantDoesNotCover) || errors.As(err, &ve) {
		t.Fatalf("got %v, want a retryable error", err)
	}
}
