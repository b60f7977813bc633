// Package webhook is the providers' callback endpoint,
// POST /v1/webhooks/{provider}/{account} (and GET, for providers that verify
// the endpoint with a handshake). There is no authorizer on the route:
// each provider's adapter verifies the request's signature with the
// account's secret before anything is stored. Then core deduplicates by the
// provider's event id and binds, records or forwards the event.
//
// Answers: 200 {"result": bound|duplicate|unresolved|forwarded|ignored, ...};
// 401 invalid_signature (missing, bad or stale signature; nothing stored);
// 413 payload_too_large; 400 malformed_json / invalid_field for a signed but
// malformed event; 404 unknown_provider; 409 event_in_progress (another
// delivery of the same inbound event is being forwarded: deliver again
// later); 500 internal (nothing half-done; deliver again).
package webhook

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// MaxBodyBytes is the largest webhook body accepted (256 KiB).
const MaxBodyBytes = 256 << 10

// Provider is one provider's webhook dialect (plugin.Webhook): each
// provider package's registration builds its own (adapters/wire reads the
// list).
type Provider = plugin.Webhook

// Challenger is implemented by dialects that answer a verified handshake
// themselves (plugin.Challenger).
type Challenger = plugin.Challenger

// ErrUnauthenticated marks a request whose signature does not verify.
var ErrUnauthenticated = plugin.ErrUnauthenticated

// Handler serves the webhook route.
type Handler struct {
	Webhooks  *webhook.Webhooks
	Providers map[string]Provider
	// MaxBodyBytes defaults to MaxBodyBytes.
	MaxBodyBytes int
	Log          *slog.Logger
}

func (h *Handler) log() *slog.Logger { return cmp.Or(h.Log, slog.Default()) }

// Handle is the Lambda handler.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	provider, account := req.PathParameters["provider"], req.PathParameters["account"]
	p, ok := h.Providers[provider]
	if !ok || account == "" {
		return httpjson.Error(http.StatusNotFound, "unknown_provider", "no webhook endpoint for this provider", "provider"), nil
	}
	if resp, ok := httpjson.CheckPathIDs(req); !ok {
		return resp, nil
	}
	limit := h.MaxBodyBytes
	if limit <= 0 {
		limit = MaxBodyBytes
	}
	// Cheap size check before decoding anything.
	if len(req.Body) > limit*4/3+4 {
		return tooLarge(limit), nil
	}
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return httpjson.Error(http.StatusBadRequest, core.CodeMalformedJSON, "the body is not valid base64", ""), nil
		}
		body = b
	}
	if len(body) > limit {
		return tooLarge(limit), nil
	}
	log := h.log().With("provider", provider, "account", account)
	raw := plugin.Request{Method: req.RequestContext.HTTP.Method, RawPath: req.RawPath, RawQuery: req.RawQueryString, Headers: req.Headers, Body: body}
	if raw.Method == "" {
		raw.Method = http.MethodPost
	}
	if raw.Method == http.MethodGet {
		// A GET is only ever a handshake: answered by the dialect, nothing stored.
		if hs, ok := p.(plugin.Handshaker); ok {
			return hs.Handshake(ctx, account, raw), nil
		}
		return httpjson.Error(http.StatusNotFound, "unknown_provider", "this provider has no webhook handshake", "provider"), nil
	}
	rw, whole := p.(plugin.RequestWebhook)
	verify := func() error { return p.Verify(ctx, account, req.Headers, body) }
	decode := func() (webhook.ProviderEvent, error) { return p.Decode(account, req.Headers, body) }
	if whole {
		// The dialect's signature covers the request itself (path, raw
		// query, form parameters): it gets them as received.
		verify = func() error { return rw.VerifyRequest(ctx, account, raw) }
		decode = func() (webhook.ProviderEvent, error) { return rw.DecodeRequest(account, raw) }
	}
	if err := verify(); err != nil {
		if errors.Is(err, ErrUnauthenticated) {
			// Nothing is stored for an unauthenticated request; the reason is
			// logged, not told (no oracle for forgers).
			log.WarnContext(ctx, "webhook rejected: signature not verified", "reason", err.Error())
			return httpjson.Error(http.StatusUnauthorized, "invalid_signature", "the webhook signature is missing, invalid or outside the allowed time window", ""), nil
		}
		log.ErrorContext(ctx, "webhook verification failed", "err", err.Error())
		return internal(), nil
	}
	if c, ok := p.(Challenger); ok {
		if resp, ok := c.Challenge(account, req.Headers, body); ok {
			return resp, nil
		}
	}
	evs, err := decodeAll(p, whole, decode, account, req.Headers, body)
	if err != nil {
		return h.fail(ctx, log, err), nil
	}
	sum := sha256.Sum256(body)
	var first webhook.WebhookResult
	for i, ev := range evs {
		ev.Provider, ev.Account = provider, account
		ev.BodyHash = "sha256:" + hex.EncodeToString(sum[:])
		ev.Raw = body
		res, err := h.Webhooks.Handle(ctx, ev)
		if err != nil {
			// The provider delivers the whole payload again; the events
			// already applied are duplicates then.
			return h.fail(ctx, log.With("eventId", ev.EventID), err), nil
		}
		if i == 0 {
			first = res
		}
	}
	return httpjson.JSON(http.StatusOK, first, nil), nil
}

