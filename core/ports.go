package core

import (
	"context"
	"time"
)

// IntentStore persists intents. Create is one conditional put on the id
// (which is derived from the idempotency identity); Update reads the intent,
// lets mutate decide, and writes it back only if nobody else changed it in
// between (optimistic concurrency on Version). The transaction lives in the
// adapter, the decision in core.
type IntentStore interface {
	// Create stores in if no intent with its id exists. If one exists it
	// returns that intent and created=false; nothing is written.
	Create(ctx context.Context, in *Intent) (existing *Intent, created bool, err error)
	Get(ctx context.Context, id string) (*Intent, error)
	// Update applies mutate to the current intent and writes it conditionally.
	// If mutate returns an error nothing is written and the error is returned.
	// On a concurrent modification it returns ErrConflict (wrapped) and the
	// caller decides whether to re-read and try again.
	Update(ctx context.Context, id string, mutate func(*Intent) error) (*Intent, error)
	// Claim is Update for the one write that starts an attempt: mutate moves
	// the intent in flight under a lease (or returns an error, and nothing is
	// written). It is conditional on the version alone and touches no other
	// item: the backup barrier is read right after it (BarrierCheck, rule
	// "claim, then check the barrier"). Every write through Claim is a
	// claim: the store never infers one.
	Claim(ctx context.Context, id string, mutate func(*Intent) error) (*Intent, error)
}

// KnownUpdater is an IntentStore that can start an Update from the state
// its caller wrote last (known: the intent as its claim or its put stored
// it), skipping the read: the write is conditional on known's version, and
// on a conflict it reads and lets mutate decide again, exactly as Update
// does. Optional; it saves the read before an attempt's outcome.
type KnownUpdater interface {
	UpdateKnown(ctx context.Context, known *Intent, mutate func(*Intent) error) (*Intent, error)
}

// RetryQueue carries delayed work (retries and reconciliation) to the retrier.
type RetryQueue interface {
	Enqueue(ctx context.Context, msg RetryMessage, delay time.Duration) error
}

// RetryMessage is the body of a retry-queue message.
type RetryMessage struct {
	IntentID string `json:"intentId"`
	// Attempt is the attempt count when the message was sent; a message whose
	// attempt no longer matches the intent is stale and is dropped.
	Attempt int `json:"attempt"`
	// Op is "dispatch", "attempt", "reconcile" or "paced" (an attempt the account gate deferred).
	Op string `json:"op"`
	// SlotAt is the pace slot a deferred attempt reserved (OpPaced only).
	SlotAt *time.Time `json:"slotAt,omitempty"`
	// TargetSlotAt is the slot of the intent's target a deferred attempt
	// reserved (OpPaced only, targets with a pace of their own).
	TargetSlotAt *time.Time `json:"targetSlotAt,omitempty"`
	// Trigger names who asked (attempt history): TriggerStream, TriggerSweeper, ….
	Trigger Trigger `json:"trigger,omitempty"`
}

// Retry-queue operations.
const (
	// OpDispatch: attempt a pending intent now (the stream handler fans out
	// to the queue with it, and so does the sweeper for orphans).
	OpDispatch  = "dispatch"
	OpAttempt   = "attempt"
	OpReconcile = "reconcile"
)

// Clock tells the time; injected so schedules are deterministic in tests.
type Clock interface{ Now() time.Time }

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

func (f ClockFunc) Now() time.Time { return f() }

// SystemClock is the wall clock in UTC.
var SystemClock Clock = ClockFunc(func() time.Time { return time.Now().UTC() })

// Capabilities is what a provider declares for an account and action.
type Capabilities struct {
	// IdempotencyKeys: the provider deduplicates requests by our key...
	IdempotencyKeys bool `json:"idempotencyKeys"`
	// ...for this long after it first saw the key.
	KeyRetention time.Duration `json:"keyRetention"`
	// Lookup: the provider can tell authoritatively whether a key took effect.
	Lookup bool `json:"lookup"`
	// NaturallyIdempotent: the action sets a value ("set this message's
	// text to X", "add this reaction"), so repeating it changes nothing. An
	// ambiguous failure is retried under the usual bounds instead of going to
	// a human (decide), and a newer update of the same target supersedes an
	// older one's retries (setvalue.go). Declared by the provider per action.
	NaturallyIdempotent bool `json:"naturallyIdempotent,omitempty"`
}

