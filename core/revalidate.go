package core

// Revalidation (issue 4): before every attempt — first attempts, automatic
// retries, reconciliation-driven retries and human-authorised retries alike,
// since all of them go through Dispatcher.Attempt — the dispatcher checks that
// the side effect is still authorised and current:
//
//   - the Service Grant the intent names still exists, is issued to the bot,
//     is neither expired nor revoked and still covers provider, account,
//     action and target (a newer grant version that still covers the intent
//     does not revoke it) — otherwise grant-revoked;
//   - the Provider Capability for the account and action has not been
//     withdrawn by an operator — otherwise grant-revoked, reason recorded;
//   - the Source Revision the intent answers is still the current one and the
//     source was not deleted — otherwise source-revised.
//
// The deadline is checked by the claim itself. Every check reads the current
// facts in one round trip (FactReader); the result, the reason and the grant
// version and source revision seen are recorded on the attempt (Checks).
//
// Scoping rules:
//
//   - Grant ids are global (the admin API addresses /v1/admin/grants/{grantId}).
//     A grant names the bot it is issued to; an intent may only use a grant
//     whose bot matches the submitting bot. Bot, account, actions and targets
//     are scope patterns: "*" matches everything, "prefix*" matches values
//     starting with prefix, anything else matches only itself. Provider is
//     exact.
//   - Sources are scoped to a bot: intent.Source.ID is resolved in the
//     namespace of intent.Bot, and PUT /v1/sources/{sourceId} by a bot
//     records revisions in that bot's namespace only. A bot can neither read
//     nor move another bot's sources.
//   - A source the registry has never heard of is not "revised": bots that do
//     not report revisions are not blocked.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrGrantRevoked: an operation on a grant that has been revoked. Revocation
// is final for a grant id; issue a new grant under a new id instead.
var ErrGrantRevoked = errors.New("grant is revoked")

// Revalidation check results recorded in Checks.Result.
const (
	CheckOK = "ok"
)

// Grant is a Service Grant: what a bot may do with a provider account.
type Grant struct {
	ID       string   `json:"id"`
	Version  int64    `json:"version"`
	Bot      string   `json:"bot"`
	Provider string   `json:"provider"`
	Account  string   `json:"account"`
	Actions  []string `json:"actions"`
	Targets  []string `json:"targets"`
	// ExpiresAt is stored as grantExpiresAt: the table's TTL attribute is
	// "expiresAt" and an expired grant must stay readable (it explains why
	// intents were blocked).
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
	RevokedAt    *time.Time `json:"revokedAt,omitempty"`
	RevokedBy    string     `json:"revokedBy,omitempty"`
	RevokeReason string     `json:"revokeReason,omitempty"`
	CreatedAt    time.Time  `json:"createdAt"`
	UpdatedAt    time.Time  `json:"updatedAt"`
	UpdatedBy    string     `json:"updatedBy,omitempty"`
}

// MatchScope reports whether value is allowed by pattern: "*" allows every
// value, "prefix*" every value that starts with prefix, anything else only
// itself.
func MatchScope(pattern, value string) bool {
	if strings.HasSuffix(pattern, "*") {
		return strings.HasPrefix(value, pattern[:len(pattern)-1])
	}
	return pattern == value
}

func matchAny(patterns []string, value string) bool {
	for _, p := range patterns {
		if MatchScope(p, value) {
			return true
		}
	}
	return false
}

