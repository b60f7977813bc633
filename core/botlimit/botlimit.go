// Package botlimit decides the per-bot limits (issue 24 finding 6): a rate
// of new intents and a cap on open (non-terminal) intents, per bot. Refusals
// are 429 with Retry-After; a replay of a stored key is never refused by
// either (core.ReplayFirst: a limit refusal is one of the refusals a stored
// intent overrides).
//
// Counting (docs/decisions.md "Per-bot limits"): a bot's counts live on
// LimitShards counter items, the intent's shard chosen from its id, each
// holding its share of the limits (LimitPlan). The rate is a fixed window
// per shard; the open count is added at intake and given back by the write
// that ends the intent.
//
// Core holds only the ports (core.BotLimiter, core.OpenRecounter) and
// core.ErrLimited; the DynamoDB adapter implements them with these rules.
package botlimit

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/botharness/outbox/core"
)

// Limit codes (api/openapi.json ErrorCode).
const (
	CodeRateLimited        = "rate_limited"
	CodeTooManyOpenIntents = "too_many_open_intents"
)

// MaxLimitShards bounds a bot's counter items (the profile's shard count:
// 2,000 intents/s of one bot over 16 items is 125 writes/s per item).
const MaxLimitShards = 16

// RatePerShardTarget is the rate share a counter shard is sized for: a bot
// gets one shard per RatePerShardTarget intents/s of its rate (at most
// MaxLimitShards), so each shard's quota stays large enough that the
// uneven spread of ids over shards rarely refuses a bot under its rate.
const RatePerShardTarget = 100

// OpenRetryAfter is the Retry-After of too_many_open_intents: open intents
// end when they are delivered, which usually takes well under this.
const OpenRetryAfter = 5 * time.Second

// LimitError is a refusal by a bot limit: Code says which, RetryAfter when
// trying again can succeed.
type LimitError struct {
	Code       string
	RetryAfter time.Duration
	Message    string
}

func (e *LimitError) Error() string { return e.Code + ": " + e.Message }

// Is makes every LimitError match ErrLimited.
func (e *LimitError) Is(target error) bool { return target == core.ErrLimited }

// BotRate is N new intents per Per (e.g. "50/1s"). Zero: no rate limit.
type BotRate struct {
	N   int
	Per time.Duration
}

// ParseBotRate reads "<n>/<duration>" ("50/1s", "3000/1m"); "" is no limit.
func ParseBotRate(s string) (BotRate, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return BotRate{}, nil
	}
	n, per, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err != nil || count < 1 {
		return BotRate{}, fmt.Errorf("bot rate %q: want <count>/<duration>, e.g. 50/1s", s)
	}
	d, err := time.ParseDuration(strings.TrimSpace(per))
	if err != nil || d < time.Second || d > time.Hour {
		return BotRate{}, fmt.Errorf("bot rate %q: the window must be a duration from 1s to 1h", s)
	}
	return BotRate{N: count, Per: d}, nil
}

func (r BotRate) String() string {
	if r.N == 0 {
		return ""
	}
	return strconv.Itoa(r.N) + "/" + r.Per.String()
}

// BotLimits are one bot's limits. Zero values: no limit.
type BotLimits struct {
	Rate    BotRate
	MaxOpen int
}

// Enabled reports whether any limit is set.
func (l BotLimits) Enabled() bool { return l.Rate.N > 0 || l.MaxOpen > 0 }

// BotLimitConfig is the deployment's limits: a default for every bot and
// per-bot overrides.
type BotLimitConfig struct {
	Default BotLimits
	PerBot  map[string]BotLimits
}

// For returns bot's limits.
func (c BotLimitConfig) For(bot string) BotLimits {
	if l, ok := c.PerBot[bot]; ok {
		return l
	}
	return c.Default
}

// Enabled reports whether any bot has a limit.
func (c BotLimitConfig) Enabled() bool {
	if c.Default.Enabled() {
		return true
	}
	for _, l := range c.PerBot {
		if l.Enabled() {
			return true
		}
	}
	return false
}

// LimitShards is how many counter items carry a bot's limits: one per
// RatePerShardTarget intents/s of its rate, at least 1 and at most
// MaxLimitShards; MaxLimitShards without a rate (the open count alone is
// touched by every intent, whatever its pace). Pure.
func LimitShards(l BotLimits) int {
	if l.Rate.N == 0 {
		return MaxLimitShards
	}
	perSec := float64(l.Rate.N) / l.Rate.Per.Seconds()
	return min(MaxLimitShards, max(1, int(math.Ceil(perSec/RatePerShardTarget))))
}

// LimitPlan is what admitting one intent asks of its counter shard.
type LimitPlan struct {
	Shard  int // 0..Shards-1, from the intent id
	Shards int
	// Window is the index of the rate window holding now (now / Rate.Per),
	// WindowEnd when it ends. RateQuota is the shard's share of the rate
	// (0: no rate limit).
	Window    int64
	WindowEnd time.Time
	RateQuota int
	// OpenQuota is the shard's share of the open cap (0: no cap).
	OpenQuota int
}

