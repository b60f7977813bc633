// Package registry decides the writes to what revalidation reads: the
// operators' grants and capability withdrawals (Authority) and the bots'
// source revisions (Sources). It consumes core, whose Revalidation reads the
// same records through the GrantReader and FactReader ports; the stores
// (core.GrantStore, core.CapabilityStore, core.SourceStore) stay core's ports.
package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/botharness/outbox/core"
)

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

// Authority manages grants and capabilities for operators.
type Authority struct {
	Grants       core.GrantStore
	Capabilities core.CapabilityStore
	Providers    core.Providers
	Clock        core.Clock
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
	return core.CheckID(field, p)
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
	var prov core.Provider
	if a.Providers != nil {
		p, ok := a.Providers.Provider(req.Provider)
		if !ok {
			return &core.ValidationError{Code: core.CodeUnknownProvider, Field: "provider", Message: fmt.Sprintf("no provider named %q", req.Provider)}
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
			return &core.ValidationError{Code: core.CodeUnknownAction, Field: "actions", Message: fmt.Sprintf("provider %q has no action %q", req.Provider, act)}
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
func (a *Authority) GetGrant(ctx context.Context, p core.Principal, id string) (*core.Grant, error) {
	if err := operatorOnly(p, "read grants"); err != nil {
		return nil, err
	}
	return a.Grants.GetGrant(ctx, id)
}

// ListGrants pages through grants.
func (a *Authority) ListGrants(ctx context.Context, p core.Principal, bot, cursor string, limit int) ([]*core.Grant, string, error) {
	if err := operatorOnly(p, "list grants"); err != nil {
		return nil, "", err
	}
	return a.Grants.ListGrants(ctx, bot, cursor, limit)
}

// PutGrant creates a grant (version 1) or replaces it with version+1. The
// write is conditional on the version read (or the one the caller expects).
// A revoked grant cannot be replaced (ErrGrantRevoked): revocation is final.
func (a *Authority) PutGrant(ctx context.Context, p core.Principal, id string, req GrantSpec) (g *core.Grant, created bool, err error) {
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
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, false, err
	}
	var curVersion int64
	if cur != nil {
		curVersion = cur.Version
	}
	if req.ExpectedVersion != nil && *req.ExpectedVersion != curVersion {
		return nil, false, fmt.Errorf("%w: grant %s is at version %d, not %d", core.ErrConflict, id, curVersion, *req.ExpectedVersion)
	}
	if cur != nil && cur.RevokedAt != nil {
		return nil, false, fmt.Errorf("%w: %s was revoked at %s; issue a new grant under a new id", core.ErrGrantRevoked, id, cur.RevokedAt.UTC().Format(time.RFC3339))
	}
	if GrantUnchanged(cur, req) {
		// Re-applying the same grant (a deploy script run again) changes
		// nothing: no new version, so nothing that names the grant moves.
		return cur, false, nil
	}
	now := a.Clock.Now()
	g = &core.Grant{
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

// GrantUnchanged reports whether req asks for exactly the stored grant cur
// (same bot, provider, account, actions, targets and expiry, in order): a PUT
// that changes nothing keeps the version (issue 50).
func GrantUnchanged(cur *core.Grant, req GrantSpec) bool {
	if cur == nil || cur.Bot != req.Bot || cur.Provider != req.Provider || cur.Account != req.Account ||
		!slices.Equal(cur.Actions, req.Actions) || !slices.Equal(cur.Targets, req.Targets) {
		return false
	}
	if cur.ExpiresAt == nil || req.ExpiresAt == nil {
		return cur.ExpiresAt == nil && req.ExpiresAt == nil
	}
	return cur.ExpiresAt.Equal(*req.ExpiresAt)
}

// RevokeGrant revokes a grant (version+1). Revoking a revoked grant changes
// nothing and returns it.
func (a *Authority) RevokeGrant(ctx context.Context, p core.Principal, id string, req Revocation) (*core.Grant, error) {
	if err := operatorOnly(p, "revoke grants"); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, invalid("reason", "a reason is required to revoke a grant")
	}
	if err := core.CheckFieldLength("reason", req.Reason); err != nil {
		return nil, err
	}
	cur, err := a.Grants.GetGrant(ctx, id)
	if err != nil {
		return nil, err
	}
	if req.ExpectedVersion != nil && *req.ExpectedVersion != cur.Version {
		return nil, fmt.Errorf("%w: grant %s is at version %d, not %d", core.ErrConflict, id, cur.Version, *req.ExpectedVersion)
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

func operatorOnly(p core.Principal, what string) error {
	if p.Kind != core.PrincipalOperator {
		return fmt.Errorf("%w: only operators %s", core.ErrForbidden, what)
	}
	return nil
}

func invalid(field, format string, args ...any) *core.ValidationError {
	return &core.ValidationError{Code: core.CodeInvalidField, Field: field, Message: fmt.Sprintf(format, args...)}
}