// SendRequest is what a provider adapter receives for one attempt.
type SendRequest struct {
	IntentID       string
	IdempotencyKey string // stable across every attempt of the intent
	Bot            string
	Account        string
	Action         string
	Target         string
	Payload        []byte
	PayloadHash    string
	Attempt        int
	// AttemptStartedAt is when the attempt being made (Send) or reconciled
	// (Lookup) started, so a lookup can bound its search window.
	AttemptStartedAt time.Time
}

// SendResult is the provider's proof of the effect.
type SendResult struct {
	ExternalID string
	Evidence   Evidence
}

// LookupState is a provider's answer about a key.
type LookupState string

const (
	LookupFound   LookupState = "found"
	LookupAbsent  LookupState = "absent"
	LookupPending LookupState = "pending"
)

// LookupResult is the outcome of reconciliation with the provider.
type LookupResult struct {
	State      LookupState
	ExternalID string
	Evidence   Evidence
}

// Provider is one external system the outbox delivers to.
type Provider interface {
	Name() string
	// SupportsAction reports whether the action is known for this provider.
	SupportsAction(action string) bool
	// Capabilities declares idempotency-key support and outcome lookup.
	Capabilities(ctx context.Context, account, action string) (Capabilities, error)
	// Send performs the side effect. Errors are *PermanentError,
	// *RetryableError or *UnknownOutcomeError; anything else counts as unknown.
	Send(ctx context.Context, req SendRequest) (SendResult, error)
	// Lookup asks the provider about a key; only called when Capabilities.Lookup.
	Lookup(ctx context.Context, req SendRequest) (LookupResult, error)
}

// Providers resolves a provider by name.
type Providers interface {
	Provider(name string) (Provider, bool)
}

// ProviderMap is a simple Providers.
type ProviderMap map[string]Provider

func (m ProviderMap) Provider(name string) (Provider, bool) {
	p, ok := m[name]
	return p, ok
}

// Principal is an authenticated caller.
type Principal struct {
	Kind string `json:"kind"` // bot | operator | orchestrator
	Name string `json:"name"`
}

// Principal kinds.
const (
	PrincipalBot          = "bot"
	PrincipalOperator     = "operator"
	PrincipalOrchestrator = "orchestrator"
)

// FactReader reads the facts for an intent in one round trip, strongly
// consistent (a revocation acknowledged by the API is seen by the next attempt).
type FactReader interface {
	ReadFacts(ctx context.Context, in *Intent) (RevalidationFacts, error)
}

// GrantReader reads one grant (ErrNotFound when there is none).
type GrantReader interface {
	GetGrant(ctx context.Context, id string) (*Grant, error)
}

// GrantStore persists grants.
type GrantStore interface {
	GrantReader
	// PutGrant writes g only if the stored grant's version is expected
	// (0: no grant with that id exists); otherwise ErrConflict.
	PutGrant(ctx context.Context, g *Grant, expected int64) error
	// ListGrants pages through grants ordered by id; bot, when not empty,
	// keeps only grants whose bot field equals it.
	ListGrants(ctx context.Context, bot, cursor string, limit int) ([]*Grant, string, error)
}

// CapabilityStore persists capability withdrawals.
type CapabilityStore interface {
	GetCapability(ctx context.Context, provider, account string) (*Capability, error) // ErrNotFound
	PutCapability(ctx context.Context, c *Capability, expected int64) error           // ErrConflict
}

// SourceStore records source revisions. AdvanceSource moves the revision
// forward only (a conditional write); an older or equal revision changes
// nothing. deleted is sticky: once deleted, a source stays deleted, and a
// deletion is recorded even when it arrives with an older revision (a
// deletion is final whatever order the events arrive in). revision nil means
// "no revision given" (allowed only with deleted). It returns the state after
// the call and whether anything changed.
type SourceStore interface {
	AdvanceSource(ctx context.Context, bot, id string, revision *int64, deleted bool, now time.Time) (*SourceState, bool, error)
}

// HistoryPages reads the pages an intent's history was moved to
// (SpillHistory): written once with the intent write that moved them, never
// changed afterwards.
type HistoryPages interface {
	// HistoryPages returns pages from..to (1-based, inclusive) of intent id
	// in order; a page that does not exist is left out.
	HistoryPages(ctx context.Context, id string, from, to int) ([]HistoryPage, error)
}
