package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxBodyBytes is the largest intent request accepted (256 KiB).
const MaxBodyBytes = 256 << 10

// ValidationError is bad input: a stable machine-readable code, the field at
// fault (if any) and a human message. Nothing is written when one is returned.
type ValidationError struct {
	Code    string
	Field   string
	Message string
}

func (e *ValidationError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Field)
	}
	return e.Code + ": " + e.Message
}

// Validation codes.
const (
	CodeInvalidIdempotencyKey = "invalid_idempotency_key"
	CodeMalformedJSON         = "malformed_json"
	CodeInvalidField          = "invalid_field"
	CodePayloadTooLarge       = "payload_too_large"
	CodeUnknownProvider       = "unknown_provider"
	CodeUnknownAction         = "unknown_action"
	CodeDeadlinePassed        = "deadline_passed"
)

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Code: CodeInvalidField, Field: field, Message: fmt.Sprintf(format, args...)}
}

// SubmitRequest is the body of POST /v1/intents.
type SubmitRequest struct {
	Kind     Kind            `json:"kind"`
	Provider string          `json:"provider"`
	Account  string          `json:"account"`
	Action   string          `json:"action"`
	Target   string          `json:"target"`
	Payload  json.RawMessage `json:"payload"`
	Source   *SourceRef      `json:"source,omitempty"`
	Grant    *GrantRef       `json:"grant"`
	Deadline *string         `json:"deadline,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// ValidateIdempotencyKey enforces 1-255 printable ASCII characters.
func ValidateIdempotencyKey(key string) error {
	if key == "" || len(key) > 255 {
		return &ValidationError{Code: CodeInvalidIdempotencyKey, Field: "Idempotency-Key",
			Message: "the Idempotency-Key header must hold 1 to 255 printable ASCII characters"}
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return &ValidationError{Code: CodeInvalidIdempotencyKey, Field: "Idempotency-Key",
				Message: fmt.Sprintf("the Idempotency-Key header has a non-printable or non-ASCII byte at position %d", i)}
		}
	}
	return nil
}

// IntakeAuthorizer checks that the intent's grant covers it at intake (issue:
// revalidation). Nil means every grant reference is accepted as given.
type IntakeAuthorizer interface {
	AuthorizeIntake(ctx context.Context, bot string, in *Intent) error
}

// Intake accepts intents.
type Intake struct {
	Store     IntentStore
	Providers Providers
	Clock     Clock
	Grants    IntakeAuthorizer
	// Payloads takes payloads over PayloadInlineMax out of the item (nil:
	// every payload stays inline).
	Payloads PayloadStore
	// Limits applies the bot's rate and open-intent limits to new intents
	// (nil: no limits). See botlimits.go.
	Limits BotLimiter
	// Inline makes the first attempt inside a request that asks to wait
	// (SubmitOptions.Wait, inline.go); nil: every intent takes the
	// asynchronous road.
	Inline *Inline
}

// SubmitResult says what happened to a submission.
type SubmitResult struct {
	Intent   *Intent
	Replayed bool
	// Waited: the answer is the intent after its attempt (the wait the
	// caller asked for was applied: Preference-Applied).
	Waited bool
	// Wait is the wait applied (the one asked for, capped by Inline.MaxWait).
	Wait time.Duration
}

// Submit validates, canonicalises and commits one intent under bot+key with a
// single conditional put. A repeat with the same canonical request replays the
// stored intent; a repeat with a different one is refused.
//
// Replays first (issue 24, core.ReplayFirst): a check whose answer depends
// on time or configuration (deadline, provider and action, grant, the bot's
// limits) never refuses a request whose key already holds the same request:
// when one would refuse, the key is looked up (one GetItem, on that path
// only) and a stored intent answers instead. A new intent that no check
// refuses costs the one conditional put and nothing else.
func (s *Intake) Submit(ctx context.Context, bot, key string, body []byte) (SubmitResult, error) {
	return s.SubmitWith(ctx, bot, key, body, SubmitOptions{})
}

// SubmitWith is Submit with the caller's preferences: a wait (capped by
// Inline.MaxWait) makes the first attempt inside the request when it can be
// made now (inline.go), and makes a replay of an intent still in flight wait
// for its outcome.
func (s *Intake) SubmitWith(ctx context.Context, bot, key string, body []byte, opt SubmitOptions) (res SubmitResult, err error) {
	var created bool
	if err := ValidateIdempotencyKey(key); err != nil {
		return SubmitResult{}, err
	}
	if len(body) > MaxBodyBytes {
		return SubmitResult{}, &ValidationError{Code: CodePayloadTooLarge, Message: fmt.Sprintf("the request body is over %d bytes", MaxBodyBytes)}
	}
	canonical, req, err := decodeSubmit(body)
	if err != nil {
		return SubmitResult{}, err
	}
	now := s.Clock.Now()
	in, refusal, err := s.build(bot, key, canonical, req, now)
	if err != nil {
		return SubmitResult{}, err
	}
	if in != nil {
		in.TraceParent = traceParentOf(ctx) // one trace per intent (core/trace.go)
	}
	if refusal == nil && s.Grants != nil {
		if err := s.Grants.AuthorizeIntake(ctx, bot, in); err != nil {
			if !errors.Is(err, ErrGrantDoesNotCover) {
				return SubmitResult{}, err
			}
			refusal = err
		}
	}
	if refusal == nil && s.Limits != nil {
		release, err := s.Limits.Admit(ctx, in, now)
		if err != nil {
			if !IsLimitRefusal(err) {
				return SubmitResult{}, err
			}
			refusal = err
		} else if release != nil {
			defer func() {
				// Counted for an intent that was not created (a replay, a
				// reuse, a failed put): give the count back.
				if !created {
					release(ctx)
				}
			}()
		}
	}
	if refusal != nil {
		stored, err := s.Store.Get(ctx, in.ID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			// Could not tell whether this is a replay: answer "try again"
			// (5xx), never a refusal a replay must not get.
			return SubmitResult{}, fmt.Errorf("check for a replay of %s before refusing it: %w", in.ID, err)
		}
		if err != nil {
			stored = nil
		}
		return answer(ReplayFirst(stored, bot, requestHashes(in, canonical), refusal), in.ID, stored, refusal)
	}
	if s.Payloads != nil && OffloadPayload(in.Payload) {
		// Before the conditional put: an object whose put never follows is
		// harmless (content-addressed) and expires with the lifecycle rule.
		ref, err := s.Payloads.Put(ctx, in.PayloadHash, in.Payload)
		if err != nil {
			return SubmitResult{}, fmt.Errorf("store payload of %s: %w", in.ID, err)
		}
		in.PayloadRef, in.Payload = ref, nil
	}
	wait := s.Inline.wait(opt.Wait)
	var existing *Intent
	if wait > 0 {
		// The inline step (inline.go): plan, put, attempt.
		inl, found, err := s.Inline.submit(ctx, in, s.Store.Create)
		if err != nil {
			return SubmitResult{}, fmt.Errorf("commit intent %s: %w", in.ID, err)
		}
		if found == nil {
			created = true
			inl.Wait = wait
			return inl, nil
		}
		existing = found
	} else {
		stored, ok, err := s.Store.Create(ctx, in)
		if err != nil {
			return SubmitResult{}, fmt.Errorf("commit intent %s: %w", in.ID, err)
		}
		if ok {
			created = true
			return SubmitResult{Intent: in}, nil
		}
		existing = stored
	}
	a := ReplayFirst(existing, bot, requestHashes(in, canonical), nil)
	if a == answerReplay && wait > 0 && existing.Status == StatusInFlight {
		// A replay while the first request (or a worker) is still sending:
		// wait for the outcome, bounded by the wait asked for.
		cur, ended := s.Inline.await(ctx, existing, wait)
		return SubmitResult{Intent: cur, Replayed: true, Waited: ended, Wait: wait}, nil
	}
	return answer(a, in.ID, existing, nil)
}

// submitAnswer is what intake answers a submission with.
type submitAnswer int

// The answers ReplayFirst chooses from.
const (
	// answerCreate: nothing is stored under the key and nothing refuses:
	// commit the new intent (the conditional put decides a race).
	answerCreate submitAnswer = iota
	// answerReplay: the key holds this very request: answer with the stored
	// intent (200 Idempotent-Replayed), whatever changed since.
	answerReplay
	// answerKeyReused: the key holds a different request (422).
	answerKeyReused
	// answerRefuse: nothing is stored under the key and a check refuses it.
	answerRefuse
)

// ReplayFirst is the rule "replays first" (issue 24): a stored intent under
// the key decides before any check that depends on time or configuration.
// stored is the intent the key holds (nil: none), h the hashes of the
// request now submitted (RequestHashes.Same compares them with the stored
// one), refusal what those checks said (nil: nothing refuses). Pure.
func ReplayFirst(stored *Intent, bot string, h RequestHashes, refusal error) submitAnswer {
	switch {
	case stored != nil && stored.Bot == bot && h.Same(stored.RequestHash):
		return answerReplay
	case stored != nil:
		return answerKeyReused
	case refusal != nil:
		return answerRefuse
	}
	return answerCreate
}

func answer(a submitAnswer, id string, stored *Intent, refusal error) (SubmitResult, error) {
	switch a {
	case answerReplay:
		return SubmitResult{Intent: stored, Replayed: true}, nil
	case answerKeyReused:
		return SubmitResult{}, fmt.Errorf("intent %s: %w", id, ErrIdempotencyKeyReused)
	case answerRefuse:
		return SubmitResult{}, refusal
	}
	// answerCreate after a failed conditional put: the item vanished between
	// the put and its answer (cannot happen: intents are never deleted).
	return SubmitResult{}, fmt.Errorf("intent %s: %w", id, ErrConflict)
}

// decodeSubmit canonicalises the whole body once (RFC 8785 is applied
// recursively, so the payload and metadata inside the canonical body are
// already canonical) and decodes the request from it. The same pass
// refuses a body that is not I-JSON (core/ijson.go), so what is
// canonicalised is exactly what the bot sent, value for value.
func decodeSubmit(body []byte) ([]byte, *SubmitRequest, error) {
	canonical, err := Canonicalize(body)
	if err != nil {
		return nil, nil, err
	}
	req, err := decodeStrict(canonical)
	return canonical, req, err
}

func decodeStrict(body []byte) (*SubmitRequest, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req SubmitRequest
	if err := dec.Decode(&req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "" {
			return nil, &ValidationError{Code: CodeMalformedJSON, Message: "the request body must be a JSON object"}
		}
		if errors.As(err, &te) {
			return nil, invalid(te.Field, "%s must be a JSON %s", te.Field, jsonKind(te.Type.Kind().String()))
		}
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return nil, invalid(f, "unknown field %q", f)
		}
		return nil, &ValidationError{Code: CodeMalformedJSON, Message: "the request body must be a JSON object: " + err.Error()}
	}
	return &req, nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "int64", "int", "float64":
		return "number"
	case "struct", "map":
		return "object"
	case "slice":
		return "array or object"
	}
	return "value of another type"
}

// build checks the request and makes its intent. err is bad input, which
// no stored intent can change (400); refusal is a check that depends on
// time or configuration (deadline passed, unknown provider or action),
// which a replay overrides (ReplayFirst).
func (s *Intake) build(bot, key string, canonical []byte, req *SubmitRequest, now time.Time) (in *Intent, refusal, err error) {
	switch req.Kind {
	case KindReply, KindAction:
	case "":
		return nil, nil, invalid("kind", "kind is required: \"reply\" or \"action\"")
	default:
		return nil, nil, invalid("kind", "kind must be \"reply\" or \"action\"")
	}
	for _, f := range []struct{ name, v string }{
		{"provider", req.Provider}, {"account", req.Account}, {"action", req.Action}, {"target", req.Target},
	} {
		if strings.TrimSpace(f.v) == "" {
			return nil, nil, invalid(f.name, "%s is required", f.name)
		}
		if err := CheckID(f.name, f.v); err != nil {
			return nil, nil, err
		}
	}
	if len(bytes.TrimSpace(req.Payload)) == 0 || bytes.TrimSpace(req.Payload)[0] != '{' {
		return nil, nil, invalid("payload", "payload is required and must be a JSON object")
	}
	if req.Grant == nil || req.Grant.ID == "" {
		return nil, nil, invalid("grant.id", "grant {id, version} is required")
	}
	if err := CheckID("grant.id", req.Grant.ID); err != nil {
		return nil, nil, err
	}
	if req.Grant.Version < 1 {
		return nil, nil, invalid("grant.version", "grant.version must be a positive integer")
	}
	if req.Source != nil {
		if req.Source.ID == "" {
			return nil, nil, invalid("source.id", "source.id is required when source is given")
		}
		if err := CheckID("source.id", req.Source.ID); err != nil {
			return nil, nil, err
		}
		if req.Source.Revision < 0 {
			return nil, nil, invalid("source.revision", "source.revision must not be negative")
		}
	}
	var deadline *time.Time
	if req.Deadline != nil {
		d, err := time.Parse(time.RFC3339, *req.Deadline)
		if err != nil {
			return nil, nil, invalid("deadline", "deadline must be an RFC 3339 timestamp")
		}
		if !d.After(now) {
			refusal = &ValidationError{Code: CodeDeadlinePassed, Field: "deadline", Message: "deadline is already in the past"}
		}
		d = d.UTC()
		deadline = &d
	}
	if len(req.Metadata) > 0 && bytes.TrimSpace(req.Metadata)[0] != '{' {
		return nil, nil, invalid("metadata", "metadata must be a JSON object")
	}
	if err := checkFieldBytes("metadata", req.Metadata); err != nil {
		return nil, nil, err
	}
	if refusal == nil {
		if p, ok := s.Providers.Provider(req.Provider); !ok {
			refusal = &ValidationError{Code: CodeUnknownProvider, Field: "provider", Message: fmt.Sprintf("no provider named %q", req.Provider)}
		} else if !p.SupportsAction(req.Action) {
			refusal = &ValidationError{Code: CodeUnknownAction, Field: "action", Message: fmt.Sprintf("provider %q has no action %q", req.Provider, req.Action)}
		}
	}
	payload := append(json.RawMessage(nil), req.Payload...)
	var metadata json.RawMessage
	if len(req.Metadata) > 0 {
		metadata = append(json.RawMessage(nil), req.Metadata...)
	}
	in = &Intent{
		ID:             IntentID(bot, key),
		Bot:            bot,
		IdempotencyKey: key,
		Kind:           req.Kind,
		Provider:       req.Provider,
		Account:        req.Account,
		Action:         req.Action,
		Target:         req.Target,
		Payload:        payload,
		PayloadHash:    HashBytes(payload),
		Source:         req.Source,
		Grant:          *req.Grant,
		Deadline:       deadline,
		Metadata:       metadata,
		Status:         StatusPending,
		Version:        1,
		CreatedAt:      now,
		UpdatedAt:      now,
		Attempts:       []Attempt{},
	}
	in.RequestHash = EffectHash(in)
	return in, refusal, nil
}