// Problem says why the grant does not authorise the intent at now, or ""
// when it does. Version ordering is the caller's concern (intake and attempt
// treat it differently).
func (g *Grant) Problem(in *Intent, now time.Time) string {
	switch {
	case !MatchScope(g.Bot, in.Bot):
		return fmt.Sprintf("grant %q does not exist or is not issued to bot %q", g.ID, in.Bot)
	case g.RevokedAt != nil:
		r := fmt.Sprintf("grant %q was revoked at %s", g.ID, g.RevokedAt.UTC().Format(time.RFC3339))
		if g.RevokedBy != "" {
			r += " by " + g.RevokedBy
		}
		if g.RevokeReason != "" {
			r += ": " + g.RevokeReason
		}
		return r
	case g.ExpiresAt != nil && !now.Before(*g.ExpiresAt):
		return fmt.Sprintf("grant %q expired at %s", g.ID, g.ExpiresAt.UTC().Format(time.RFC3339))
	case g.Provider != in.Provider:
		return fmt.Sprintf("grant %q (version %d) is for provider %q, not %q", g.ID, g.Version, g.Provider, in.Provider)
	case !MatchScope(g.Account, in.Account):
		return fmt.Sprintf("grant %q (version %d) does not cover account %q", g.ID, g.Version, in.Account)
	case !matchAny(g.Actions, in.Action):
		return fmt.Sprintf("grant %q (version %d) does not cover action %q", g.ID, g.Version, in.Action)
	case !matchAny(g.Targets, in.Target):
		return fmt.Sprintf("grant %q (version %d) does not cover target %q", g.ID, g.Version, in.Target)
	}
	return ""
}

// Withdrawal is an operator's withdrawal of a capability.
type Withdrawal struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	By     string    `json:"by"`
}

// Capability is the operator-controlled state of a provider account: the
// whole account, or single actions on it, may be withdrawn (maintenance,
// compliance). No record means nothing is withdrawn.
type Capability struct {
	Provider string `json:"provider"`
	Account  string `json:"account"`
	// AccountWithdrawal is the whole-account withdrawal, if any.
	AccountWithdrawal *Withdrawal `json:"accountWithdrawal,omitempty"`
	// Actions withdrawn individually, by action.
	Actions   map[string]Withdrawal `json:"withdrawnActions,omitempty"`
	Version   int64                 `json:"version"`
	UpdatedAt time.Time             `json:"updatedAt"`
	UpdatedBy string                `json:"updatedBy,omitempty"`
}

// Blocks says why the capability forbids action, or "".
func (c *Capability) Blocks(action string) string {
	if c == nil {
		return ""
	}
	if w := c.AccountWithdrawal; w != nil {
		return fmt.Sprintf("provider capability withdrawn for %s account %q at %s by %s: %s", c.Provider, c.Account, w.At.UTC().Format(time.RFC3339), w.By, w.Reason)
	}
	if w, ok := c.Actions[action]; ok {
		return fmt.Sprintf("provider capability withdrawn for action %q on %s account %q at %s by %s: %s", action, c.Provider, c.Account, w.At.UTC().Format(time.RFC3339), w.By, w.Reason)
	}
	return ""
}

// SourceState is the current revision of a source a bot answers.
type SourceState struct {
	Bot       string
	ID        string
	Revision  int64
	Deleted   bool
	UpdatedAt time.Time
}

// RevalidationFacts is everything revalidation reads for one intent. A nil
// field means the item does not exist.
type RevalidationFacts struct {
	Grant      *Grant
	Capability *Capability
	Source     *SourceState // always nil when the intent names no source
}

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

// Revalidation implements the dispatcher's Revalidator, the resolver's
// Gate and intake's IntakeAuthorizer.
type Revalidation struct {
	Facts  FactReader
	Grants GrantReader
	// Intents, when set, lets a replay of an intent that was accepted before
	// its grant stopped covering it get the stored answer (Idempotent-Replayed)
	// instead of a 403: the read costs one GetItem, on refusals only.
	Intents IntentStore
	Clock   Clock
}

var (
	_ Revalidator      = (*Revalidation)(nil)
	_ IntakeAuthorizer = (*Revalidation)(nil)
)

