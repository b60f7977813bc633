// Package plugin is what a provider package exports so that the rest of the
// system can use it without naming it: one Registration value per provider
// (its name, actions and their capability declarations with the provider's
// documentation, how to decode its member of OUTBOX_PROVIDER_CONFIG, its
// secrets and their uses, how to build the adapter, and its webhook dialect
// if it has one). adapters/wire keeps the one list of registrations
// (wire.Registered); nothing else branches on a provider's name.
//
// See adapters/providers/README.md, "Adding a provider".
package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/adapters/webhooksig"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// Registration is everything the system needs to know about one provider.
type Registration struct {
	// Name is the provider name bots use and the key of its member of
	// OUTBOX_PROVIDER_CONFIG.
	Name string
	// Docs is the provider's API documentation.
	Docs string
	// Actions lists the actions the adapter performs, each with what the
	// provider's documentation lets it declare.
	Actions []Action
	// Decode parses the provider's member of OUTBOX_PROVIDER_CONFIG (never
	// called for an absent or null member). Errors name fields, never values.
	Decode func(raw json.RawMessage) (Config, error)
	// Webhook returns the provider's webhook dialect for
	// POST /v1/webhooks/<name>/<account>, or nil when the provider has no
	// webhook or (cfg nil) none without configuration. cfg holds the
	// resolved secrets of the accounts.
	Webhook func(cfg Config, env WebhookEnv) Webhook
	// Local marks the project's own sandbox: make run starts it, so it has
	// no "Connecting a real provider" blocks in the README.
	Local bool
}

// Action is one action and its capability declaration.
type Action struct {
	Name string
	// Declared is what the action declares (core.Capabilities: idempotency
	// keys and their retention, lookup, or neither). Ignored when PerAccount.
	Declared core.Capabilities
	// PerAccount: the account's configuration (or the provider itself, at
	// run time) decides; nothing is assumed.
	PerAccount bool
	// Why says in one line why the declaration is what it is.
	Why string
	// Doc links the provider's documentation of the action and of the claim.
	Doc string
}

// Declaration returns the declared capabilities of action (false: not an
// action of this provider).
func (r Registration) Declaration(action string) (Action, bool) {
	for _, a := range r.Actions {
		if a.Name == action {
			return a, true
		}
	}
	return Action{}, false
}

// Config is a decoded member of OUTBOX_PROVIDER_CONFIG.
type Config interface {
	// Accounts lists the configured accounts, sorted; nil means any account
	// (the sandbox creates accounts on first use).
	Accounts() []string
	// BaseURL is the API root as configured ("" for the default), for the
	// start-up banner.
	BaseURL() string
	// Timeout bounds one request to the provider: its member's timeoutMs,
	// or httpx.DefaultTimeout (Timeout). The attempt policy's lease must
	// outlive it (wire checks every configured provider's).
	Timeout() time.Duration
	// Secrets lists every secret-bearing field (set or not) in a stable
	// order; the caller may replace each value (resolving "env:" and
	// "secretsmanager:" references).
	Secrets() []Secret
	// Build returns the adapter. client may be nil.
	Build(client *http.Client) (core.Provider, error)
}

// SecretUse is what a provider secret is for. A function reads only the
// secrets of the uses it holds, and the CDK stack grants it read access to
// exactly those secrets.
type SecretUse string

const (
	// SendSecret: credentials for calling a provider (bot tokens, API keys,
	// outbound signing secrets, service-account keys): the functions that
	// attempt or look up.
	SendSecret SecretUse = "send"
	// VerifySecret: secrets that verify a provider's webhooks: the webhook
	// function.
	VerifySecret SecretUse = "verify"
)

// Secret is one secret-bearing field.
type Secret struct {
	// Field is the field's path in OUTBOX_PROVIDER_CONFIG, e.g. "slack.accounts.T1.token".
	Field string
	Use   SecretUse
	// AlsoUse, when set, is a second use of the same value (Twilio's auth
	// token authenticates the API calls and verifies its callbacks): a
	// function holding either use reads it, and the stack grants both.
	AlsoUse SecretUse
	// Value points at the configured value.
	Value *string
	// Placeholder, when set, makes a stand-in for a withheld secret that
	// passes the adapter's validation of the field's shape.
	Placeholder func(random []byte) string
}

// AWSResources is implemented by a Config whose provider is an AWS service
// (SES): the CDK stack grants what it needs and builds what delivers its
// events, from the configuration, without naming the provider.
type AWSResources interface {
	// AWSGrants are IAM permissions beyond secrets, by use (SendSecret: the
	// functions that attempt).
	AWSGrants() []AWSGrant
	// AWSEventTopics are SNS topics the stack creates and subscribes the
	// webhook function to.
	AWSEventTopics() []AWSEventTopic
}

// AWSGrant is one IAM statement: Actions on Resources.
type AWSGrant struct {
	Use       SecretUse
	Actions   []string
	Resources []ARN
}

// ARN is an ARN in the stack's partition and account; Region empty means
// the stack's region.
type ARN struct {
	Service, Region, Resource string
}

// AWSEventTopic is an SNS topic for a provider's events. When
// SESConfigurationSet is set, the stack adds an event destination to that
// configuration set (in the stack's region) publishing EventTypes
// (SES's names: SEND, DELIVERY, BOUNCE, COMPLAINT, REJECT, ...) to it.
type AWSEventTopic struct {
	// ID is unique and stable (construct ids and the topic name derive from it).
	ID                  string
	SESConfigurationSet string
	EventTypes          []string
}

