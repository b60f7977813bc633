package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/botharness/outbox/client"
)

// apiFlags address the admin API through the Go client (client.Admin): one
// HTTP client, one retry policy, one error model for bots and operators.
type apiFlags struct {
	API   string `default:"${api_url}" help:"Base URL of the outbox HTTP API (default: $$OUTBOX_API_URL, else http://$$OUTBOX_HTTP_ADDR, else http://127.0.0.1:4000)."`
	Token string `env:"OUTBOX_OPERATOR_TOKEN" required:"" help:"Operator (or orchestrator) bearer token (make run prints it as OUTBOX_OPERATOR_TOKEN)."`
	JSON  bool   `help:"Print the JSON answer."`
}

func (a apiFlags) admin() *client.Admin {
	return client.New(a.API, a.Token, client.WithRetry(client.RetryPolicy{AttemptTimeout: 60 * time.Second})).Admin()
}

// AfterApply runs before every API command: a wrong address fails at once,
// naming the address and where it came from, instead of after the client's
// connection retries.
func (a apiFlags) AfterApply() error {
	src := "--api"
	if u, s := client.BaseURLSourceFromEnv(); u == a.API {
		src = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := client.CheckReachable(ctx, a.API, 2*time.Second); err != nil {
		return fmt.Errorf("%w [address from %s]", err, src)
	}
	return nil
}

func (a apiFlags) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 3*time.Minute)
}

// explain turns the API gateway's bare 401/403 (no error code: the token
// is not recognised at all) into a message saying so.
func explain(err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Code == "" && (ae.Status == 401 || ae.Status == 403) {
		return fmt.Errorf("the token is not recognised (the API answered %d): pass --token or set OUTBOX_OPERATOR_TOKEN to the operator token make run printed, or issue one with `outboxctl token --kind operator`", ae.Status)
	}
	return err
}

// printJSON prints v when --json was given and reports whether it did.
func (a apiFlags) printJSON(v any) (bool, error) {
	if !a.JSON {
		return false, nil
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return true, enc.Encode(v)
}

// call makes one admin call under the command's deadline and shows the
// answer: as JSON with --json, else with show.
func call[T any](a apiFlags, do func(context.Context, *client.Admin) (T, error), show func(T) error) error {
	ctx, cancel := a.ctx()
	defer cancel()
	v, err := do(ctx, a.admin())
	if err != nil {
		return err
	}
	if done, err := a.printJSON(v); done {
		return err
	}
	return show(v)
}

type intentsListCmd struct {
	apiFlags
	Status string `default:"needs-human" enum:"needs-human,unknown-outcome,retryable-failure,pending,in-flight" help:"Status to list: needs-human, unknown-outcome, retryable-failure, pending or in-flight (read a final intent with intents show)."`
	Limit  int    `default:"50" help:"Page size (1-100)."`
	Cursor string `help:"Cursor from a previous page."`
}

func (c *intentsListCmd) Run() error {
	return call(c.apiFlags, func(ctx context.Context, a *client.Admin) (*client.IntentPage, error) {
		return a.List(ctx, client.ListOptions{Status: client.Status(c.Status), Limit: c.Limit, Cursor: c.Cursor})
	}, c.show)
}

func (c *intentsListCmd) show(page *client.IntentPage) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tBOT\tPROVIDER/ACCOUNT\tACTION\tTARGET\tATTEMPTS\tLAST RESULT\tRECOMMENDED\tUPDATED")
	for _, it := range page.Items {
		last := ""
		if it.LastAttempt != nil {
			last = it.LastAttempt.Result
		}
		fmt.Fprintf(w, "%s\t%s\t%s/%s\t%s\t%s\t%d\t%s\t%s\t%s\n", it.ID, it.Bot, it.Provider, it.Account, it.Action, it.Target,
			it.AttemptCount, last, it.Recommended, it.UpdatedAt.Format(time.RFC3339))
	}
	w.Flush()
	if page.NextCursor != "" {
		fmt.Printf("\nmore: --cursor %s\n", page.NextCursor)
	}
	return nil
}

type intentsShowCmd struct {
	apiFlags
	ID string `arg:"" help:"Intent id."`
}