// Revalidate checks grant, capability and source revision for the next
// attempt of in. It never writes.
func (r *Revalidation) Revalidate(ctx context.Context, in *Intent) (*Checks, *Blocked, error) {
	f, err := r.Facts.ReadFacts(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	checks, blocked := Evaluate(in, f, r.Clock.Now())
	return checks, blocked, nil
}

// Evaluate decides revalidation from the facts. Pure. Authorisation is
// checked before currency: a revoked grant is reported as such even if the
// source also moved on.
func Evaluate(in *Intent, f RevalidationFacts, now time.Time) (*Checks, *Blocked) {
	c := &Checks{Result: CheckOK}
	if f.Grant != nil {
		c.GrantVersion = f.Grant.Version
	}
	if f.Source != nil {
		c.SourceRevision = f.Source.Revision
	}
	block := func(s Status, reason string) (*Checks, *Blocked) {
		c.Result, c.Reason = string(s), reason
		return c, &Blocked{Status: s, Reason: reason}
	}
	switch g := f.Grant; {
	case g == nil:
		return block(StatusGrantRevoked, fmt.Sprintf("grant %q no longer exists", in.Grant.ID))
	case g.Version < in.Grant.Version:
		return block(StatusGrantRevoked, fmt.Sprintf("grant %q is at version %d, older than version %d the intent was accepted under", g.ID, g.Version, in.Grant.Version))
	default:
		if p := g.Problem(in, now); p != "" {
			return block(StatusGrantRevoked, p)
		}
	}
	if p := f.Capability.Blocks(in.Action); p != "" {
		return block(StatusGrantRevoked, p)
	}
	if in.Source != nil && f.Source != nil {
		switch s := f.Source; {
		case s.Deleted:
			return block(StatusSourceRevised, fmt.Sprintf("source %q was deleted", in.Source.ID))
		case s.Revision > in.Source.Revision:
			return block(StatusSourceRevised, fmt.Sprintf("source %q is at revision %d; the intent answers revision %d", in.Source.ID, s.Revision, in.Source.Revision))
		}
	}
	return c, nil
}

// AuthorizeIntake refuses an intent its grant does not cover (wrapping
// ErrGrantDoesNotCover): no such grant, another bot's, another provider or
// account, action or target not covered, expired, revoked, or a grant version
// newer than the stored one. One GetItem.
func (r *Revalidation) AuthorizeIntake(ctx context.Context, bot string, in *Intent) error {
	g, err := r.Grants.GetGrant(ctx, in.Grant.ID)
	var problem string
	switch {
	case errors.Is(err, ErrNotFound):
		// The same words as "another bot's": grant ids do not leak across bots.
		problem = fmt.Sprintf("grant %q does not exist or is not issued to bot %q", in.Grant.ID, bot)
	case err != nil:
		return fmt.Errorf("read grant %s: %w", in.Grant.ID, err)
	case !MatchScope(g.Bot, bot):
		problem = fmt.Sprintf("grant %q does not exist or is not issued to bot %q", in.Grant.ID, bot)
	case in.Grant.Version > g.Version:
		problem = fmt.Sprintf("grant %q is at version %d; the intent names version %d", g.ID, g.Version, in.Grant.Version)
	default:
		problem = g.Problem(in, r.Clock.Now())
	}
	if problem == "" {
		return nil
	}
	if r.Intents != nil {
		// Already accepted under this identity with the same request: let the
		// conditional put find it and replay it (its attempt will be blocked).
		ex, err := r.Intents.Get(ctx, in.ID)
		if err == nil && ex.Bot == bot && ex.RequestHash == in.RequestHash {
			return nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			// Could not tell whether this is a replay: answer "try again"
			// (5xx), never a refusal a replay must not get.
			return fmt.Errorf("check for a replay of %s: %w", in.ID, err)
		}
	}
	return fmt.Errorf("%w: %s", ErrGrantDoesNotCover, problem)
}

// ---- operators: grants and capabilities ----

// GrantSpec is what an operator asks a grant to be (PUT /v1/admin/grants/{grantId}).
type GrantSpec struct {
	Bot       string
	Provider  string
	Account   string
	Actions   []string
	Targets   []string
	ExpiresAt *time.Time
	// ExpectedVersion, when given, must equal the stored version (0: the
	// grant must not exist yet). Without it the write is conditional on the
	// version the server read.
	ExpectedVersion *int64
}

// Revocation is an operator's revocation of a grant.
type Revocation struct {
	Reason          string
	ExpectedVersion *int64
}

// CapabilityChange withdraws or restores a provider account's capability.
// Withdrawn true with no actions withdraws the whole account; with actions,
// only those. Withdrawn false with no actions restores the whole account and
// every action; with actions, only those actions.
type CapabilityChange struct {
	Withdrawn *bool
	Actions   []string
	Reason    string
}

// Authority manages grants and capabilities for operators.
type Authority struct {
	Grants       GrantStore
	Capabilities CapabilityStore
	Providers    Providers
	Clock        Clock
}

func operatorOnly(p Principal, what string) error {
	if p.Kind != PrincipalOperator {
		return fmt.Errorf("%w: only operators %s", ErrForbidden, what)
	}
	return nil
}

// ValidateGrantID enforces 1-128 characters of [A-Za-z0-9._:-].
func ValidateGrantID(id string) error {
	if id == "" || len(id) > 128 {
		return invalid("grantId", "a grant id has 1 to 128 characters")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return invalid("grantId", "a grant id may hold only letters, digits and . _ : -")
		}
	}
	return nil
}

