// Package resolve decides what a person's decision does to an intent that
// needed one: the operators' rulings (reconcile, retry, accept-success,
// abandon), an orchestrator's recommendation, and the duplicate risk a human
// retry carries (Resolver). The decision vocabulary (core.Decision,
// core.Ruling, core.Recommendation, core.RetryRiskAccepted) stays in core,
// where the intent records it. It consumes core.
package resolve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/botharness/outbox/core"
)

// ErrNotNeedsHuman: a decision was made on an intent that is not waiting for one.
var ErrNotNeedsHuman = errors.New("intent is not waiting for a human decision")

// Reconciliation is what the resolver asks of the dispatcher: what the
// provider declares for an intent, and a reconciliation when an operator
// asks for one.
type Reconciliation interface {
	Capabilities(ctx context.Context, in *core.Intent) core.Capabilities
	Reconcile(ctx context.Context, id string) error
	// ReconcileDue is when the next reconciliation of in is due.
	ReconcileDue(in *core.Intent) time.Time
}

// Resolver applies human decisions. Only operators decide; orchestrators may
// recommend; bots may do neither. History is only ever appended to.
type Resolver struct {
	Store     core.IntentStore
	Reconcile Reconciliation
	Clock     core.Clock
	// Gate refuses a human-authorised retry that revalidation would block
	// (grant expired or revoked, source revised). Nil means no gate.
	Gate core.Revalidator
	// Pages reads moved history: a decision's Idempotency-Key is checked
	// against the resolutions moved to pages too.
	Pages core.HistoryPages
	Log   *slog.Logger
}

func (r *Resolver) log() *slog.Logger { return cmp.Or(r.Log, slog.Default()) }

func validDecision(d core.Decision) bool {
	switch d {
	case core.DecisionReconcile, core.DecisionRetry, core.DecisionAcceptSuccess, core.DecisionAbandon:
		return true
	}
	return false
}

// Resolve records an operator's decision and carries it out. key, when not
// empty, makes the request idempotent: a repeat returns the current intent
// without deciding again.
func (r *Resolver) Resolve(ctx context.Context, p core.Principal, id, key string, req core.Ruling) (*core.Intent, error) {
	switch p.Kind {
	case core.PrincipalOperator:
	case core.PrincipalOrchestrator:
		return nil, fmt.Errorf("%w: an orchestrator may recommend but cannot decide", core.ErrForbidden)
	default:
		return nil, fmt.Errorf("%w: only operators resolve intents", core.ErrForbidden)
	}
	if !validDecision(req.Decision) {
		return nil, &core.ValidationError{Code: core.CodeInvalidField, Field: "decision", Message: "decision must be reconcile, retry, accept-success or abandon"}
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, &core.ValidationError{Code: core.CodeInvalidField, Field: "reason", Message: "a reason is required for every decision"}
	}
	if err := checkFields("reason", req.Reason, "externalId", req.ExternalID); err != nil {
		return nil, err
	}
	if req.ExternalID != "" && req.Decision != core.DecisionAcceptSuccess {
		return nil, &core.ValidationError{Code: core.CodeInvalidField, Field: "externalId", Message: "externalId only goes with accept-success"}
	}
	for tries := 1; ; tries++ {
		in, err := r.resolve(ctx, p, id, key, req)
		if errors.Is(err, errHistoryMoved) {
			if tries < 3 {
				continue // read the pages the decision's key may have moved to
			}
			return nil, fmt.Errorf("%w: %v", core.ErrConflict, err)
		}
		return in, err
	}
}

