// Package webhooksig verifies Standard Webhooks signatures
// (https://www.standardwebhooks.com): headers webhook-id, webhook-timestamp
// and webhook-signature; the signature is HMAC-SHA256 over
// "<id>.<timestamp>.<body>" with the base64 key of a "whsec_" secret,
// sent as space-separated "v1,<base64>" entries so a sender can sign with
// several keys during a rotation.
//
// The HMAC and the constant-time comparison of every offered signature are
// done by the reference Go library
// (github.com/standard-webhooks/standard-webhooks/libraries/go, v0.0.1). This
// package adds what the library lacks: an injected clock for the ±5 minute
// tolerance (the library reads time.Now and a package-level tolerance), and
// several accepted secrets per provider account (our side of a rotation: the
// new secret is added, the old one removed once the provider stopped using it).
package webhooksig

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Standard Webhooks header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far a timestamp may be from our clock, either way.
const DefaultTolerance = 5 * time.Minute

// Why a request was refused. All of them mean 401 and nothing stored.
var (
	ErrMissingHeaders = errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	ErrBadTimestamp   = errors.New("webhook-timestamp is not a unix time")
	ErrStale          = errors.New("webhook-timestamp outside the tolerance")
	ErrNoSecret       = errors.New("no signing secret configured for this provider account")
	ErrBadSignature   = errors.New("no signature matches")
)

// SecretSource yields the signing secrets currently accepted for a provider
// account (more than one during a rotation). Locally they come from the
// environment (EnvSecrets); in AWS an implementation over Secrets Manager
// (the secret names arrive in OUTBOX_PROVIDER_SECRETS) plugs in here.
type SecretSource interface {
	Secrets(ctx context.Context, provider, account string) ([]string, error)
}

// StaticSecrets maps "provider/account" (or "provider/*" for every account of
// a provider) to accepted secrets.
type StaticSecrets map[string][]string

// Secrets implements SecretSource. An exact account entry wins over "provider/*".
func (s StaticSecrets) Secrets(_ context.Context, provider, account string) ([]string, error) {
	if v, ok := s[provider+"/"+account]; ok {
		return v, nil
	}
	return s[provider+"/*"], nil
}

// ParseSecrets reads the OUTBOX_WEBHOOK_SECRETS document:
// {"sandbox/acct-1": "whsec_...", "sandbox/acct-2": ["whsec_new", "whsec_old"]}.
// Every secret must be "whsec_" + standard base64 of a non-empty key.
func ParseSecrets(doc string) (StaticSecrets, error) {
	out := StaticSecrets{}
	if strings.TrimSpace(doc) == "" {
		return out, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc), &raw); err != nil {
		return nil, fmt.Errorf("webhook secrets: %w", err)
	}
	for k, v := range raw {
		prov, acct, ok := strings.Cut(k, "/")
		if !ok || prov == "" || acct == "" {
			return nil, fmt.Errorf("webhook secrets: key %q must be provider/account", k)
		}
		var list []string
		var one string
		if err := json.Unmarshal(v, &one); err == nil {
			list = []string{one}
		} else if err := json.Unmarshal(v, &list); err != nil {
			return nil, fmt.Errorf("webhook secrets: %s: want a secret or a list of secrets", k)
		}
		for _, s := range list {
			if err := CheckSecret(s); err != nil {
				return nil, fmt.Errorf("webhook secrets: %s: %w", k, err)
			}
		}
		out[k] = list
	}
	return out, nil
}

// CheckSecret reports whether s is a usable "whsec_<base64>" secret.
func CheckSecret(s string) error {
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return errors.New(`a secret must start with "whsec_"`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return errors.New("a secret must be whsec_ followed by standard base64 of a non-empty key")
	}
	return nil
}

// Verifier checks Standard Webhooks signatures.
type Verifier struct {
	Secrets   SecretSource
	Now       func() time.Time
	Tolerance time.Duration // default DefaultTolerance
}

// Verified is what a good signature establishes.
type Verified struct {
	ID        string
	Timestamp time.Time
}

// Verify authenticates body and headers (names case-insensitive) for a
// provider account. Any error means: reject with 401, store nothing.
func (v *Verifier) Verify(ctx context.Context, provider, account string, headers map[string]string, body []byte) (Verified, error) {
	h := http.Header{}
	for k, val := range headers {
		h.Set(k, val)
	}
	id, ts, sig := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sig == "" {
		return Verified{}, ErrMissingHeaders
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Verified{}, ErrBadTimestamp
	}
	at := time.Unix(secs, 0).UTC()
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tol := v.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	if d := now().Sub(at); d > tol || d < -tol {
		return Verified{}, fmt.Errorf("%w (%s off)", ErrStale, d.Round(time.Second))
	}
	secrets, err := v.Secrets.Secrets(ctx, provider, account)
	if err != nil {
		return Verified{}, fmt.Errorf("load secrets: %w", err)
	}
	if len(secrets) == 0 {
		return Verified{}, ErrNoSecret
	}
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			continue // ParseSecrets rejects these; never let one match
		}
		// The timestamp was checked above against our own clock.
		if wh.VerifyIgnoringTimestamp(body, h) == nil {
			return Verified{ID: id, Timestamp: at}, nil
		}
	}
	return Verified{}, ErrBadSignature
}

// Sign returns a webhook-signature header value with one "v1,<base64>" entry
// per secret (tests and the local tooling use it; the sandbox signs on its own).
func Sign(id string, at time.Time, body []byte, secrets ...string) (string, error) {
	var parts []string
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return "", err
		}
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			return "", err
		}
		parts = append(parts, sig)
	}
	return strings.Join(parts, " "), nil
}