// Accounts is a decoded "accounts" member of a provider's configuration.
// It holds pointers so that resolving a secret (Secret.Value) changes the
// account in place.
type Accounts[A any] map[string]*A

// Names returns the account names, sorted.
func (m Accounts[A]) Names() []string { return SortedKeys(m) }

// Values returns a copy of the accounts, for an adapter's configuration.
func (m Accounts[A]) Values() map[string]A {
	out := make(map[string]A, len(m))
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// Get returns one account.
func (m Accounts[A]) Get(name string) (A, bool) {
	if a := m[name]; a != nil {
		return *a, true
	}
	var zero A
	return zero, false
}

// AccountSecrets lists the secrets of every account (sorted by account); the
// field is prefix + account + the Field secrets gives (e.g. ".token").
func AccountSecrets[A any](prefix string, m Accounts[A], secrets func(*A) []Secret) []Secret {
	var out []Secret
	for _, name := range m.Names() {
		a := m[name]
		if a == nil {
			a = new(A)
			m[name] = a
		}
		for _, s := range secrets(a) {
			s.Field = prefix + name + s.Field
			out = append(out, s)
		}
	}
	return out
}

// SortedKeys returns a map's keys, sorted.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DecodeJSON decodes a provider's member into v with the errors
// OUTBOX_PROVIDER_CONFIG gives (json errors name fields and types, never
// values).
func DecodeJSON(name string, raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Millis turns a configured millisecond count into a duration.
func Millis(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }

// Timeout is a provider's request bound from its timeoutMs: ms when
// positive, else httpx.DefaultTimeout.
func Timeout(ms int) time.Duration {
	if ms > 0 {
		return Millis(ms)
	}
	return httpx.DefaultTimeout
}

// WebhookEnv is what a webhook dialect may use.
type WebhookEnv struct {
	// Now is the clock (replay windows).
	Now func() time.Time
	// Secrets verifies Standard Webhooks signatures with the secrets of
	// OUTBOX_WEBHOOK_SECRETS / OUTBOX_PROVIDER_SECRETS.
	Secrets *webhooksig.Verifier
}

// Webhook is one provider's webhook dialect: its signature scheme and its
// event format.
type Webhook interface {
	// Verify authenticates the raw request for the account. An error
	// wrapping ErrUnauthenticated means 401; any other error is a server
	// failure.
	Verify(ctx context.Context, account string, headers map[string]string, body []byte) error
	// Decode turns a verified body into an event; errors are *core.ValidationError.
	Decode(account string, headers map[string]string, body []byte) (webhook.ProviderEvent, error)
}

// Challenger is implemented by dialects whose endpoint must answer a
// verified handshake itself (Slack's url_verification): after Verify, if
// Challenge reports true, its response is returned and nothing is stored.
type Challenger interface {
	Challenge(account string, headers map[string]string, body []byte) (events.APIGatewayV2HTTPResponse, bool)
}

// Request is a webhook request as the endpoint received it, for dialects
// whose signature covers more than headers and body.
type Request struct {
	// Method is GET or POST.
	Method string
	// RawPath is the path as received, still escaped (API Gateway's
	// rawPath), never rebuilt.
	RawPath string
	// RawQuery is the query string as received, without "?".
	RawQuery string
	Headers  map[string]string
	Body     []byte
}

// RequestWebhook is implemented by dialects that verify and decode the
// whole request (Twilio signs the exact URL it called, query included, and
// form-encoded parameters): the endpoint calls VerifyRequest and
// DecodeRequest instead of Verify and Decode.
type RequestWebhook interface {
	VerifyRequest(ctx context.Context, account string, r Request) error
	DecodeRequest(account string, r Request) (webhook.ProviderEvent, error)
}

// BatchDecoder is implemented by dialects whose provider batches several
// events in one delivery (WhatsApp's statuses): the endpoint applies each
// (in order; a failure fails the delivery, which the provider repeats and
// the event ids deduplicate) and answers with the first one's result.
type BatchDecoder interface {
	DecodeAll(account string, headers map[string]string, body []byte) ([]webhook.ProviderEvent, error)
}

// NotificationDecoder is implemented by dialects whose provider publishes
// events to an SNS topic the webhook function is subscribed to (SES event
// publishing): an IAM-authenticated Lambda invocation, so there is no
// signature to check; only the subscribed topic can invoke the function.
// The endpoint offers each SNS message to every such dialect; the one that
// recognises it (ok) returns the account and the events.
type NotificationDecoder interface {
	DecodeNotification(message []byte) (account string, evs []webhook.ProviderEvent, ok bool, err error)
}

// Handshaker is implemented by dialects whose provider verifies the endpoint
// with a GET (WhatsApp's hub.challenge): GET /v1/webhooks/<name>/<account>
// is answered by Handshake; nothing is stored.
type Handshaker interface {
	Handshake(ctx context.Context, account string, r Request) events.APIGatewayV2HTTPResponse
}

// ErrUnauthenticated marks a webhook request whose signature does not verify.
var ErrUnauthenticated = errors.New("webhook signature not verified")

// Header returns a request header, case-insensitively.
func Header(headers map[string]string, name string) string {
	if v, ok := headers[name]; ok {
		return v
	}
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