// resolve is one try of Resolve, after its checks of the request.
func (r *Resolver) resolve(ctx context.Context, p core.Principal, id, key string, req core.Ruling) (*core.Intent, error) {
	cur, err := r.Store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if cur.Pruned != nil {
		// Past its window only the tombstone is left (its decisions too).
		return nil, fmt.Errorf("intent %s: %w", id, core.ErrPruned)
	}
	seen, err := r.replayed(ctx, cur, key)
	if err != nil {
		return nil, err
	}
	if seen {
		return cur, nil
	}
	checkedPages := spilledPages(cur)
	if cur.Status != core.StatusNeedsHuman {
		return nil, fmt.Errorf("%w: it is %s", ErrNotNeedsHuman, cur.Status)
	}
	var caps core.Capabilities
	if req.Decision == core.DecisionRetry {
		caps = r.Reconcile.Capabilities(ctx, cur)
	}
	if req.Decision == core.DecisionRetry && r.Gate != nil {
		_, blocked, err := r.Gate.Revalidate(ctx, cur)
		if err != nil {
			return nil, fmt.Errorf("revalidate before retry: %w", err)
		}
		if blocked != nil {
			return nil, &RefusedError{Reason: blocked.Reason, Status: blocked.Status}
		}
	}
	now := r.Clock.Now()
	stored, err := r.Store.Update(ctx, id, func(in *core.Intent) error {
		if core.KeyRecorded(in, nil, key) {
			return errReplayed
		}
		if key != "" && spilledPages(in) != checkedPages {
			// Resolutions moved to a page not checked above since the read:
			// the key may be among them.
			return errHistoryMoved
		}
		if in.Status != core.StatusNeedsHuman {
			return fmt.Errorf("%w: it is %s", ErrNotNeedsHuman, in.Status)
		}
		res := core.Resolution{At: now, By: p.Name, ByKind: p.Kind, Decision: string(req.Decision), Reason: req.Reason, Key: key}
		var to core.Status
		var why string
		switch req.Decision {
		case core.DecisionReconcile:
			to, why = core.StatusUnknownOutcome, "operator asked to reconcile again"
		case core.DecisionRetry:
			// Sends after uncertainty (docs/decisions.md): a retry the provider
			// cannot deduplicate goes ahead only when the operator accepted the
			// duplicate risk explicitly; the record says who did.
			v := core.DecideResend(core.ResendCase{Uncertain: true, HumanAuthorised: true, Caps: caps, First: in.FirstAttemptAt, SendBy: now})
			if !core.RetryRiskAccepted(v, req.AcceptDuplicateRisk) {
				return core.ErrDuplicateRiskNotAccepted
			}
			res.DuplicateRiskAccepted = v == core.ResendAuthorised
			to, why = core.StatusPending, "retry authorised by operator "+p.Name
		case core.DecisionAcceptSuccess:
			if req.ExternalID != "" {
				in.ExternalID = req.ExternalID
			}
			to, why = core.StatusSucceeded, "success accepted by operator "+p.Name
		default:
			to, why = core.StatusAbandoned, "abandoned by operator "+p.Name
		}
		in.AppendResolution(res)
		if err := in.MoveTo(to, why, now); err != nil {
			return err
		}
		if to == core.StatusUnknownOutcome {
			due := r.Reconcile.ReconcileDue(in)
			in.NextAttemptAt = &due
		}
		return nil
	})
	if errors.Is(err, errReplayed) {
		return r.Store.Get(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	r.log().InfoContext(ctx, "human decision recorded", "intent", id, "bot", stored.Bot, "attempt", stored.AttemptCount,
		"decision", string(req.Decision), "operator", p.Name, "status", string(stored.Status))
	if req.Decision == core.DecisionReconcile {
		if err := r.Reconcile.Reconcile(ctx, id); err != nil {
			return nil, err
		}
		return r.Store.Get(ctx, id)
	}
	// A retry goes out through the stream (pending); nothing else to do here.
	return stored, nil
}

var (
	errReplayed     = errors.New("resolution already recorded under this key")
	errHistoryMoved = errors.New("resolutions moved to a history page while deciding")
)

// replayed reports whether a decision under key is already recorded on in,
// inline or on the history pages its older resolutions moved to.
func (r *Resolver) replayed(ctx context.Context, in *core.Intent, key string) (bool, error) {
	if key == "" || core.KeyRecorded(in, nil, key) {
		return key != "", nil
	}
	if in.History == nil || in.History.SpilledResolutions == 0 {
		return false, nil
	}
	if r.Pages == nil {
		return false, fmt.Errorf("intent %s: its older resolutions are on history pages and the resolver has no page reader", in.ID)
	}
	pages, err := r.Pages.HistoryPages(ctx, in.ID, 1, in.History.Pages)
	if err != nil {
		return false, fmt.Errorf("read the moved resolutions of %s: %w", in.ID, err)
	}
	return core.KeyRecorded(in, pages, key), nil
}

// RetryRisk is what an operator must know before retrying an intent.
type RetryRisk struct {
	// DuplicateRisk: a retry may cause a second effect at the provider.
	DuplicateRisk bool
	// Why, in words an operator reads.
	Why          string
	Capabilities core.Capabilities
}

// RetryRisk tells whether retrying id now could duplicate its effect.
func (r *Resolver) RetryRisk(ctx context.Context, id string) (*core.Intent, RetryRisk, error) {
	in, err := r.Store.Get(ctx, id)
	if err != nil {
		return nil, RetryRisk{}, err
	}
	caps := r.Reconcile.Capabilities(ctx, in)
	risk := RetryRisk{Capabilities: caps}
	// The same rule Resolve records the decision with, asked before anyone
	// has authorised the retry.
	switch v := core.DecideResend(core.ResendCase{Uncertain: true, Caps: caps, First: in.FirstAttemptAt, SendBy: r.Clock.Now()}); v {
	case core.ResendCovered, core.ResendSafe:
		risk.Why = "the provider deduplicates by this intent's idempotency key, which is still within its retention: a retry cannot cause a second effect"
	default:
		risk.DuplicateRisk = true
		risk.Why = v.Reason()
	}
	return in, risk, nil
}

// Recommend attaches an orchestrator's (or operator's) recommendation. It
// changes no status: only a human decision does.
func (r *Resolver) Recommend(ctx context.Context, p core.Principal, id string, req core.Recommendation) (*core.Intent, error) {
	if p.Kind != core.PrincipalOrchestrator && p.Kind != core.PrincipalOperator {
		return nil, fmt.Errorf("%w: only orchestrators and operators recommend", core.ErrForbidden)
	}
	if !validDecision(req.Decision) {
		return nil, &core.ValidationError{Code: core.CodeInvalidField, Field: "decision", Message: "decision must be reconcile, retry, accept-success or abandon"}
	}
	if strings.TrimSpace(req.Summary) == "" {
		return nil, &core.ValidationError{Code: core.CodeInvalidField, Field: "summary", Message: "a summary is required"}
	}
	if err := core.CheckFieldLength("summary", req.Summary); err != nil {
		return nil, err
	}
	now := r.Clock.Now()
	return r.Store.Update(ctx, id, func(in *core.Intent) error {
		if in.Status != core.StatusNeedsHuman {
			return fmt.Errorf("%w: it is %s", ErrNotNeedsHuman, in.Status)
		}
		in.AppendResolution(core.Resolution{At: now, By: p.Name, ByKind: p.Kind, Decision: string(req.Decision), Reason: req.Summary, Recommend: true})
		in.UpdatedAt = now
		return nil
	})
}

// RefusedError: a decision that revalidation forbids (e.g. a retry whose
// grant has expired). Nothing was changed.
type RefusedError struct {
	Status core.Status
	Reason string
}

func (e *RefusedError) Error() string { return "refused: " + e.Reason }

// spilledPages is how many history pages an intent has (as core counts them).
func spilledPages(in *core.Intent) int {
	if in.History == nil {
		return 0
	}
	return in.History.Pages
}

// checkFields applies core.CheckFieldLength to name/value pairs in order and
// returns the first refusal.
func checkFields(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := core.CheckFieldLength(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}
