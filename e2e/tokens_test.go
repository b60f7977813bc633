package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/client"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
)

// probe answers 404 for a usable bot token (no such intent) and the
// gateway's 403 for a refused one.
func (e *env) tokenUsable(secret string) bool {
	e.t.Helper()
	r := e.do("GET", "/v1/intents/it_nosuchintent", secret, nil, "")
	switch r.status {
	case http.StatusNotFound:
		return true
	case http.StatusForbidden:
		return false
	}
	e.t.Fatalf("probe: %d %s", r.status, r.body)
	return false
}

// Issue 24 finding 4: a revoked token is refused by the authorizer within
// its cache TTL, an expired one at its expiry (the cached record carries
// it), and the admin API lists tokens to operators without secrets or hashes.
func TestRevokedTokenIsRefusedWithinTheCacheTTL(t *testing.T) {
	t.Parallel()
	// The short token lives 3 s, the cache keeps a record 4 s: it is cached
	// while fresh (its first use comes within its lifetime even on a loaded
	// machine, where an issue and a first probe took over 1.5 s) and still
	// cached when it expires.
	const ttl, lifetime = 4 * time.Second, 3 * time.Second
	e := newEnv(t, options{Config: wire.Config{RequestCacheTTL: ttl}})
	ctx := context.Background()
	now := time.Now()
	secret, tok, err := auth.IssueToken(ctx, e.st.App.Tokens, auth.TokenIssue{Kind: core.PrincipalBot, Owner: testBot}, now)
	if err != nil {
		t.Fatal(err)
	}
	expiresAt := now.Add(lifetime)
	shortSecret, _, err := auth.IssueToken(ctx, e.st.App.Tokens, auth.TokenIssue{Kind: core.PrincipalBot, Owner: testBot, ExpiresAt: &expiresAt}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !e.tokenUsable(shortSecret) || !e.tokenUsable(secret) { // both now cached for ttl
		t.Fatal("fresh tokens refused")
	}

	// The expiring token is refused from its expiry on, while its record is
	// still cached (cached at its first use, for ttl > its lifetime): every
	// probe it passed was sent before its expiry (the server checks after
	// the probe is sent, so a pass of a probe sent later is a late refusal;
	// measured at the probe's start, a slow request cannot fail this).
	var lastPassSent time.Time
	e.eventually(lifetime+2*time.Second, "the expired token is refused", func() bool {
		sent := time.Now()
		if e.tokenUsable(shortSecret) {
			lastPassSent = sent
			return false
		}
		return true
	})
	if !lastPassSent.Before(expiresAt) { // zero (no pass in the loop) is before it
		t.Fatalf("the expired token passed a probe sent %v after its expiry", lastPassSent.Sub(expiresAt))
	}

	// Listing: operators only, and nothing of a secret.
	admin := client.New(e.api.URL, opToken).Admin()
	page, err := admin.Tokens(ctx, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, it := range page.Items {
		found = found || it.ID == tok.ID && it.Kind == core.PrincipalBot && it.Owner == testBot && it.Status == "active"
	}
	if !found {
		t.Fatalf("the token is not listed: %+v", page.Items)
	}
	raw := e.do("GET", "/v1/admin/tokens?limit=100", opToken, nil, "")
	for _, s := range []string{secret, auth.TokenHash(secret), shortSecret, auth.TokenHash(shortSecret), auth.TokenHash(opToken)} {
		if strings.Contains(string(raw.body), s) {
			t.Fatalf("the token list shows a secret or a hash: %s", raw.body)
		}
	}
	for _, who := range []string{orchToken, botToken} {
		if r := e.do("GET", "/v1/admin/tokens", who, nil, ""); r.status != http.StatusForbidden {
			t.Fatalf("token list for a non-operator: %d", r.status)
		}
		if r := e.do("POST", "/v1/admin/tokens/"+tok.ID+"/revoke", who, nil, `{"reason":"x"}`); r.status != http.StatusForbidden {
			t.Fatalf("revoke by a non-operator: %d", r.status)
		}
	}
	if r := e.do("POST", "/v1/admin/tokens/tok_nosuchtoken/revoke", opToken, nil, `{"reason":"x"}`); r.status != http.StatusNotFound {
		t.Fatalf("revoking a missing token: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/admin/tokens/"+tok.ID+"/revoke", opToken, nil, `{"reason":""}`); r.status != http.StatusBadRequest || r.errorCode() != "invalid_field" {
		t.Fatalf("revoking without a reason: %d %s", r.status, r.body)
	}

	// Revoke through the API: refused within the TTL (polled with a deadline).
	revoked, err := admin.RevokeToken(ctx, tok.ID, "laptop stolen")
	if err != nil || revoked.Status != "revoked" || revoked.RevokedAt == nil {
		t.Fatalf("revoke: %+v %v", revoked, err)
	}
	at := time.Now()
	e.eventually(ttl+time.Second, "the revoked token is refused", func() bool { return !e.tokenUsable(secret) })
	if took := time.Since(at); took > ttl+500*time.Millisecond {
		t.Fatalf("the revoked token worked for %v after its revocation (cache TTL %v)", took, ttl)
	}
	for i := 0; i < 3; i++ {
		if e.tokenUsable(secret) || e.tokenUsable(shortSecret) {
			t.Fatal("a refused token was accepted again")
		}
	}
	var listed client.TokenPage
	r := e.do("GET", "/v1/admin/tokens?limit=100", opToken, nil, "")
	if err := json.Unmarshal(r.body, &listed); err != nil {
		t.Fatal(err)
	}
	for _, it := range listed.Items {
		if it.ID == tok.ID && (it.Status != "revoked" || it.RevokeReason != "laptop stolen") {
			t.Fatalf("listed after revocation: %+v", it)
		}
	}
}
