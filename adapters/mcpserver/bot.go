package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/botharness/outbox/client"
)

// MaxWaitSeconds caps wait_seconds: an /mcp call must answer within API
// Gateway's 30 s integration timeout (TestWaitSecondsCapped).
const MaxWaitSeconds = 25

// SubmitInput is submit_intent's arguments.
type SubmitInput struct {
	RunID string `json:"run_id" jsonschema:"your run, conversation or thread id: stable across retries and restarts of the run"`
	Step  string `json:"step" jsonschema:"the logical step of the run this intent is (e.g. reply-to-msg-42): stable across retries of that step. The same run_id, step and action always name the same intent"`
	Kind  string `json:"kind" jsonschema:"reply (answers a source message) or action"`

	Provider string         `json:"provider" jsonschema:"the provider, e.g. slack, telegram, http, sandbox"`
	Account  string         `json:"account" jsonschema:"the provider account to send from"`
	Action   string         `json:"action" jsonschema:"the provider action, e.g. send_message"`
	Target   string         `json:"target" jsonschema:"where it goes: a channel, chat or resource id"`
	Payload  map[string]any `json:"payload" jsonschema:"the action's body, a JSON object"`
	Grant    GrantInput     `json:"grant" jsonschema:"the grant this bot sends under"`
	Deadline string         `json:"deadline,omitempty" jsonschema:"RFC 3339 time after which it must not be sent"`
	Source   *SourceInput   `json:"source,omitempty" jsonschema:"the source message revision this answers (a reply to an edited or deleted message is not sent)"`
	// WaitSeconds asks to wait for the outcome (0: answer at once).
	WaitSeconds int `json:"wait_seconds,omitempty" jsonschema:"seconds to wait for the outcome before answering (0 to 25; 0 answers once it is accepted)"`
}

// GrantInput names a grant.
type GrantInput struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

// SourceInput names a source revision.
type SourceInput struct {
	ID       string `json:"id"`
	Revision int64  `json:"revision"`
}

// Outcome words, one per group of statuses. A model reads Outcome and
// Message; Status is the API's.
const (
	OutcomeSucceeded = "succeeded" // the provider confirmed it
	OutcomePending   = "pending"   // accepted, not yet confirmed
	OutcomeUnknown   = "unknown"   // may or may not have reached the provider
	OutcomeNotSent   = "not-sent"  // ended without an effect
	OutcomeFailed    = "failed"    // the provider refused, or retries ran out
)

// UnknownOutcomeWords start the message of every uncertain outcome.
const UnknownOutcomeWords = "unknown outcome — a human will decide; do not retry or send this again"

// IntentOutcome is what the bot tools answer.
type IntentOutcome struct {
	IntentID       string `json:"intent_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status" jsonschema:"the API's status"`
	Outcome        string `json:"outcome" jsonschema:"succeeded, pending, unknown, not-sent or failed"`
	Message        string `json:"message" jsonschema:"what it means and what to do next"`
	Replayed       bool   `json:"replayed,omitempty" jsonschema:"this run_id and step were already submitted: this is that intent, nothing new was sent"`
	StatusReason   string `json:"status_reason,omitempty"`
	ExternalID     string `json:"external_id,omitempty" jsonschema:"the provider's id of what it did"`
	Attempts       int    `json:"attempts"`
	PayloadHash    string `json:"payload_hash,omitempty"`
	// Check says how to learn the end of a pending intent.
	Check string `json:"check,omitempty"`
}

// statusMeanings is what each status but succeeded tells a bot: its
// outcome, the message, and whether it is worth checking again later.
var statusMeanings = map[client.Status]struct {
	outcome, message string
	check            bool
}{
	client.StatusNeedsHuman: {OutcomeUnknown, UnknownOutcomeWords + ". It may or may not have reached the provider, and the provider cannot tell; " +
		"it is neither a success nor a failure until a person decides. Tell the user it is being checked.", true},
	client.StatusUnknownOutcome: {OutcomeUnknown, UnknownOutcomeWords + ". It may or may not have reached the provider; the outbox is asking the provider now, " +
		"and if the provider cannot tell, a person decides. It is neither a success nor a failure yet.", true},
	client.StatusPending:          {OutcomePending, pendingWords, true},
	client.StatusInFlight:         {OutcomePending, pendingWords, true},
	client.StatusRetryableFailure: {OutcomePending, pendingWords, true},
	client.StatusFailed:           {OutcomeFailed, "failed: the provider refused it, or retries ran out with proof that nothing was sent. It was not delivered.", false},
	client.StatusAbandoned:        {OutcomeNotSent, "not sent: a human decided to abandon it. Do not send it again.", false},
	client.StatusExpired:          {OutcomeNotSent, "not sent: its deadline passed before it could be delivered.", false},
	client.StatusGrantRevoked:     {OutcomeNotSent, "not sent: its grant no longer covers it.", false},
	client.StatusSourceRevised:    {OutcomeNotSent, "not sent: the message it answers was edited or deleted.", false},
}

