// Package ses is the Amazon SES provider adapter (provider name "ses"):
// SES v2 SendEmail (https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html)
// through the AWS SDK for Go v2 (sesv2), credentials from the SDK's default
// chain, the endpoint from the SDK's standard AWS_ENDPOINT_URL_SESV2 /
// AWS_ENDPOINT_URL (https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html).
//
// The SDK's own retries are OFF (RetryMaxAttempts 1): with its default
// retryer, SendEmail sends the same email three times after a lost answer or
// a 500. Retrying is the outbox's decision, never the transport's. The
// request body is not rewindable for net/http either (GetBody cleared), and
// whether a failed request may have left is told apart with httptrace, as
// adapters/providers/httpx does.
//
// SES v2 has no idempotency key and no lookup by an id we choose, so the
// adapter declares neither: an ambiguous failure goes to needs-human at
// once. Every email carries two EmailTags
// (https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_MessageTag.html):
// outbox_intent_id (the intent id) and outbox_account (the account), which
// SES event publishing echoes in mail.tags
// (https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html):
// a Delivery (or Send) event naming the intent settles it (webhook.go).
//
// Error mapping (https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html#API_SendEmail_Errors,
// https://docs.aws.amazon.com/ses/latest/dg/manage-sending-quotas-errors.html,
// https://docs.aws.amazon.com/ses/latest/APIReference-V2/CommonErrors.html),
// by the error code, never by message text:
//
//	ThrottlingException (sending quota or rate; SES dropped the message),
//	TooManyRequestsException (429)                                   → rate limited
//	MessageRejected, MailFromDomainNotVerifiedException,
//	BadRequestException, NotFoundException, LimitExceededException,
//	InvalidParameterValue, ValidationError                           → rejected
//	AccountSuspendedException, SendingPausedException, AccessDenied(Exception),
//	UnrecognizedClientException, InvalidClientTokenId, ExpiredToken(Exception),
//	SignatureDoesNotMatch, InvalidSignatureException, MissingAuthenticationToken → unauthorized
//	InternalFailure, ServiceUnavailable, anything else (5xx)        → unknown
package ses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/mail"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/botharness/outbox/adapters/providers/httpx"
	"github.com/botharness/outbox/core"
)

// Name is the provider name bots use.
const Name = "ses"

// ActionEmail sends one email.
const ActionEmail = "send_email"

// Tag names carried on every email.
const (
	TagIntent  = "outbox_intent_id"
	TagAccount = "outbox_account"
)

// Account is one sending identity.
type Account struct {
	// From is the sender address (of a verified identity).
	From string `json:"from"`
	// Identity is the verified identity (a domain or an address) the stack
	// grants ses:SendEmail on; default: From's domain.
	Identity string `json:"identity,omitempty"`
	// ConfigurationSet, when set, names the configuration set the email is
	// sent with; its event destination (an SNS topic the stack creates)
	// publishes Send, Delivery, Bounce, Complaint and Reject events to the
	// webhook function.
	ConfigurationSet string `json:"configurationSet,omitempty"`
}

// LogValue: nothing secret, but keep the shape of the other providers.
func (a Account) LogValue() slog.Value { return slog.StringValue("<ses account " + a.From + ">") }