// PlanLimit is the rule that splits a bot's limits over its counter shards:
// each shard holds floor(limit / shards) (at least 1), so the shards
// together never admit more than the limit; an uneven spread of ids may
// refuse a little early, never late. Pure.
func PlanLimit(l BotLimits, intentID string, now time.Time) LimitPlan {
	n := LimitShards(l)
	p := LimitPlan{Shard: ShardOf(intentID, n), Shards: n}
	if l.Rate.N > 0 {
		per := l.Rate.Per.Nanoseconds()
		p.Window = now.UnixNano() / per
		p.WindowEnd = time.Unix(0, (p.Window+1)*per)
		p.RateQuota = max(1, l.Rate.N/n)
	}
	if l.MaxOpen > 0 {
		p.OpenQuota = max(1, l.MaxOpen/n)
	}
	return p
}

// LimitCounter is one counter shard's state.
type LimitCounter struct {
	Window   int64 // the rate window InWindow counts (0: none yet)
	InWindow int
	Open     int
}

// Admits is the rule a counter shard applies, as one conditional write:
// the shard's count in the plan's window is under its rate quota and its
// open count under its open quota. Pure.
func (p LimitPlan) Admits(c LimitCounter) bool {
	return p.Refusal(c, time.Time{}) == nil
}

// Refusal says which limit refuses an intent on a shard in state c (nil:
// none), with the Retry-After: the rest of the window for the rate,
// OpenRetryAfter for the open cap. Pure.
func (p LimitPlan) Refusal(c LimitCounter, now time.Time) *LimitError {
	if p.RateQuota > 0 && c.Window == p.Window && c.InWindow >= p.RateQuota {
		wait := p.WindowEnd.Sub(now)
		if now.IsZero() || wait <= 0 {
			wait = time.Second
		}
		return &LimitError{Code: CodeRateLimited, RetryAfter: wait,
			Message: "this bot is over its rate of new intents; try again after Retry-After with the same Idempotency-Key"}
	}
	if p.OpenQuota > 0 && c.Open >= p.OpenQuota {
		return &LimitError{Code: CodeTooManyOpenIntents, RetryAfter: OpenRetryAfter,
			Message: "this bot has its maximum number of open intents; try again after Retry-After with the same Idempotency-Key"}
	}
	return nil
}

// ShardOf maps an id to one of n shards (FNV-1a, stable across releases:
// stored keys depend on it): a bot's limit counters here, the table's
// sharded items in adapters/dynamo.
func ShardOf(id string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// ClosesOpenSlot is the rule for giving an open count back: a write that
// moves a counted intent from a non-terminal status to a terminal one.
// Pure.
func ClosesOpenSlot(before core.Status, after *core.Intent) bool {
	return after.OpenSlot > 0 && !before.Terminal() && after.Status.Terminal() && before != ""
}

// The open-count recount (issue 24): a give-back lost after the write that
// ended its intent (a crash between the two) leaves a counter shard counting
// one intent too many for good, so the cap refuses early. The sweeper
// recounts a shard from the store's truth (the bot's intents, read through
// its profile listing) and lowers the counter to what the intents hold. A
// recount must never lower it below what is really held, or the cap would
// admit late: admissions whose put is still under way and give-backs still
// to come are invisible in the store. So a shard is only recounted when
// nothing has written it for OpenRecountSettle (every admission's put and
// every release is then over: no function runs that long), intents that
// ended within OpenRecountSettle still count as held (their give-back may
// be on its way), and the correcting write is conditional on the shard not
// having been written since it was read.

// OpenRecountSettle is how long a counter shard must be unwritten before it
// is recounted, and how recently an ended intent may still be giving its
// count back: Lambda's longest invocation (15 minutes) bounds the time from
// an admission to its put or release, and from an ending write to its
// give-back.
const OpenRecountSettle = 15 * time.Minute

// OpenRecountEvery is how often one shard is recounted at most (a bot that
// legitimately holds open intents, e.g. in needs-human, would otherwise be
// recounted on every sweep).
const OpenRecountEvery = 30 * time.Minute

// OpenShard is what the recount reads of one counter shard.
type OpenShard struct {
	Bot       string
	Shard     int
	Open      int
	LastWrite time.Time // the shard's last admission, release or give-back
	Recounted time.Time // the last recount (zero: never)
}

// DueForOpenRecount is the rule that picks a shard to recount: it counts
// something, nothing has written it for settle, and it was not recounted
// within every. Pure.
func DueForOpenRecount(s OpenShard, now time.Time, settle, every time.Duration) bool {
	return s.Open > 0 && !s.LastWrite.IsZero() && now.Sub(s.LastWrite) >= settle &&
		(s.Recounted.IsZero() || now.Sub(s.Recounted) >= every)
}

// HeldOpen counts the intents of intents (one bot's) that hold an open
// count on shard at now: counted there (OpenSlot) and still open, or ended
// within settle (a give-back may still come). Pure.
func HeldOpen(intents []*core.Intent, shard int, now time.Time, settle time.Duration) int {
	n := 0
	for _, in := range intents {
		if in == nil || in.Pruned != nil || in.OpenSlot != shard+1 {
			continue
		}
		if !in.Status.Terminal() {
			n++
			continue
		}
		end := in.UpdatedAt
		if in.EndedAt != nil {
			end = *in.EndedAt
		}
		if now.Sub(end) < settle {
			n++
		}
	}
	return n
}

// OpenRecountTo is the correction: a shard counting more than its bot's
// intents hold is lowered to what they hold; never raised (an uncounted
// open intent, e.g. one open before the cap was configured, is left
// uncounted as before). Pure.
func OpenRecountTo(s OpenShard, held int) (int, bool) {
	if held < s.Open {
		return max(held, 0), true
	}
	return s.Open, false
}
