package wire

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
)

// SecretUse is what a provider secret is for. A function reads only the
// secrets of the uses it holds (EnvSecretUses), and the CDK stack grants it
// read access to exactly those secrets.
type SecretUse = plugin.SecretUse

const (
	// SecretForSending: credentials for calling a provider (bot tokens,
	// outbound signing secrets, bearer tokens): the functions that attempt
	// or look up (retrier, sweeper, admin's reconcile).
	SecretForSending = plugin.SendSecret
	// SecretForVerifying: secrets that verify a provider's webhooks (Slack
	// signing secret, Telegram secret token): the webhook function.
	SecretForVerifying = plugin.VerifySecret
)

// EnvSecretUses lists, comma separated, the SecretUses this function holds
// ("send", "verify"), or "none". Unset means every use (make run and the
// tests run everything in one process). The CDK stack sets it on every
// function that reads OUTBOX_PROVIDER_CONFIG.
const EnvSecretUses = "OUTBOX_SECRET_USES"

// SecretsManagerPrefix starts a Secrets Manager reference in
// OUTBOX_PROVIDER_CONFIG: "secretsmanager:<name or ARN>[#<json key>]".
const SecretsManagerPrefix = "secretsmanager:"

// ParseSecretUses parses EnvSecretUses; "" is every use (nil map).
func ParseSecretUses(v string) (map[SecretUse]bool, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	out := map[SecretUse]bool{}
	if v == "none" {
		return out, nil
	}
	for _, u := range strings.Split(v, ",") {
		switch su := SecretUse(strings.TrimSpace(u)); su {
		case SecretForSending, SecretForVerifying:
			out[su] = true
		default:
			return nil, fmt.Errorf("%s: unknown use %q (want send, verify or none)", EnvSecretUses, u)
		}
	}
	return out, nil
}

// SecretReader is the part of the Secrets Manager client the resolver uses.
type SecretReader interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SecretResolver turns configured secret values into secrets: literal
// values stay, "env:NAME" reads the environment, "secretsmanager:…" reads
// Secrets Manager (each secret once). A secret of a use not in Uses is
// withheld: it is not read at all and a random placeholder takes its place,
// and when sending is withheld the providers refuse to send or look up
// (withheld), so a function without credentials can still validate intents.
type SecretResolver struct {
	// Uses held; nil means every use.
	Uses map[SecretUse]bool
	// Reader reads Secrets Manager; nil makes a secretsmanager reference an error.
	Reader SecretReader

	cache map[string]string
}

func (r *SecretResolver) holds(u SecretUse) bool { return r.Uses == nil || r.Uses[u] }

func (r *SecretResolver) resolve(ctx context.Context, sec plugin.Secret) (string, error) {
	field, v := sec.Field, *sec.Value
	if v == "" {
		return "", nil
	}
	if !r.holds(sec.Use) && (sec.AlsoUse == "" || !r.holds(sec.AlsoUse)) {
		return placeholder(sec), nil
	}
	if name, ok := strings.CutPrefix(v, "env:"); ok {
		s := os.Getenv(name)
		if s == "" {
			return "", fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %s refers to environment variable %s, which is not set", field, name)
		}
		return s, nil
	}
	name, key, ok := SecretsManagerRef(v)
	if !ok {
		return v, nil
	}
	if r.Reader == nil {
		return "", fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %s refers to Secrets Manager secret %s, and there is no Secrets Manager client", field, name)
	}
	doc, cached := r.cache[name]
	if !cached {
		out, err := r.Reader.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
		if err != nil {
			return "", fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %s: read secret %s: %w", field, name, err)
		}
		doc = aws.ToString(out.SecretString)
		if r.cache == nil {
			r.cache = map[string]string{}
		}
		r.cache[name] = doc
	}
	if key == "" {
		if doc == "" {
			return "", fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %s: secret %s is empty", field, name)
		}
		return doc, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		// Not the value: json errors on a secret document could quote it.
		return "", fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %s: secret %s is not a JSON object (needed for #%s)", field, name, key)
	}
	s, _ := m[key].(string)
	if s == "" {
		return "", fmt.Errorf("OUTBOX_PROVIDER_CONFIG: %s: secret %s has no string member %q", field, name, key)
	}
	return s, nil
}

// SecretsManagerRef parses "secretsmanager:NAME" or "secretsmanager:NAME#KEY".
func SecretsManagerRef(v string) (name, key string, ok bool) {
	rest, ok := strings.CutPrefix(v, SecretsManagerPrefix)
	if !ok || rest == "" {
		return "", "", false
	}
	name, key, _ = strings.Cut(rest, "#")
	return name, key, name != ""
}

// placeholder stands in for a withheld secret: random, never configured,
// valid wherever the adapter validates the secret's shape (the field's own
// Placeholder, e.g. whsec_ for the HTTP provider's signing secrets).
func placeholder(sec plugin.Secret) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	if sec.Placeholder != nil {
		return sec.Placeholder(b[:])
	}
	return "withheld-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// SecretField is one secret-bearing field set in OUTBOX_PROVIDER_CONFIG.
type SecretField struct {
	Field string    // e.g. "slack.accounts.T1.token"
	Use   SecretUse // what it is for
	Value string    // as configured (a literal, "env:…" or "secretsmanager:…")
}

// SecretFields lists the secret-bearing fields set in the settings, in a
// stable order. The CDK stack uses it to refuse literal secrets and to grant
// each function the secrets of its uses.
func SecretFields(settings string) ([]SecretField, error) {
	ps, err := ParseProviderSettings(settings)
	if err != nil {
		return nil, err
	}
	var out []SecretField
	for _, s := range ps.secrets() {
		if *s.Value != "" {
			out = append(out, SecretField{Field: s.Field, Use: s.Use, Value: *s.Value})
			if s.AlsoUse != "" && s.AlsoUse != s.Use {
				out = append(out, SecretField{Field: s.Field, Use: s.AlsoUse, Value: *s.Value})
			}
		}
	}
	return out, nil
}

// secrets lists every secret-bearing field of the configured providers (set
// or not), as each provider's registration declares them, in Registered's
// order; the values may be replaced in place.
func (ps *ProviderSettings) secrets() []plugin.Secret {
	var out []plugin.Secret
	for _, c := range ps.Configured {
		out = append(out, c.Config.Secrets()...)
	}
	return out
}

// ErrCredentialsWithheld: this function holds no sending credentials, so it
// sent nothing (a function that validates intents but never attempts them).
var ErrCredentialsWithheld = errors.New("this function holds no provider credentials (OUTBOX_SECRET_USES); nothing was sent")

// withheld is a provider whose sending credentials this function does not
// hold: it answers names, actions and capabilities, and refuses to send or
// look up with a retryable error (nothing was sent, a function holding the
// credentials may try).
type withheld struct{ core.Provider }

func (w withheld) Send(context.Context, core.SendRequest) (core.SendResult, error) {
	return core.SendResult{}, &core.RetryableError{Class: core.ClassTransient, Err: ErrCredentialsWithheld}
}

func (w withheld) Lookup(context.Context, core.SendRequest) (core.LookupResult, error) {
	return core.LookupResult{}, &core.RetryableError{Class: core.ClassTransient, Err: ErrCredentialsWithheld}
}

// Unwrap returns the adapter (for the webhook side, which reads accounts).
func (w withheld) Unwrap() core.Provider { return w.Provider }

// unwrapProvider returns the adapter behind a withheld wrapper.
func unwrapProvider(p core.Provider) core.Provider {
	if w, ok := p.(interface{ Unwrap() core.Provider }); ok {
		return w.Unwrap()
	}
	return p
}