// SendAPI is the part of the sesv2 client the adapter uses.
type SendAPI interface {
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

// Config configures the adapter.
type Config struct {
	Region string
	// Profile, when set, is the shared-configuration profile whose
	// credentials the SDK uses, ahead of the environment's (make run's
	// environment holds the emulators' placeholder keys).
	Profile  string
	Accounts map[string]Account
	// Timeout bounds each request (default 10s).
	Timeout time.Duration
	// Client is the sesv2 client (default: built from the SDK's default
	// configuration with RetryMaxAttempts 1).
	Client SendAPI
	// HTTPClient is the transport under the SDK (default: a client that
	// never follows redirects).
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Provider is the adapter.
type Provider struct {
	cfg    Config
	client SendAPI
	http   *http.Client
}

var _ core.Provider = (*Provider)(nil)

var (
	// tagValueRE: SES tag names and values are ASCII letters, digits, _ and
	// -, at most 256 characters.
	tagValueRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
	// configSetRE: configuration set names (letters, digits, _ and -, at most 64).
	configSetRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// New returns the adapter. client may be nil.
func New(client *http.Client, cfg Config) (*Provider, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for name, a := range cfg.Accounts {
		if !tagValueRE.MatchString(name) {
			return nil, fmt.Errorf("ses: account name %q: letters, digits, _ and - only (it is an email tag value)", name)
		}
		if _, err := mail.ParseAddress(a.From); err != nil {
			return nil, fmt.Errorf("ses: account %q: from must be an email address", name)
		}
		if a.ConfigurationSet != "" && !configSetRE.MatchString(a.ConfigurationSet) {
			return nil, fmt.Errorf("ses: account %q: configurationSet must be letters, digits, _ and - (at most 64)", name)
		}
	}
	p := &Provider{cfg: cfg, client: cfg.Client, http: httpx.Client(client)}
	if p.client == nil {
		opts := []func(*config.LoadOptions) error{config.WithRegion(cfg.Region), config.WithRetryMaxAttempts(1)}
		if cfg.Profile != "" {
			opts = append(opts, config.WithSharedConfigProfile(cfg.Profile))
		}
		awsCfg, err := config.LoadDefaultConfig(context.Background(), opts...)
		if err != nil {
			return nil, fmt.Errorf("ses: AWS configuration: %w", err)
		}
		p.client = NewClient(awsCfg)
	}
	return p, nil
}

// NewClient is the sesv2 client the adapter uses: the SDK's retries off.
func NewClient(awsCfg aws.Config) *sesv2.Client {
	return sesv2.NewFromConfig(awsCfg, func(o *sesv2.Options) {
		o.RetryMaxAttempts = 1
		o.Retryer = aws.NopRetryer{}
	})
}

func (p *Provider) Name() string { return Name }

func (p *Provider) SupportsAction(action string) bool {
	_, ok := Registration.Declaration(action)
	return ok
}

// Capabilities is the registration's declaration: neither.
func (p *Provider) Capabilities(_ context.Context, account, action string) (core.Capabilities, error) {
	if err := httpx.KnownAccount(Name, p.cfg.Accounts, account); err != nil {
		return core.Capabilities{}, err
	}
	a, ok := Registration.Declaration(action)
	if !ok {
		return core.Capabilities{}, fmt.Errorf("ses: unknown action %q", action)
	}
	return a.Declared, nil
}

// Email is send_email's payload.
type Email struct {
	Subject string   `json:"subject"`
	Text    string   `json:"text"`
	HTML    string   `json:"html"`
	ReplyTo []string `json:"replyTo"`
}

func buildInput(a Account, account string, r core.SendRequest) (*sesv2.SendEmailInput, error) {
	var e Email
	if err := strictJSON(r.Payload, &e); err != nil {
		return nil, err
	}
	if e.Subject == "" || (e.Text == "" && e.HTML == "") {
		return nil, errors.New("payload needs subject and text or html")
	}
	to, err := mail.ParseAddressList(r.Target)
	if err != nil || len(to) == 0 || len(to) > 50 {
		return nil, errors.New("target must be 1 to 50 email addresses")
	}
	if !tagValueRE.MatchString(r.IntentID) {
		return nil, errors.New("the intent id is not a valid email tag value")
	}
	dest := &types.Destination{}
	for _, t := range to {
		dest.ToAddresses = append(dest.ToAddresses, t.String())
	}
	body := &types.Body{}
	if e.Text != "" {
		body.Text = &types.Content{Data: aws.String(e.Text), Charset: aws.String("UTF-8")}
	}
	if e.HTML != "" {
		body.Html = &types.Content{Data: aws.String(e.HTML), Charset: aws.String("UTF-8")}
	}
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(a.From),
		Destination:      dest,
		ReplyToAddresses: e.ReplyTo,
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: &types.Content{Data: aws.String(e.Subject), Charset: aws.String("UTF-8")},
			Body:    body,
		}},
		EmailTags: []types.MessageTag{
			{Name: aws.String(TagIntent), Value: aws.String(r.IntentID)},
			{Name: aws.String(TagAccount), Value: aws.String(account)},
		},
	}
	if a.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(a.ConfigurationSet)
	}
	return in, nil
}

