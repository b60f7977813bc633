package dynamo

// Storage shapes. core knows nothing about how an intent, a grant, a
// capability, a source or a webhook event is stored: these item types carry
// the attribute names (the table's schema, which existing items already
// use), and the mappers below copy between them and core's domain types.
// A field added to a core type must be added here too; the store contract
// suite (core/storetest) round-trips every field and fails otherwise.

import (
	"encoding/json"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

type sourceRefItem struct {
	ID       string `dynamodbav:"id"`
	Revision int64  `dynamodbav:"revision"`
}

type grantRefItem struct {
	ID      string `dynamodbav:"id"`
	Version int64  `dynamodbav:"version"`
}

type leaseItem struct {
	Owner string     `dynamodbav:"owner"`
	Since *time.Time `dynamodbav:"since,omitempty"`
	Until time.Time  `dynamodbav:"until"`
}

// History entries (attempts, resolutions) are stored compactly: every
// intent write rewrites the whole item and pays a write unit per started KB,
// so an entry repeats no long attribute names and no RFC 3339 strings.
// Attribute names are one or two letters, times are Unix nanoseconds (zero:
// absent) and evidence and checks are flat fields of the entry. A 1 KiB
// intent with two attempt entries stays under 2 KB (2 WCU per write; see
// TestTwoAttemptIntentStaysUnderTwoKB). Entries written before this format
// (long names, nested evidence/checks maps, RFC 3339 times) are still read:
// the legacy* fields below take them, and an entry read that way is written
// back compactly the next time its intent is written.
type attemptItem struct {
	N          int               `dynamodbav:"n"`
	Trigger    string            `dynamodbav:"t,omitempty"`
	StartedAt  int64             `dynamodbav:"s,omitempty"`
	EndedAt    int64             `dynamodbav:"e,omitempty"`
	Result     string            `dynamodbav:"r,omitempty"`
	ExternalID string            `dynamodbav:"x,omitempty"`
	HTTPStatus int               `dynamodbav:"hs,omitempty"`
	Code       string            `dynamodbav:"pc,omitempty"`
	Detail     string            `dynamodbav:"dt,omitempty"`
	RetryAfter string            `dynamodbav:"ra,omitempty"`
	Extra      map[string]string `dynamodbav:"ex,omitempty"`
	// Checks: c is present (the check's result) exactly when the attempt
	// has checks.
	CheckResult    *string `dynamodbav:"c,omitempty"`
	CheckReason    string  `dynamodbav:"cw,omitempty"`
	SourceRevision int64   `dynamodbav:"cs,omitempty"`
	GrantVersion   int64   `dynamodbav:"cg,omitempty"`
	NextDueAt      int64   `dynamodbav:"nd,omitempty"`

	legacyAttempt
}

// legacyAttempt is the earlier, verbose shape of an attempt entry (read only).
type legacyAttempt struct {
	LTrigger    string        `dynamodbav:"trigger,omitempty"`
	LStartedAt  *time.Time    `dynamodbav:"startedAt,omitempty"`
	LEndedAt    *time.Time    `dynamodbav:"endedAt,omitempty"`
	LResult     string        `dynamodbav:"result,omitempty"`
	LExternalID string        `dynamodbav:"externalId,omitempty"`
	LEvidence   *evidenceItem `dynamodbav:"evidence,omitempty"`
	LChecks     *checksItem   `dynamodbav:"checks,omitempty"`
	LNextDueAt  *time.Time    `dynamodbav:"nextDueAt,omitempty"`
}

type evidenceItem struct {
	HTTPStatus   int               `dynamodbav:"httpStatus,omitempty"`
	ProviderCode string            `dynamodbav:"providerCode,omitempty"`
	Detail       string            `dynamodbav:"detail,omitempty"`
	RetryAfter   string            `dynamodbav:"retryAfter,omitempty"`
	Extra        map[string]string `dynamodbav:"extra,omitempty"`
}

type checksItem struct {
	Result         string `dynamodbav:"result"`
	Reason         string `dynamodbav:"reason,omitempty"`
	SourceRevision int64  `dynamodbav:"sourceRevision,omitempty"`
	GrantVersion   int64  `dynamodbav:"grantVersion,omitempty"`
}

type resolutionItem struct {
	At                    int64  `dynamodbav:"a,omitempty"`
	By                    string `dynamodbav:"b,omitempty"`
	ByKind                string `dynamodbav:"k,omitempty"`
	Decision              string `dynamodbav:"d,omitempty"`
	Reason                string `dynamodbav:"w,omitempty"`
	Recommend             bool   `dynamodbav:"o,omitempty"`
	Key                   string `dynamodbav:"ik,omitempty"`
	DuplicateRiskAccepted bool   `dynamodbav:"dr,omitempty"`

	legacyResolution
}

// legacyResolution is the earlier, verbose shape of a resolution entry (read only).
type legacyResolution struct {
	LAt                    *time.Time `dynamodbav:"at,omitempty"`
	LBy                    string     `dynamodbav:"by,omitempty"`
	LByKind                string     `dynamodbav:"byKind,omitempty"`
	LDecision              string     `dynamodbav:"decision,omitempty"`
	LReason                string     `dynamodbav:"reason,omitempty"`
	LRecommend             bool       `dynamodbav:"recommendationOnly,omitempty"`
	LKey                   string     `dynamodbav:"key,omitempty"`
	LDuplicateRiskAccepted bool       `dynamodbav:"duplicateRiskAccepted,omitempty"`
}

// nanos is t as stored in a history entry: Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// intentItem is the stored shape of an intent (keys and index attributes are
// added by MarshalIntent).
type intentItem struct {
	ID             string          `dynamodbav:"id"`
	Bot            string          `dynamodbav:"bot"`
	IdempotencyKey string          `dynamodbav:"idempotencyKey"`
	Kind           string          `dynamodbav:"kind"`
	Provider       string          `dynamodbav:"provider"`
	Account        string          `dynamodbav:"account"`
	Action         string          `dynamodbav:"action"`
	Target         string          `dynamodbav:"target"`
	Payload        json.RawMessage `dynamodbav:"payload,omitempty"`
	PayloadHash    string          `dynamodbav:"payloadHash"`
	PayloadRef     string          `dynamodbav:"payloadRef,omitempty"`
	RequestHash    string          `dynamodbav:"requestHash"`
	TraceParent    string          `dynamodbav:"tp,omitempty"`
	OpenSlot       int             `dynamodbav:"openSlot,omitempty"`
	Source         *sourceRefItem  `dynamodbav:"source,omitempty"`
	Grant          grantRefItem    `dynamodbav:"grant"`
	Deadline       *time.Time      `dynamodbav:"deadline,omitempty"`
	Metadata       json.RawMessage `dynamodbav:"metadata,omitempty"`

	Status         string           `dynamodbav:"status"`
	StatusReason   string           `dynamodbav:"statusReason,omitempty"`
	Version        int64            `dynamodbav:"version"`
	CreatedAt      time.Time        `dynamodbav:"createdAt"`
	UpdatedAt      time.Time        `dynamodbav:"updatedAt"`
	AttemptCount   int              `dynamodbav:"attemptCount"`
	FirstAttemptAt *time.Time       `dynamodbav:"firstAttemptAt,omitempty"`
	Lease          *leaseItem       `dynamodbav:"lease,omitempty"`
	NextAttemptAt  *time.Time       `dynamodbav:"nextAttemptAt,omitempty"`
	ExternalID     string           `dynamodbav:"externalId,omitempty"`
	Attempts       []attemptItem    `dynamodbav:"attempts"`
	Resolutions    []resolutionItem `dynamodbav:"resolutions,omitempty"`
	History        *historyItem     `dynamodbav:"history,omitempty"`
	// EndedAt and expiresAt (the table's TTL attribute, epoch seconds) are
	// stamped by retention.ApplyRetention on the write that ends the intent.
	EndedAt   *time.Time `dynamodbav:"endedAt,omitempty"`
	ExpiresAt int64      `dynamodbav:"expiresAt,omitempty"`
}

// historyItem is core.HistorySummary: what an intent keeps about entries
// moved to history pages.
type historyItem struct {
	Pages              int             `dynamodbav:"pages"`
	SpilledAttempts    int             `dynamodbav:"spilledAttempts"`
	SpilledResolutions int             `dynamodbav:"spilledResolutions"`
	Uncertain          bool            `dynamodbav:"uncertain,omitempty"`
	Ack                *attemptItem    `dynamodbav:"ack,omitempty"`
	Delivery           string          `dynamodbav:"delivery,omitempty"`
	Echo               bool            `dynamodbav:"echo,omitempty"`
	LastDecision       *resolutionItem `dynamodbav:"lastDecision,omitempty"`
}

// historyPageItem is one page of moved history (keys added by MarshalHistoryPage).
type historyPageItem struct {
	Seq         int              `dynamodbav:"seq"`
	Attempts    []attemptItem    `dynamodbav:"attempts,omitempty"`
	Resolutions []resolutionItem `dynamodbav:"resolutions,omitempty"`
}

func attemptToItem(a core.Attempt) attemptItem {
	e := a.Evidence
	ai := attemptItem{N: a.N, Trigger: string(a.Trigger), StartedAt: nanos(a.StartedAt), EndedAt: nanos(a.EndedAt), Result: string(a.Result),
		ExternalID: a.ExternalID, HTTPStatus: e.HTTPStatus, Code: e.ProviderCode, Detail: e.Detail, RetryAfter: e.RetryAfter}
	if len(e.Extra) > 0 {
		// An empty map is not written: DynamoDB Local's stream images
		// garble empty maps, and no entry means the same.
		ai.Extra = e.Extra
	}
	if c := a.Checks; c != nil {
		r := c.Result
		ai.CheckResult, ai.CheckReason, ai.SourceRevision, ai.GrantVersion = &r, c.Reason, c.SourceRevision, c.GrantVersion
	}
	if a.NextDueAt != nil {
		ai.NextDueAt = nanos(*a.NextDueAt)
	}
	return ai
}

func attemptFromItem(a attemptItem) core.Attempt {
	if l := a.legacyAttempt; l.LTrigger != "" || l.LResult != "" || l.LStartedAt != nil {
		return legacyAttemptFromItem(a.N, l)
	}
	ca := core.Attempt{N: a.N, Trigger: core.Trigger(a.Trigger), StartedAt: fromNanos(a.StartedAt), EndedAt: fromNanos(a.EndedAt), Result: core.AttemptResult(a.Result),
		ExternalID: a.ExternalID, Evidence: core.Evidence{HTTPStatus: a.HTTPStatus, ProviderCode: a.Code, Detail: a.Detail, RetryAfter: a.RetryAfter, Extra: a.Extra}}
	if a.CheckResult != nil {
		ca.Checks = &core.Checks{Result: *a.CheckResult, Reason: a.CheckReason, SourceRevision: a.SourceRevision, GrantVersion: a.GrantVersion}
	}
	if a.NextDueAt != 0 {
		t := fromNanos(a.NextDueAt)
		ca.NextDueAt = &t
	}
	return ca
}

func legacyAttemptFromItem(n int, l legacyAttempt) core.Attempt {
	ca := core.Attempt{N: n, Trigger: core.Trigger(l.LTrigger), Result: core.AttemptResult(l.LResult), ExternalID: l.LExternalID, NextDueAt: l.LNextDueAt}
	if l.LStartedAt != nil {
		ca.StartedAt = *l.LStartedAt
	}
	if l.LEndedAt != nil {
		ca.EndedAt = *l.LEndedAt
	}
	if e := l.LEvidence; e != nil {
		ca.Evidence = core.Evidence{HTTPStatus: e.HTTPStatus, ProviderCode: e.ProviderCode, Detail: e.Detail, RetryAfter: e.RetryAfter, Extra: e.Extra}
	}
	if c := l.LChecks; c != nil {
		ca.Checks = &core.Checks{Result: c.Result, Reason: c.Reason, SourceRevision: c.SourceRevision, GrantVersion: c.GrantVersion}
	}
	return ca
}

func resolutionToItem(r core.Resolution) resolutionItem {
	return resolutionItem{At: nanos(r.At), By: r.By, ByKind: r.ByKind, Decision: r.Decision, Reason: r.Reason,
		Recommend: r.Recommend, Key: r.Key, DuplicateRiskAccepted: r.DuplicateRiskAccepted}
}

func resolutionFromItem(r resolutionItem) core.Resolution {
	if l := r.legacyResolution; l.LAt != nil || l.LDecision != "" {
		cr := core.Resolution{By: l.LBy, ByKind: l.LByKind, Decision: l.LDecision, Reason: l.LReason,
			Recommend: l.LRecommend, Key: l.LKey, DuplicateRiskAccepted: l.LDuplicateRiskAccepted}
		if l.LAt != nil {
			cr.At = *l.LAt
		}
		return cr
	}
	return core.Resolution{At: fromNanos(r.At), By: r.By, ByKind: r.ByKind, Decision: r.Decision, Reason: r.Reason,
		Recommend: r.Recommend, Key: r.Key, DuplicateRiskAccepted: r.DuplicateRiskAccepted}
}

func historyToItem(h *core.HistorySummary) *historyItem {
	if h == nil {
		return nil
	}
	it := &historyItem{Pages: h.Pages, SpilledAttempts: h.SpilledAttempts, SpilledResolutions: h.SpilledResolutions,
		Uncertain: h.Uncertain, Delivery: h.Delivery, Echo: h.Echo}
	if h.Ack != nil {
		a := attemptToItem(*h.Ack)
		it.Ack = &a
	}
	if h.LastDecision != nil {
		r := resolutionToItem(*h.LastDecision)
		it.LastDecision = &r
	}
	return it
}

func historyFromItem(it *historyItem) *core.HistorySummary {
	if it == nil {
		return nil
	}
	h := &core.HistorySummary{Pages: it.Pages, SpilledAttempts: it.SpilledAttempts, SpilledResolutions: it.SpilledResolutions,
		Uncertain: it.Uncertain, Delivery: it.Delivery, Echo: it.Echo}
	if it.Ack != nil {
		a := attemptFromItem(*it.Ack)
		h.Ack = &a
	}
	if it.LastDecision != nil {
		r := resolutionFromItem(*it.LastDecision)
		h.LastDecision = &r
	}
	return h
}

func historyPageToItem(p core.HistoryPage) historyPageItem {
	it := historyPageItem{Seq: p.Seq}
	for _, a := range p.Attempts {
		it.Attempts = append(it.Attempts, attemptToItem(a))
	}
	for _, r := range p.Resolutions {
		it.Resolutions = append(it.Resolutions, resolutionToItem(r))
	}
	return it
}

func historyPageFromItem(it historyPageItem) core.HistoryPage {
	p := core.HistoryPage{Seq: it.Seq}
	for _, a := range it.Attempts {
		p.Attempts = append(p.Attempts, attemptFromItem(a))
	}
	for _, r := range it.Resolutions {
		p.Resolutions = append(p.Resolutions, resolutionFromItem(r))
	}
	return p
}

func intentToItem(in *core.Intent) intentItem {
	it := intentItem{
		ID: in.ID, Bot: in.Bot, IdempotencyKey: in.IdempotencyKey, Kind: string(in.Kind), Provider: in.Provider,
		Account: in.Account, Action: in.Action, Target: in.Target, Payload: in.Payload, PayloadHash: in.PayloadHash, PayloadRef: in.PayloadRef,
		RequestHash: in.RequestHash, TraceParent: in.TraceParent, Grant: grantRefItem{ID: in.Grant.ID, Version: in.Grant.Version},
		Deadline: in.Deadline, Metadata: in.Metadata,
		Status: string(in.Status), StatusReason: in.StatusReason, Version: in.Version, CreatedAt: in.CreatedAt,
		UpdatedAt: in.UpdatedAt, AttemptCount: in.AttemptCount, FirstAttemptAt: in.FirstAttemptAt,
		NextAttemptAt: in.NextAttemptAt, ExternalID: in.ExternalID, OpenSlot: in.OpenSlot, EndedAt: in.EndedAt,
	}
	if !in.ExpiresAt.IsZero() {
		it.ExpiresAt = in.ExpiresAt.Unix()
	}
	if in.Source != nil {
		it.Source = &sourceRefItem{ID: in.Source.ID, Revision: in.Source.Revision}
	}
	if in.Lease != nil {
		it.Lease = &leaseItem{Owner: in.Lease.Owner, Until: in.Lease.Until}
		if !in.Lease.Since.IsZero() {
			since := in.Lease.Since
			it.Lease.Since = &since
		}
	}
	if in.Attempts != nil {
		it.Attempts = make([]attemptItem, len(in.Attempts))
		for i, a := range in.Attempts {
			it.Attempts[i] = attemptToItem(a)
		}
	}
	if in.Resolutions != nil {
		it.Resolutions = make([]resolutionItem, len(in.Resolutions))
		for i, r := range in.Resolutions {
			it.Resolutions[i] = resolutionToItem(r)
		}
	}
	it.History = historyToItem(in.History)
	return it
}

func intentFromItem(it *intentItem) *core.Intent {
	in := &core.Intent{
		ID: it.ID, Bot: it.Bot, IdempotencyKey: it.IdempotencyKey, Kind: core.Kind(it.Kind), Provider: it.Provider,
		Account: it.Account, Action: it.Action, Target: it.Target, Payload: it.Payload, PayloadHash: it.PayloadHash, PayloadRef: it.PayloadRef,
		RequestHash: it.RequestHash, TraceParent: it.TraceParent, Grant: core.GrantRef{ID: it.Grant.ID, Version: it.Grant.Version},
		Deadline: it.Deadline, Metadata: it.Metadata,
		Status: core.Status(it.Status), StatusReason: it.StatusReason, Version: it.Version, CreatedAt: it.CreatedAt,
		UpdatedAt: it.UpdatedAt, AttemptCount: it.AttemptCount, FirstAttemptAt: it.FirstAttemptAt,
		NextAttemptAt: it.NextAttemptAt, ExternalID: it.ExternalID, OpenSlot: it.OpenSlot, EndedAt: it.EndedAt,
		Attempts: make([]core.Attempt, len(it.Attempts)),
	}
	if it.ExpiresAt != 0 {
		in.ExpiresAt = time.Unix(it.ExpiresAt, 0).UTC()
	}
	if it.Source != nil {
		in.Source = &core.SourceRef{ID: it.Source.ID, Revision: it.Source.Revision}
	}
	if it.Lease != nil {
		in.Lease = &core.Lease{Owner: it.Lease.Owner, Until: it.Lease.Until}
		if it.Lease.Since != nil {
			in.Lease.Since = *it.Lease.Since
		}
	}
	for i, a := range it.Attempts {
		in.Attempts[i] = attemptFromItem(a)
	}
	if it.Resolutions != nil {
		in.Resolutions = make([]core.Resolution, len(it.Resolutions))
		for i, r := range it.Resolutions {
			in.Resolutions[i] = resolutionFromItem(r)
		}
	}
	in.History = historyFromItem(it.History)
	return in
}

// ---- registry ----

type grantItem struct {
	ID       string   `dynamodbav:"id"`
	Version  int64    `dynamodbav:"version"`
	Bot      string   `dynamodbav:"bot"`
	Provider string   `dynamodbav:"provider"`
	Account  string   `dynamodbav:"account"`
	Actions  []string `dynamodbav:"actions"`
	Targets  []string `dynamodbav:"targets"`
	// grantExpiresAt, not expiresAt: the table's TTL attribute is expiresAt
	// and an expired grant must stay readable (it explains why intents were
	// blocked).
	ExpiresAt    *time.Time `dynamodbav:"grantExpiresAt,omitempty"`
	RevokedAt    *time.Time `dynamodbav:"revokedAt,omitempty"`
	RevokedBy    string     `dynamodbav:"revokedBy,omitempty"`
	RevokeReason string     `dynamodbav:"revokeReason,omitempty"`
	CreatedAt    time.Time  `dynamodbav:"createdAt"`
	UpdatedAt    time.Time  `dynamodbav:"updatedAt"`
	UpdatedBy    string     `dynamodbav:"updatedBy,omitempty"`
}

func grantToItem(g *core.Grant) grantItem {
	return grantItem{ID: g.ID, Version: g.Version, Bot: g.Bot, Provider: g.Provider, Account: g.Account, Actions: g.Actions,
		Targets: g.Targets, ExpiresAt: g.ExpiresAt, RevokedAt: g.RevokedAt, RevokedBy: g.RevokedBy, RevokeReason: g.RevokeReason,
		CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt, UpdatedBy: g.UpdatedBy}
}

func grantFromItem(g *grantItem) *core.Grant {
	return &core.Grant{ID: g.ID, Version: g.Version, Bot: g.Bot, Provider: g.Provider, Account: g.Account, Actions: g.Actions,
		Targets: g.Targets, ExpiresAt: g.ExpiresAt, RevokedAt: g.RevokedAt, RevokedBy: g.RevokedBy, RevokeReason: g.RevokeReason,
		CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt, UpdatedBy: g.UpdatedBy}
}

type withdrawalItem struct {
	Reason string    `dynamodbav:"reason"`
	At     time.Time `dynamodbav:"at"`
	By     string    `dynamodbav:"by"`
}

type capabilityItem struct {
	Provider          string                    `dynamodbav:"provider"`
	Account           string                    `dynamodbav:"account"`
	AccountWithdrawal *withdrawalItem           `dynamodbav:"accountWithdrawal,omitempty"`
	Actions           map[string]withdrawalItem `dynamodbav:"withdrawnActions,omitempty"`
	Version           int64                     `dynamodbav:"version"`
	UpdatedAt         time.Time                 `dynamodbav:"updatedAt"`
	UpdatedBy         string                    `dynamodbav:"updatedBy,omitempty"`
}

func capabilityToItem(c *core.Capability) capabilityItem {
	it := capabilityItem{Provider: c.Provider, Account: c.Account, Version: c.Version, UpdatedAt: c.UpdatedAt, UpdatedBy: c.UpdatedBy}
	if w := c.AccountWithdrawal; w != nil {
		it.AccountWithdrawal = &withdrawalItem{Reason: w.Reason, At: w.At, By: w.By}
	}
	if c.Actions != nil {
		it.Actions = make(map[string]withdrawalItem, len(c.Actions))
		for k, w := range c.Actions {
			it.Actions[k] = withdrawalItem{Reason: w.Reason, At: w.At, By: w.By}
		}
	}
	return it
}

func capabilityFromItem(it *capabilityItem) *core.Capability {
	c := &core.Capability{Provider: it.Provider, Account: it.Account, Version: it.Version, UpdatedAt: it.UpdatedAt, UpdatedBy: it.UpdatedBy}
	if w := it.AccountWithdrawal; w != nil {
		c.AccountWithdrawal = &core.Withdrawal{Reason: w.Reason, At: w.At, By: w.By}
	}
	if it.Actions != nil {
		c.Actions = make(map[string]core.Withdrawal, len(it.Actions))
		for k, w := range it.Actions {
			c.Actions[k] = core.Withdrawal{Reason: w.Reason, At: w.At, By: w.By}
		}
	}
	return c
}

type sourceItem struct {
	Bot       string    `dynamodbav:"bot"`
	ID        string    `dynamodbav:"sourceId"`
	Revision  int64     `dynamodbav:"revision"`
	Deleted   bool      `dynamodbav:"deleted"`
	UpdatedAt time.Time `dynamodbav:"updatedAt"`
}

func sourceFromItem(it *sourceItem) *core.SourceState {
	return &core.SourceState{Bot: it.Bot, ID: it.ID, Revision: it.Revision, Deleted: it.Deleted, UpdatedAt: it.UpdatedAt}
}

// ---- webhooks ----

// eventItem is the stored shape of an event's uniqueness item.
type eventItem struct {
	Provider   string     `dynamodbav:"provider"`
	Account    string     `dynamodbav:"account"`
	EventID    string     `dynamodbav:"eventId"`
	Kind       string     `dynamodbav:"kind"`
	Type       string     `dynamodbav:"type,omitempty"`
	State      string     `dynamodbav:"state"`
	IntentID   string     `dynamodbav:"intentId,omitempty"`
	MessageID  string     `dynamodbav:"messageId,omitempty"`
	Reason     string     `dynamodbav:"reason,omitempty"`
	ReceivedAt time.Time  `dynamodbav:"receivedAt"`
	BodyHash   string     `dynamodbav:"bodyHash,omitempty"`
	Raw        string     `dynamodbav:"raw,omitempty"`
	ClaimUntil *time.Time `dynamodbav:"claimUntil,omitempty"`
}

func eventToItem(r webhook.EventRecord) eventItem {
	return eventItem{Provider: r.Provider, Account: r.Account, EventID: r.EventID, Kind: string(r.Kind), Type: r.Type, State: r.State,
		IntentID: r.IntentID, MessageID: r.MessageID, Reason: r.Reason, ReceivedAt: r.ReceivedAt, BodyHash: r.BodyHash, Raw: r.Raw,
		ClaimUntil: r.ClaimUntil}
}

func eventFromItem(it *eventItem) *webhook.EventRecord {
	return &webhook.EventRecord{Provider: it.Provider, Account: it.Account, EventID: it.EventID, Kind: webhook.EventKind(it.Kind), Type: it.Type,
		State: it.State, IntentID: it.IntentID, MessageID: it.MessageID, Reason: it.Reason, ReceivedAt: it.ReceivedAt,
		BodyHash: it.BodyHash, Raw: it.Raw, ClaimUntil: it.ClaimUntil}
}