func validScope(field, p string) error {
	switch {
	case strings.TrimSpace(p) == "":
		return invalid(field, "%s must not be empty", field)
	case len(p) > 512:
		return invalid(field, "%s is longer than 512 bytes", field)
	case strings.Contains(strings.TrimSuffix(p, "*"), "*"):
		return invalid(field, "%s: '*' is allowed only at the end (\"*\" or \"prefix*\")", field)
	}
	return CheckID(field, p)
}

func (a *Authority) validateGrant(req *GrantSpec) error {
	for _, f := range []struct{ name, v string }{{"bot", req.Bot}, {"account", req.Account}} {
		if err := validScope(f.name, f.v); err != nil {
			return err
		}
	}
	if strings.TrimSpace(req.Provider) == "" {
		return invalid("provider", "provider is required")
	}
	var prov Provider
	if a.Providers != nil {
		p, ok := a.Providers.Provider(req.Provider)
		if !ok {
			return &ValidationError{Code: CodeUnknownProvider, Field: "provider", Message: fmt.Sprintf("no provider named %q", req.Provider)}
		}
		prov = p
	}
	if len(req.Actions) == 0 || len(req.Actions) > 100 {
		return invalid("actions", "actions must list 1 to 100 actions or patterns")
	}
	for _, act := range req.Actions {
		if err := validScope("actions", act); err != nil {
			return err
		}
		if prov != nil && !strings.HasSuffix(act, "*") && !prov.SupportsAction(act) {
			return &ValidationError{Code: CodeUnknownAction, Field: "actions", Message: fmt.Sprintf("provider %q has no action %q", req.Provider, act)}
		}
	}
	if len(req.Targets) == 0 || len(req.Targets) > 1000 {
		return invalid("targets", "targets must list 1 to 1000 target ids or patterns")
	}
	for _, t := range req.Targets {
		if err := validScope("targets", t); err != nil {
			return err
		}
	}
	return nil
}

// GetGrant returns a grant.
func (a *Authority) GetGrant(ctx context.Context, p Principal, id string) (*Grant, error) {
	if err := operatorOnly(p, "read grants"); err != nil {
		return nil, err
	}
	return a.Grants.GetGrant(ctx, id)
}

// ListGrants pages through grants.
func (a *Authority) ListGrants(ctx context.Context, p Principal, bot, cursor string, limit int) ([]*Grant, string, error) {
	if err := operatorOnly(p, "list grants"); err != nil {
		return nil, "", err
	}
	return a.Grants.ListGrants(ctx, bot, cursor, limit)
}