// Send sends the email.
func (p *Provider) Send(ctx context.Context, r core.SendRequest) (core.SendResult, error) {
	a, err := httpx.SendAccount(Name, p.cfg.Accounts, r.Account)
	if err != nil {
		return core.SendResult{}, err
	}
	if !p.SupportsAction(r.Action) {
		return core.SendResult{}, httpx.Rejected(core.Evidence{ProviderCode: "unknown_action"}, "ses: unknown action %q", r.Action)
	}
	in, err := buildInput(a, r.Account, r)
	if err != nil {
		return core.SendResult{}, httpx.InvalidPayload(Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	var wrote atomic.Bool
	out, err := p.client.SendEmail(ctx, in, func(o *sesv2.Options) {
		o.HTTPClient = &traced{c: p.http, wrote: &wrote}
		o.RetryMaxAttempts = 1
		o.Retryer = aws.NopRetryer{}
	})
	if err != nil {
		return core.SendResult{}, classifyErr(err, wrote.Load(), p.cfg.Now())
	}
	if out.MessageId == nil || *out.MessageId == "" {
		return core.SendResult{}, httpx.Unknown(core.Evidence{HTTPStatus: 200, Detail: "200 without a MessageId"}, "ses: acknowledgement unreadable")
	}
	return core.SendResult{ExternalID: *out.MessageId, Evidence: core.Evidence{HTTPStatus: 200}}, nil
}

// traced is the SDK's HTTP client for one call: it records whether any
// byte of the request may have left and clears GetBody, so net/http never
// replays the request on a new connection.
type traced struct {
	c     *http.Client
	wrote *atomic.Bool
}

func (t *traced) Do(req *http.Request) (*http.Response, error) {
	trace := &httptrace.ClientTrace{
		WroteHeaderField: func(string, []string) { t.wrote.Store(true) },
		WroteHeaders:     func() { t.wrote.Store(true) },
		WroteRequest:     func(httptrace.WroteRequestInfo) { t.wrote.Store(true) },
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	req.GetBody = nil
	return t.c.Do(req)
}

// Codes the adapter maps.
var (
	rateLimited = map[string]bool{"ThrottlingException": true, "Throttling": true, "TooManyRequestsException": true}
	rejected    = map[string]bool{"MessageRejected": true, "MailFromDomainNotVerifiedException": true, "BadRequestException": true,
		"NotFoundException": true, "LimitExceededException": true, "InvalidParameterValue": true, "ValidationError": true, "ValidationException": true}
	unauthorized = map[string]bool{"AccountSuspendedException": true, "SendingPausedException": true, "AccessDenied": true,
		"AccessDeniedException": true, "UnrecognizedClientException": true, "InvalidClientTokenId": true, "ExpiredToken": true,
		"ExpiredTokenException": true, "SignatureDoesNotMatch": true, "InvalidSignatureException": true, "MissingAuthenticationToken": true,
		"IncompleteSignature": true}
)

// Classify maps an error code to a class (see the package comment).
func Classify(code string) core.ErrorClass {
	switch {
	case rateLimited[code]:
		return core.ClassRateLimited
	case rejected[code]:
		return core.ClassRejectedInput
	case unauthorized[code]:
		return core.ClassUnauthorized
	}
	return core.ClassUnknownOutcome
}

func classifyErr(err error, wrote bool, now time.Time) error {
	var re *awshttp.ResponseError
	var sendErr *smithyhttp.RequestSendError
	if errors.As(err, &sendErr) || !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil || re.HTTPStatusCode() == 0 {
		// No answer. Before any byte left: proof of no effect.
		ev := core.Evidence{Detail: httpx.Redact(err).Error()}
		if !wrote {
			return &core.RetryableError{Class: core.ClassTransient, Evidence: ev, Err: fmt.Errorf("ses: request never left: %w", err)}
		}
		return &core.UnknownOutcomeError{Evidence: ev, Err: fmt.Errorf("ses: no response after sending: %w", err)}
	}
	ev := core.Evidence{HTTPStatus: re.HTTPStatusCode()}
	if id := re.ServiceRequestID(); id != "" {
		ev.Extra = map[string]string{"requestId": id}
	}
	var ae smithy.APIError
	code := ""
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	ev.ProviderCode = code
	ev.Detail = "https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html#API_SendEmail_Errors (" + code + ")"
	switch Classify(code) {
	case core.ClassRateLimited:
		return httpx.RateLimited(ev, httpx.RetryAfter(re.Response.Header.Get("Retry-After"), now), "ses: %s", code)
	case core.ClassRejectedInput:
		return httpx.Rejected(ev, "ses: %s", code)
	case core.ClassUnauthorized:
		return httpx.Unauthorized(ev, "ses: %s", code)
	}
	return httpx.Unknown(ev, "ses: HTTP %d %s (the email may have been sent)", re.HTTPStatusCode(), code)
}

func strictJSON(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if dec.More() {
		return errors.New("payload: one JSON object expected")
	}
	return nil
}

// IdentityOf is the identity an account sends as: Identity, else From's domain.
func IdentityOf(a Account) string {
	if a.Identity != "" {
		return a.Identity
	}
	if addr, err := mail.ParseAddress(a.From); err == nil {
		if i := strings.LastIndexByte(addr.Address, '@'); i >= 0 {
			return addr.Address[i+1:]
		}
	}
	return ""
}

// Lookup is not declared: SES v2 has no search by an id we choose.
func (p *Provider) Lookup(context.Context, core.SendRequest) (core.LookupResult, error) {
	return core.LookupResult{}, errors.New("ses: no lookup")
}
