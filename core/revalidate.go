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
	"time"
)

// Revalidation check results recorded in Checks.Result.
const (
	CheckOK = "ok"
)

// RevalidationFacts is everything revalidation reads for one intent. A nil
// field means the item does not exist.
type RevalidationFacts struct {
	Grant      *Grant
	Capability *Capability
	Source     *SourceState // always nil when the intent names no source
}

// Revalidation implements the dispatcher's Revalidator, the resolver's
// Gate and intake's IntakeAuthorizer.
type Revalidation struct {
	Facts  FactReader
	Grants GrantReader
	Clock  Clock
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
	// A replay of an intent accepted before its grant stopped covering it is
	// answered from the stored intent by Intake (ReplayFirst), not here.
	return fmt.Errorf("%w: %s", ErrGrantDoesNotCover, problem)
}