// PutGrant creates a grant (version 1) or replaces it with version+1. The
// write is conditional on the version read (or the one the caller expects).
// A revoked grant cannot be replaced (ErrGrantRevoked): revocation is final.
func (a *Authority) PutGrant(ctx context.Context, p Principal, id string, req GrantSpec) (g *Grant, created bool, err error) {
	if err := operatorOnly(p, "manage grants"); err != nil {
		return nil, false, err
	}
	if err := ValidateGrantID(id); err != nil {
		return nil, false, err
	}
	if err := a.validateGrant(&req); err != nil {
		return nil, false, err
	}
	cur, err := a.Grants.GetGrant(ctx, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, false, err
	}
	var curVersion int64
	if cur != nil {
		curVersion = cur.Version
	}
	if req.ExpectedVersion != nil && *req.ExpectedVersion != curVersion {
		return nil, false, fmt.Errorf("%w: grant %s is at version %d, not %d", ErrConflict, id, curVersion, *req.ExpectedVersion)
	}
	if cur != nil && cur.RevokedAt != nil {
		return nil, false, fmt.Errorf("%w: %s was revoked at %s; issue a new grant under a new id", ErrGrantRevoked, id, cur.RevokedAt.UTC().Format(time.RFC3339))
	}
	now := a.Clock.Now()
	g = &Grant{
		ID: id, Version: curVersion + 1, Bot: req.Bot, Provider: req.Provider, Account: req.Account,
		Actions: req.Actions, Targets: req.Targets, CreatedAt: now, UpdatedAt: now, UpdatedBy: p.Name,
	}
	if req.ExpiresAt != nil {
		t := req.ExpiresAt.UTC()
		g.ExpiresAt = &t
	}
	if cur != nil {
		g.CreatedAt = cur.CreatedAt
	}
	if err := a.Grants.PutGrant(ctx, g, curVersion); err != nil {
		return nil, false, err
	}
	return g, cur == nil, nil
}

// RevokeGrant revokes a grant (version+1). Revoking a revoked grant changes
// nothing and returns it.
func (a *Authority) RevokeGrant(ctx context.Context, p Principal, id string, req Revocation) (*Grant, error) {
	if err := operatorOnly(p, "revoke grants"); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, invalid("reason", "a reason is required to revoke a grant")
	}
	if err := CheckFieldLength("reason", req.Reason); err != nil {
		return nil, err
	}
	cur, err := a.Grants.GetGrant(ctx, id)
	if err != nil {
		return nil, err
	}
	if req.ExpectedVersion != nil && *req.ExpectedVersion != cur.Version {
		return nil, fmt.Errorf("%w: grant %s is at version %d, not %d", ErrConflict, id, cur.Version, *req.ExpectedVersion)
	}
	if cur.RevokedAt != nil {
		return cur, nil
	}
	now := a.Clock.Now()
	g := *cur
	g.Version = cur.Version + 1
	g.RevokedAt, g.RevokedBy, g.RevokeReason = &now, p.Name, req.Reason
	g.UpdatedAt, g.UpdatedBy = now, p.Name
	if err := a.Grants.PutGrant(ctx, &g, cur.Version); err != nil {
		return nil, err
	}
	return &g, nil
}

// GetCapability returns the capability state of an account (an empty state,
// version 0, when nothing was ever withdrawn).
func (a *Authority) GetCapability(ctx context.Context, p Principal, provider, account string) (*Capability, error) {
	if err := operatorOnly(p, "read capabilities"); err != nil {
		return nil, err
	}
	c, err := a.Capabilities.GetCapability(ctx, provider, account)
	if errors.Is(err, ErrNotFound) {
		return &Capability{Provider: provider, Account: account}, nil
	}
	return c, err
}

