package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
)

// Admin is the operators' API (operator or orchestrator token). It shares
// its Client's transport and retry policy.
type Admin struct{ c *Client }

// Admin returns the operator sub-client.
func (c *Client) Admin() *Admin { return &Admin{c: c} }

// ListOptions filter the operators' list.
type ListOptions struct {
	Status Status // default needs-human
	Limit  int    // 1..100, default 50
	Cursor string // from a previous page
}

// List pages through intents by status.
func (a *Admin) List(ctx context.Context, o ListOptions) (*IntentPage, error) {
	q := url.Values{}
	if o.Status != "" {
		q.Set("status", string(o.Status))
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	path := "/v1/admin/intents"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return fetch[IntentPage](ctx, a.c, call{method: http.MethodGet, path: path, idempotent: true})
}

// Show reads an intent with every attempt, recommendation and decision.
func (a *Admin) Show(ctx context.Context, id string) (*Intent, error) {
	return fetch[Intent](ctx, a.c, call{method: http.MethodGet, path: "/v1/admin/intents/" + url.PathEscape(id), idempotent: true})
}

// History reads one slice of an intent's whole attempt and resolution
// history, oldest first (see Client.History).
func (a *Admin) History(ctx context.Context, id, cursor string) (*HistorySlice, error) {
	return history(ctx, a.c, "/v1/admin/intents/"+url.PathEscape(id)+"/history", cursor)
}

// Decisions a human may take on a needs-human intent.
const (
	DecisionReconcile     = "reconcile"
	DecisionRetry         = "retry"
	DecisionAcceptSuccess = "accept-success"
	DecisionAbandon       = "abandon"
)

// ResolutionRequest is a human decision.
type ResolutionRequest struct {
	Decision   string `json:"decision"`
	Reason     string `json:"reason"`
	ExternalID string `json:"externalId,omitempty"` // with accept-success
	// AcceptDuplicateRisk: a retry the provider cannot deduplicate (no keys,
	// or past their retention, and no lookup) goes ahead only with true;
	// false or nil is refused (409 duplicate_risk_not_accepted,
	// ErrDuplicateRiskNotAccepted). Not needed where the provider deduplicates.
	AcceptDuplicateRisk *bool `json:"acceptDuplicateRisk,omitempty"`
	// Key is the decision's Idempotency-Key. Default: derived from the
	// intent, decision, reason and external id, so the same decision sent
	// twice (a retried command) is one decision.
	Key string `json:"-"`
}

// DecisionKey is the default Idempotency-Key of a decision.
func DecisionKey(id string, r ResolutionRequest) string {
	sum := sha256.Sum256([]byte(id + "\x00" + r.Decision + "\x00" + r.Reason + "\x00" + r.ExternalID))
	return "cli-" + hex.EncodeToString(sum[:16])
}

// Resolve records a human decision on a needs-human intent. It is retried
// like Submit: same key, same bytes; the server answers a repeat with the
// first decision's result.
func (a *Admin) Resolve(ctx context.Context, id string, r ResolutionRequest) (*Intent, error) {
	key := r.Key
	if key == "" {
		key = DecisionKey(id, r)
	}
	if err := validKey(key); err != nil {
		return nil, err
	}
	return send[Intent](ctx, a.c, call{method: http.MethodPost, path: "/v1/admin/intents/" + url.PathEscape(id) + "/resolution",
		key: key, idempotent: true}, r)
}

// Recommend attaches a recommendation (orchestrators and operators); it
// changes no state. The route takes no Idempotency-Key and appends, so it is
// retried only when the server provably did not act (no connection, 429).
func (a *Admin) Recommend(ctx context.Context, id, decision, summary string) (*Intent, error) {
	return send[Intent](ctx, a.c, call{method: http.MethodPost, path: "/v1/admin/intents/" + url.PathEscape(id) + "/recommendation"},
		map[string]string{"decision": decision, "summary": summary})
}

// CreateBackup backs up one bot's outbox (its profile). Each call makes a
// new backup, so it is retried only when the server provably did not act.
func (a *Admin) CreateBackup(ctx context.Context, profile string) (*Manifest, error) {
	return send[Manifest](ctx, a.c, call{method: http.MethodPost, path: "/v1/admin/backups"}, map[string]string{"profile": profile})
}

// Backup reads a backup's verified manifest.
func (a *Admin) Backup(ctx context.Context, backupID string) (*Manifest, error) {
	return fetch[Manifest](ctx, a.c, call{method: http.MethodGet, path: "/v1/admin/backups/" + url.PathEscape(backupID), idempotent: true})
}

// Restore verifies a backup and restores it (running it twice gives the same
// state, so it is retried like a read).
func (a *Admin) Restore(ctx context.Context, backupID string) (*RestoreReport, error) {
	return send[RestoreReport](ctx, a.c, call{method: http.MethodPost, path: "/v1/admin/restores", idempotent: true}, map[string]string{"backupId": backupID})
}

// WhoAmI reads the calling principal. A bot's token is refused (403,
// errors.Is(err, ErrForbidden)): the admin API is not a bot's.
func (a *Admin) WhoAmI(ctx context.Context) (*WhoAmI, error) {
	return fetch[WhoAmI](ctx, a.c, call{method: http.MethodGet, path: "/v1/admin/whoami", idempotent: true})
}
