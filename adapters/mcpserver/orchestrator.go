package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/botharness/outbox/client"
)

// ListInput is list_needs_human's arguments.
type ListInput struct {
	Limit  int    `json:"limit,omitempty" jsonschema:"page size, 1 to 100 (default 20)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page"`
}

// NeedsHumanItem is one intent waiting for a human.
type NeedsHumanItem struct {
	IntentID     string    `json:"intent_id"`
	Bot          string    `json:"bot"`
	Provider     string    `json:"provider"`
	Account      string    `json:"account"`
	Action       string    `json:"action"`
	Target       string    `json:"target"`
	StatusReason string    `json:"status_reason,omitempty"`
	Attempts     int       `json:"attempts"`
	WaitingSince time.Time `json:"waiting_since"`
	Recommended  string    `json:"recommended,omitempty" jsonschema:"the latest recommendation already recorded, if any"`
}

// ListOutput is a page of intents waiting for a human.
type ListOutput struct {
	Items      []NeedsHumanItem `json:"items"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

func listNeedsHuman(ctx context.Context, d *deps, in ListInput) (ListOutput, string, error) {
	if in.Limit == 0 {
		in.Limit = 20
	}
	if in.Limit < 1 || in.Limit > 100 {
		return ListOutput{}, "", invalid("limit", "limit is 1 to 100")
	}
	page, err := d.c.Admin().List(ctx, client.ListOptions{Status: client.StatusNeedsHuman, Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return ListOutput{}, "", err
	}
	out := ListOutput{Items: make([]NeedsHumanItem, 0, len(page.Items)), NextCursor: page.NextCursor}
	for _, it := range page.Items {
		out.Items = append(out.Items, NeedsHumanItem{IntentID: it.ID, Bot: it.Bot, Provider: it.Provider, Account: it.Account,
			Action: it.Action, Target: it.Target, StatusReason: it.StatusReason, Attempts: it.AttemptCount,
			WaitingSince: it.WaitingSince, Recommended: it.Recommended})
	}
	text := fmt.Sprintf("%d intent(s) wait for a human decision.", len(out.Items))
	if out.NextCursor != "" {
		text += " More: call again with cursor " + out.NextCursor + "."
	}
	return out, text, nil
}

// EvidenceEntry is one entry of an intent's history (never a payload body).
type EvidenceEntry struct {
	N            int               `json:"n"`
	Trigger      string            `json:"trigger"`
	StartedAt    time.Time         `json:"started_at"`
	EndedAt      time.Time         `json:"ended_at"`
	Result       string            `json:"result"`
	ExternalID   string            `json:"external_id,omitempty"`
	HTTPStatus   int               `json:"http_status,omitempty"`
	ProviderCode string            `json:"provider_code,omitempty"`
	Detail       string            `json:"detail,omitempty"`
	Extra        map[string]string `json:"extra,omitempty"`
	Checks       string            `json:"checks,omitempty" jsonschema:"what revalidation saw before the attempt"`
}

// Note is a recommendation or a human decision.
type Note struct {
	At       time.Time `json:"at"`
	By       string    `json:"by"`
	ByKind   string    `json:"by_kind"`
	Decision string    `json:"decision"`
	Reason   string    `json:"reason,omitempty"`
}

// Evidence is what get_evidence answers: the identity and state of an
// intent, its attempt timeline, reconciliation results and webhook
// bindings, recommendations and decisions — the payload only by its hash.
type Evidence struct {
	IntentID        string          `json:"intent_id"`
	Bot             string          `json:"bot"`
	IdempotencyKey  string          `json:"idempotency_key"`
	Provider        string          `json:"provider"`
	Account         string          `json:"account"`
	Action          string          `json:"action"`
	Target          string          `json:"target"`
	Status          string          `json:"status"`
	StatusReason    string          `json:"status_reason,omitempty"`
	PayloadHash     string          `json:"payload_hash" jsonschema:"the payload's hash; the body itself is not shown"`
	GrantID         string          `json:"grant_id"`
	GrantVersion    int64           `json:"grant_version"`
	AttemptCount    int             `json:"attempt_count"`
	ExternalID      string          `json:"external_id,omitempty"`
	Attempts        []EvidenceEntry `json:"attempts" jsonschema:"provider attempts, oldest first"`
	Reconciliations []EvidenceEntry `json:"reconciliations" jsonschema:"outcome lookups at the provider, oldest first"`
	WebhookBindings []EvidenceEntry `json:"webhook_bindings" jsonschema:"provider webhooks bound to this intent (acknowledgements, statuses, echoes)"`
	Recommendations []Note          `json:"recommendations"`
	Decisions       []Note          `json:"decisions"`
}

func entry(a client.Attempt) EvidenceEntry {
	e := EvidenceEntry{N: a.N, Trigger: a.Trigger, StartedAt: a.StartedAt, EndedAt: a.EndedAt, Result: a.Result, ExternalID: a.ExternalID,
		HTTPStatus: a.Evidence.HTTPStatus, ProviderCode: a.Evidence.ProviderCode, Detail: a.Evidence.Detail, Extra: a.Evidence.Extra}
	if a.Checks != nil {
		e.Checks = a.Checks.Result
		if a.Checks.Reason != "" {
			e.Checks += ": " + a.Checks.Reason
		}
	}
	return e
}

func getEvidence(ctx context.Context, d *deps, in IntentIDInput) (Evidence, string, error) {
	if strings.TrimSpace(in.IntentID) == "" {
		return Evidence{}, "", invalid("intent_id", "intent_id is required")
	}
	a := d.c.Admin()
	got, err := a.Show(ctx, in.IntentID)
	if err != nil {
		return Evidence{}, "", err
	}
	attempts, resolutions := got.Attempts, got.Resolutions
	if got.History != nil && (got.History.SpilledAttempts > 0 || got.History.SpilledResolutions > 0) {
		// Older entries were moved out of the intent: read the whole history.
		attempts, resolutions = nil, nil
		for cursor := ""; ; {
			s, err := a.History(ctx, in.IntentID, cursor)
			if err != nil {
				return Evidence{}, "", err
			}
			attempts = append(attempts, s.Attempts...)
			resolutions = append(resolutions, s.Resolutions...)
			if cursor = s.NextCursor; cursor == "" {
				break
			}
		}
	}
	ev := Evidence{IntentID: got.ID, Bot: got.Bot, IdempotencyKey: got.IdempotencyKey, Provider: got.Provider, Account: got.Account,
		Action: got.Action, Target: got.Target, Status: string(got.Status), StatusReason: got.StatusReason, PayloadHash: got.PayloadHash,
		GrantID: got.Grant.ID, GrantVersion: got.Grant.Version, AttemptCount: got.AttemptCount, ExternalID: got.ExternalID,
		Attempts: []EvidenceEntry{}, Reconciliations: []EvidenceEntry{}, WebhookBindings: []EvidenceEntry{},
		Recommendations: []Note{}, Decisions: []Note{}}
	for _, at := range attempts {
		switch {
		case at.Trigger == "webhook":
			ev.WebhookBindings = append(ev.WebhookBindings, entry(at))
		case at.Trigger == "reconcile" || strings.HasPrefix(at.Result, "lookup-"):
			ev.Reconciliations = append(ev.Reconciliations, entry(at))
		default:
			ev.Attempts = append(ev.Attempts, entry(at))
		}
	}
	for _, r := range resolutions {
		n := Note{At: r.At, By: r.By, ByKind: r.ByKind, Decision: r.Decision, Reason: r.Reason}
		if r.RecommendationOnly {
			ev.Recommendations = append(ev.Recommendations, n)
		} else {
			ev.Decisions = append(ev.Decisions, n)
		}
	}
	text := fmt.Sprintf("Intent %s of bot %s is %s: %d attempt(s), %d reconciliation result(s), %d webhook binding(s), %d recommendation(s), %d decision(s).",
		ev.IntentID, ev.Bot, ev.Status, len(ev.Attempts), len(ev.Reconciliations), len(ev.WebhookBindings), len(ev.Recommendations), len(ev.Decisions))
	if got.Status == client.StatusNeedsHuman {
		text += " It waits for a human decision; you may recommend one."
	}
	return ev, text, nil
}

// RecommendInput is recommend's arguments.
type RecommendInput struct {
	IntentID string `json:"intent_id" jsonschema:"an intent that needs a human"`
	Decision string `json:"decision" jsonschema:"what you recommend a human decide: reconcile, retry, accept-success or abandon"`
	Summary  string `json:"summary" jsonschema:"the evidence in a sentence or two"`
	Reason   string `json:"reason" jsonschema:"why this decision"`
}

// RecommendOutput says what was recorded.
type RecommendOutput struct {
	IntentID    string `json:"intent_id"`
	Status      string `json:"status" jsonschema:"unchanged: a recommendation changes no state"`
	Recorded    bool   `json:"recorded"`
	Decision    string `json:"decision"`
	Explanation string `json:"explanation"`
}

// RecommendationText is how summary and reason are recorded together (the
// API's recommendation has one text field, its summary).
func RecommendationText(summary, reason string) string {
	return strings.TrimSpace(summary) + "\nReason: " + strings.TrimSpace(reason)
}

func recommend(ctx context.Context, d *deps, in RecommendInput) (RecommendOutput, string, error) {
	switch {
	case strings.TrimSpace(in.IntentID) == "":
		return RecommendOutput{}, "", invalid("intent_id", "intent_id is required")
	case strings.TrimSpace(in.Summary) == "":
		return RecommendOutput{}, "", invalid("summary", "summary is required: the evidence in a sentence or two")
	case strings.TrimSpace(in.Reason) == "":
		return RecommendOutput{}, "", invalid("reason", "reason is required: why you recommend this decision")
	}
	got, err := d.c.Admin().Recommend(ctx, in.IntentID, in.Decision, RecommendationText(in.Summary, in.Reason))
	if err != nil {
		return RecommendOutput{}, "", err
	}
	out := RecommendOutput{IntentID: got.ID, Status: string(got.Status), Recorded: true, Decision: in.Decision,
		Explanation: "recorded as a recommendation only: nothing changed; a human decides."}
	return out, fmt.Sprintf("Recommendation %q recorded on %s (still %s). Only a human decides.", in.Decision, got.ID, got.Status), nil
}

var admins = []string{KindOrchestrator, KindOperator}

var orchestratorTools = []Tool{
	define("list_needs_human", "List intents waiting for a human",
		"List the intents waiting for a human decision (needs-human): each one's bot, provider, account, action, target, "+
			"why it waits, since when, and any recommendation already recorded. Changes nothing.",
		readOnly, admins, []string{"listIntents"},
		func(s *jsonschema.Schema) { rangeProp(s, "limit", 1, 100) }, listNeedsHuman),
	define("get_evidence", "Read an intent's evidence",
		"Read the evidence on one intent: its attempt timeline with each attempt's classification and provider evidence, "+
			"reconciliation (lookup) results, webhook bindings, recommendations and decisions. The payload is shown only by its hash. Changes nothing.",
		readOnly, admins, []string{"showIntent", "getIntentHistoryAdmin"},
		func(s *jsonschema.Schema) { minLen(s, "intent_id") }, getEvidence),
	define("recommend", "Recommend a decision",
		"Record a recommendation on an intent that needs a human: a decision (reconcile, retry, accept-success or abandon), "+
			"a summary of the evidence and your reason. It is recorded as a recommendation and changes no state: only a human decides. "+
			"Each call adds one recommendation.",
		mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: ptr(false), IdempotentHint: false, OpenWorldHint: ptr(false)},
		admins, []string{"recommendIntent"},
		func(s *jsonschema.Schema) {
			enumProp(s, "decision", client.DecisionReconcile, client.DecisionRetry, client.DecisionAcceptSuccess, client.DecisionAbandon)
			minLen(s, "intent_id", "summary", "reason")
		}, recommend),
}

var catalogue = append(append([]Tool(nil), botTools...), orchestratorTools...)