const pendingWords = "pending: accepted and durable; the outbox delivers it (and retries it safely) on its own. " +
	"Do not submit it again under another step; the same run_id and step are safe to repeat."

func outcome(in *client.Intent, replayed bool) IntentOutcome {
	o := IntentOutcome{IntentID: in.ID, IdempotencyKey: in.IdempotencyKey, Status: string(in.Status), Replayed: replayed,
		StatusReason: in.StatusReason, ExternalID: in.ExternalID, Attempts: in.AttemptCount, PayloadHash: in.PayloadHash}
	check := fmt.Sprintf("call wait_for_intent with intent_id %q (or get_intent) to learn its end", in.ID)
	if in.Status == client.StatusSucceeded {
		o.Outcome = OutcomeSucceeded
		o.Message = "succeeded: the provider confirmed it"
		if in.ExternalID != "" {
			o.Message += " (provider id " + in.ExternalID + ")"
		}
		o.Message += ". Done; do not send it again."
	} else if m, ok := statusMeanings[in.Status]; ok {
		o.Outcome, o.Message = m.outcome, m.message
		if m.check {
			o.Check = check
		}
	} else {
		o.Outcome = OutcomePending
		o.Message = "status " + string(in.Status)
		o.Check = check
	}
	if in.StatusReason != "" {
		o.Message += " Reason: " + in.StatusReason + "."
	}
	if o.Check != "" {
		o.Message += " To check: " + o.Check + "."
	}
	return o
}

func (o IntentOutcome) text() string {
	head := strings.ToUpper(o.Outcome)
	if o.Outcome == OutcomeUnknown {
		head = "UNKNOWN OUTCOME"
	}
	s := fmt.Sprintf("%s — intent %s (status %s). %s", head, o.IntentID, o.Status, o.Message)
	if o.Replayed {
		s += " (This run_id and step were already submitted: this is the same intent; nothing new was sent.)"
	}
	return s
}

// KeyFor is submit_intent's idempotency key: the run, the step and the
// action — what the agent declares stable — never a tool-call id.
func KeyFor(runID, step, action string) string { return client.KeyFor(runID, step, action) }

func (in SubmitInput) validate() error {
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	switch {
	case blank(in.RunID):
		return invalid("run_id", "run_id is required: name your run, conversation or thread, the same on every retry")
	case blank(in.Step):
		return invalid("step", "step is required and must not be blank: name the logical step of your run this intent is "+
			"(for example reply-to-msg-42), and call again with the same run_id and step whenever you retry it — "+
			"that is what makes it sent at most once. Do not use a tool-call id: it changes on every retry")
	case in.Kind != "reply" && in.Kind != "action":
		return invalid("kind", "kind is reply or action")
	case in.Payload == nil:
		return invalid("payload", "payload is required: a JSON object")
	case in.WaitSeconds < 0 || in.WaitSeconds > MaxWaitSeconds:
		return invalid("wait_seconds", fmt.Sprintf("wait_seconds is 0 to %d", MaxWaitSeconds))
	}
	return nil
}

func (in SubmitInput) request() (client.IntentRequest, error) {
	payload, err := json.Marshal(in.Payload)
	if err != nil {
		return client.IntentRequest{}, invalid("payload", "payload is not JSON: "+err.Error())
	}
	r := client.IntentRequest{Kind: in.Kind, Provider: in.Provider, Account: in.Account, Action: in.Action, Target: in.Target,
		Payload: payload, Grant: client.GrantRef{ID: in.Grant.ID, Version: in.Grant.Version}}
	if in.Source != nil {
		r.Source = &client.SourceRef{ID: in.Source.ID, Revision: in.Source.Revision}
	}
	if in.Deadline != "" {
		t, err := time.Parse(time.RFC3339, in.Deadline)
		if err != nil {
			return r, invalid("deadline", "deadline is an RFC 3339 time, e.g. 2026-01-02T15:04:05Z")
		}
		r.Deadline = &t
	}
	return r, nil
}

func submit(ctx context.Context, d *deps, in SubmitInput) (IntentOutcome, string, error) {
	if err := in.validate(); err != nil {
		return IntentOutcome{}, "", err
	}
	req, err := in.request()
	if err != nil {
		return IntentOutcome{}, "", err
	}
	wait := time.Duration(in.WaitSeconds) * time.Second
	deadline := time.Now().Add(wait)
	sub, err := d.c.Submit(ctx, req, client.SubmitOptions{Key: KeyFor(in.RunID, in.Step, in.Action), PreferWait: wait})
	if err != nil {
		return IntentOutcome{}, "", err
	}
	intent := sub.Intent
	if wait > 0 && !sub.WaitApplied && !intent.Status.Settled() {
		intent = waitUntil(ctx, d, intent, deadline)
	}
	o := outcome(intent, sub.Replayed)
	return o, o.text(), nil
}