func (c *intentsShowCmd) Run() error {
	return call(c.apiFlags, func(ctx context.Context, a *client.Admin) (*client.Intent, error) { return a.Show(ctx, c.ID) }, showIntent)
}

func showIntent(in *client.Intent) error {
	fmt.Printf("intent    %s\nbot       %s (key %q)\nprovider  %s/%s  action %s  target %s\nstatus    %s  %s\nexternal  %s\npayload   %s\n\nattempts:\n",
		in.ID, in.Bot, in.IdempotencyKey, in.Provider, in.Account, in.Action, in.Target, in.Status, in.StatusReason, in.ExternalID, in.PayloadHash)
	w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "  #\tTRIGGER\tSTARTED\tRESULT\tHTTP\tCODE\tEXTERNAL\tDETAIL")
	for _, a := range in.Attempts {
		fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", a.N, a.Trigger, a.StartedAt.Format(time.RFC3339), a.Result,
			a.Evidence.HTTPStatus, a.Evidence.ProviderCode, a.ExternalID, a.Evidence.Detail)
	}
	w.Flush()
	if len(in.Resolutions) > 0 {
		fmt.Println("\ndecisions and recommendations:")
		for _, r := range in.Resolutions {
			kind := "decision"
			if r.RecommendationOnly {
				kind = "recommendation"
			}
			risk := ""
			if r.DuplicateRiskAccepted {
				risk = " (duplicate risk accepted)"
			}
			fmt.Printf("  %s %s by %s %s: %s%s — %s\n", r.At.Format(time.RFC3339), kind, r.ByKind, r.By, r.Decision, risk, r.Reason)
		}
	}
	return nil
}

type resolveCmd struct {
	apiFlags
	ID         string `arg:"" help:"Intent id."`
	Decision   string `required:"" enum:"reconcile,retry,accept-success,abandon" help:"reconcile, retry, accept-success or abandon."`
	Reason     string `required:"" help:"Why; recorded with your name."`
	ExternalID string `help:"The provider's id, with accept-success."`
	Key        string `help:"Idempotency-Key for this decision (default: derived from intent, decision and reason)."`
	// AcceptDuplicateRisk is the operator's deliberate answer for a retry the
	// provider cannot deduplicate; without it such a retry is refused.
	AcceptDuplicateRisk bool `name:"accept-duplicate-risk" help:"With --decision retry at a provider that cannot deduplicate it: accept that the retry may cause a second effect. Without it such a retry is refused."`
}

func (c *resolveCmd) Run() error {
	// Without --key the key is derived from the decision, so the same
	// command typed twice (a retried shell) is one decision.
	err := call(c.apiFlags, func(ctx context.Context, a *client.Admin) (*client.Intent, error) {
		r := client.ResolutionRequest{Decision: c.Decision, Reason: c.Reason, ExternalID: c.ExternalID, Key: c.Key}
		if c.AcceptDuplicateRisk {
			r.AcceptDuplicateRisk = &c.AcceptDuplicateRisk
		}
		return a.Resolve(ctx, c.ID, r)
	}, func(in *client.Intent) error {
		fmt.Printf("%s is now %s (%s)\n", in.ID, in.Status, in.StatusReason)
		return nil
	})
	if errors.Is(err, client.ErrDuplicateRiskNotAccepted) {
		return fmt.Errorf("retry refused, nothing changed: the provider cannot deduplicate this retry, so it may cause a second effect; "+
			"run again with --accept-duplicate-risk to retry anyway (%w)", err)
	}
	return err
}

type recommendCmd struct {
	apiFlags
	ID       string `arg:"" help:"Intent id."`
	Decision string `required:"" enum:"reconcile,retry,accept-success,abandon" help:"The recommended decision."`
	Summary  string `required:"" help:"The evidence summary behind it."`
}

func (c *recommendCmd) Run() error {
	return call(c.apiFlags, func(ctx context.Context, a *client.Admin) (*client.Intent, error) {
		return a.Recommend(ctx, c.ID, c.Decision, c.Summary)
	}, func(*client.Intent) error {
		fmt.Printf("recommendation recorded on %s; a human still decides\n", c.ID)
		return nil
	})
}