// SetCapability withdraws or restores an account's capability or some of its
// actions. Attempts blocked while it was withdrawn stay blocked (grant-revoked
// is terminal); restoring only lets new attempts through.
func (a *Authority) SetCapability(ctx context.Context, p Principal, provider, account string, req CapabilityChange) (*Capability, error) {
	if err := operatorOnly(p, "withdraw or restore capabilities"); err != nil {
		return nil, err
	}
	if req.Withdrawn == nil {
		return nil, invalid("withdrawn", "withdrawn (true or false) is required")
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, invalid("reason", "a reason is required")
	}
	if err := CheckFieldLength("reason", req.Reason); err != nil {
		return nil, err
	}
	if strings.TrimSpace(account) == "" {
		return nil, invalid("account", "account must not be blank")
	}
	if err := CheckID("account", account); err != nil {
		return nil, err
	}
	if a.Providers != nil {
		prov, ok := a.Providers.Provider(provider)
		if !ok {
			return nil, &ValidationError{Code: CodeUnknownProvider, Field: "provider", Message: fmt.Sprintf("no provider named %q", provider)}
		}
		for _, act := range req.Actions {
			if !prov.SupportsAction(act) {
				return nil, &ValidationError{Code: CodeUnknownAction, Field: "actions", Message: fmt.Sprintf("provider %q has no action %q", provider, act)}
			}
		}
	}
	cur, err := a.Capabilities.GetCapability(ctx, provider, account)
	if errors.Is(err, ErrNotFound) {
		cur, err = &Capability{Provider: provider, Account: account}, nil
	}
	if err != nil {
		return nil, err
	}
	now := a.Clock.Now()
	next := *cur
	next.Actions = map[string]Withdrawal{}
	for k, v := range cur.Actions {
		next.Actions[k] = v
	}
	w := Withdrawal{Reason: req.Reason, At: now, By: p.Name}
	switch {
	case *req.Withdrawn && len(req.Actions) == 0:
		next.AccountWithdrawal = &w
	case *req.Withdrawn:
		for _, act := range req.Actions {
			next.Actions[act] = w
		}
	case len(req.Actions) == 0:
		next.AccountWithdrawal = nil
		next.Actions = nil
	default:
		for _, act := range req.Actions {
			delete(next.Actions, act)
		}
	}
	if len(next.Actions) == 0 {
		next.Actions = nil
	}
	next.Version = cur.Version + 1
	next.UpdatedAt, next.UpdatedBy = now, p.Name
	if err := a.Capabilities.PutCapability(ctx, &next, cur.Version); err != nil {
		return nil, err
	}
	return &next, nil
}

// ---- bots: source revisions ----

// SourceUpdate is a bot's report of a source's revision (PUT /v1/sources/{sourceId}).
type SourceUpdate struct {
	Revision *int64
	Deleted  bool
}

// SourceResult is the answer to a source update: the current state and
// whether this update changed it (false for an older revision: not an error).
type SourceResult struct {
	SourceState
	Applied bool
}

// Sources records the revisions of the sources bots answer.
type Sources struct {
	Store SourceStore
	Clock Clock
}

// Put records a source revision for the calling bot.
func (s *Sources) Put(ctx context.Context, p Principal, sourceID string, u SourceUpdate) (*SourceResult, error) {
	if p.Kind != PrincipalBot {
		return nil, fmt.Errorf("%w: only bots record source revisions (a source belongs to the bot that answers it)", ErrForbidden)
	}
	if err := CheckID("sourceId", sourceID); err != nil {
		return nil, err
	}
	if u.Revision == nil && !u.Deleted {
		return nil, invalid("revision", "revision is required (it may be omitted only with \"deleted\": true)")
	}
	if u.Revision != nil && *u.Revision < 0 {
		return nil, invalid("revision", "revision must not be negative")
	}
	st, applied, err := s.Store.AdvanceSource(ctx, p.Name, sourceID, u.Revision, u.Deleted, s.Clock.Now())
	if err != nil {
		return nil, err
	}
	return &SourceResult{SourceState: *st, Applied: applied}, nil
}