// decodeAll returns the delivery's events: several from a dialect that
// batches (plugin.BatchDecoder), else the one decode returns.
func decodeAll(p Provider, whole bool, decode func() (webhook.ProviderEvent, error), account string, headers map[string]string, body []byte) ([]webhook.ProviderEvent, error) {
	if b, ok := p.(plugin.BatchDecoder); ok && !whole {
		evs, err := b.DecodeAll(account, headers, body)
		if err == nil && len(evs) == 0 {
			err = &core.ValidationError{Code: core.CodeInvalidField, Message: "the delivery carries no event"}
		}
		return evs, err
	}
	ev, err := decode()
	if err != nil {
		return nil, err
	}
	return []webhook.ProviderEvent{ev}, nil
}

// HandleSNS serves the webhook function's SNS subscriptions: each record's
// message is offered to the dialects that decode notifications
// (plugin.NotificationDecoder, in provider-name order); the one that claims
// it gives its account and events, which core applies like any webhook's.
// The invocation is authenticated by IAM (only the subscribed topics may
// invoke the function). A message nobody claims is logged and dropped (a
// retry would not change that); a storage failure is returned, so Lambda
// retries the invocation and the event ids deduplicate what was applied.
func (h *Handler) HandleSNS(ctx context.Context, in events.SNSEvent) error {
	names := make([]string, 0, len(h.Providers))
	for name, p := range h.Providers {
		if _, ok := p.(plugin.NotificationDecoder); ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, rec := range in.Records {
		msg := []byte(rec.SNS.Message)
		claimed := false
		for _, name := range names {
			account, evs, ok, err := h.Providers[name].(plugin.NotificationDecoder).DecodeNotification(msg)
			if !ok {
				continue
			}
			claimed = true
			log := h.log().With("provider", name, "account", account, "snsMessageId", rec.SNS.MessageID)
			if err != nil {
				// A malformed event of ours: delivering it again cannot help.
				log.WarnContext(ctx, "SNS provider event refused", "err", err.Error())
				break
			}
			sum := sha256.Sum256(msg)
			for _, ev := range evs {
				ev.Provider, ev.Account = name, account
				ev.BodyHash = "sha256:" + hex.EncodeToString(sum[:])
				ev.Raw = msg
				if _, err := h.Webhooks.Handle(ctx, ev); err != nil {
					var ve *core.ValidationError
					if errors.As(err, &ve) {
						log.WarnContext(ctx, "SNS provider event refused", "eventId", ev.EventID, "err", err.Error())
						continue
					}
					return fmt.Errorf("provider event %s: %w", ev.EventID, err)
				}
			}
			break
		}
		if !claimed {
			h.log().WarnContext(ctx, "SNS message claimed by no provider; dropped", "topic", rec.SNS.TopicArn, "snsMessageId", rec.SNS.MessageID)
		}
	}
	return nil
}

func (h *Handler) fail(ctx context.Context, log *slog.Logger, err error) events.APIGatewayV2HTTPResponse {
	return httpjson.Fail(ctx, log, err, "the event could not be processed; deliver it again")
}

func tooLarge(limit int) events.APIGatewayV2HTTPResponse {
	return httpjson.Error(http.StatusRequestEntityTooLarge, core.CodePayloadTooLarge, "the webhook body exceeds "+strconv.Itoa(limit)+" bytes", "")
}

func internal() events.APIGatewayV2HTTPResponse {
	return httpjson.Error(http.StatusInternalServerError, "internal", "the event could not be processed; deliver it again", "")
}