// waitUntil polls the intent until it settles or deadline passes, and
// returns the last state seen.
func waitUntil(ctx context.Context, d *deps, last *client.Intent, deadline time.Time) *client.Intent {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	in, err := d.c.Wait(wctx, last.ID, client.WaitOptions{Interval: 200 * time.Millisecond, MaxInterval: time.Second})
	if in != nil {
		return in
	}
	if err != nil {
		d.log.Debug("mcp: wait ended", "intent_id", last.ID, "error", err)
	}
	return last
}

// IntentIDInput names an intent.
type IntentIDInput struct {
	IntentID string `json:"intent_id" jsonschema:"the intent_id submit_intent answered"`
}

// WaitInput is wait_for_intent's arguments.
type WaitInput struct {
	IntentID    string `json:"intent_id" jsonschema:"the intent_id submit_intent answered"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"seconds to wait at most (1 to 25, default 20)"`
}

func getIntent(ctx context.Context, d *deps, in IntentIDInput) (IntentOutcome, string, error) {
	if strings.TrimSpace(in.IntentID) == "" {
		return IntentOutcome{}, "", invalid("intent_id", "intent_id is required")
	}
	got, err := d.c.Get(ctx, in.IntentID)
	if err != nil {
		return IntentOutcome{}, "", err
	}
	o := outcome(got, false)
	return o, o.text(), nil
}

func waitFor(ctx context.Context, d *deps, in WaitInput) (IntentOutcome, string, error) {
	if strings.TrimSpace(in.IntentID) == "" {
		return IntentOutcome{}, "", invalid("intent_id", "intent_id is required")
	}
	if in.WaitSeconds == 0 {
		in.WaitSeconds = 20
	}
	if in.WaitSeconds < 1 || in.WaitSeconds > MaxWaitSeconds {
		return IntentOutcome{}, "", invalid("wait_seconds", fmt.Sprintf("wait_seconds is 1 to %d", MaxWaitSeconds))
	}
	got, err := d.c.Get(ctx, in.IntentID)
	if err != nil {
		return IntentOutcome{}, "", err
	}
	if !got.Status.Settled() {
		got = waitUntil(ctx, d, got, time.Now().Add(time.Duration(in.WaitSeconds)*time.Second))
	}
	o := outcome(got, false)
	return o, o.text(), nil
}

const submitDescription = "Send a message or perform an action in the outside world, durably and at most once per logical step. " +
	"Give run_id (your run, conversation or thread) and step (the logical step of that run, e.g. reply-to-msg-42): " +
	"the idempotency key is derived from run_id, step and action — never from this tool call's id — so calling again " +
	"with the same run_id and step (after a timeout, a crash, a retried turn) returns the same intent and sends nothing twice. " +
	"A new message needs a new step. Changing the arguments under a step already used is refused (idempotency_key_reused). " +
	"With wait_seconds > 0 it waits for the outcome. The answer's outcome is succeeded, pending (check later with wait_for_intent), " +
	"failed, not-sent, or unknown: an unknown outcome means a human will decide — do not retry or send it again."

func enumProp(s *jsonschema.Schema, name string, values ...any) {
	if p := s.Properties[name]; p != nil {
		p.Enum = values
	}
}

func rangeProp(s *jsonschema.Schema, name string, lo, hi float64) {
	if p := s.Properties[name]; p != nil {
		p.Minimum, p.Maximum = &lo, &hi
	}
}

func minLen(s *jsonschema.Schema, names ...string) {
	for _, n := range names {
		if p := s.Properties[n]; p != nil {
			p.MinLength = ptr(1)
		}
	}
}

var botTools = []Tool{
	define("submit_intent", "Submit an intent (send once per step)", submitDescription,
		mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(true)},
		[]string{KindBot}, []string{"submitIntent", "getIntent"},
		func(s *jsonschema.Schema) {
			enumProp(s, "kind", "reply", "action")
			rangeProp(s, "wait_seconds", 0, MaxWaitSeconds)
			minLen(s, "run_id", "step", "provider", "account", "action", "target")
		}, submit),
	define("get_intent", "Read an intent", "Read one of your intents by intent_id: its status, outcome and what to do next. Changes nothing.",
		readOnly, []string{KindBot}, []string{"getIntent"},
		func(s *jsonschema.Schema) { minLen(s, "intent_id") }, getIntent),
	define("wait_for_intent", "Wait for an intent's outcome",
		"Wait (up to wait_seconds) until one of your intents is settled — succeeded, failed, not sent, or an unknown outcome "+
			"a human will decide — and answer its state; if it is still pending then, say so. Changes nothing.",
		readOnly, []string{KindBot}, []string{"getIntent"},
		func(s *jsonschema.Schema) { minLen(s, "intent_id"); rangeProp(s, "wait_seconds", 1, MaxWaitSeconds) }, waitFor),
}
