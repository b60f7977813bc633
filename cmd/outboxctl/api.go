package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// apiFlags address the admin API.
type apiFlags struct {
	API   string `default:"http://127.0.0.1:4000" env:"OUTBOX_API_URL" help:"Base URL of the outbox HTTP API."`
	Token string `env:"OUTBOX_OPERATOR_TOKEN" required:"" help:"Operator (or orchestrator) bearer token."`
	JSON  bool   `help:"Print the raw JSON answer."`
}

func (a apiFlags) call(method, path string, body any, headers map[string]string) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, strings.TrimRight(a.API, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(out, &e) == nil && e.Error.Code != "" {
			return nil, fmt.Errorf("%d %s: %s", resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return nil, fmt.Errorf("%d: %s", resp.StatusCode, out)
	}
	return out, nil
}

type attemptRow struct {
	N          int       `json:"n"`
	Trigger    string    `json:"trigger"`
	StartedAt  time.Time `json:"startedAt"`
	Result     string    `json:"result"`
	ExternalID string    `json:"externalId"`
	Evidence   struct {
		HTTPStatus   int    `json:"httpStatus"`
		ProviderCode string `json:"providerCode"`
		Detail       string `json:"detail"`
	} `json:"evidence"`
}

type intentsListCmd struct {
	apiFlags
	Status string `default:"needs-human" help:"Status to list (non-terminal statuses only)."`
	Limit  int    `default:"50" help:"Page size (1-100)."`
	Cursor string `help:"Cursor from a previous page."`
}

func (c *intentsListCmd) Run() error {
	q := url.Values{"status": {c.Status}, "limit": {fmt.Sprint(c.Limit)}}
	if c.Cursor != "" {
		q.Set("cursor", c.Cursor)
	}
	out, err := c.call("GET", "/v1/admin/intents?"+q.Encode(), nil, nil)
	if err != nil || c.JSON {
		os.Stdout.Write(out)
		return err
	}
	var page struct {
		Items []struct {
			ID, Bot, Provider, Account, Action, Target, StatusReason, Recommended string
			AttemptCount                                                          int
			UpdatedAt                                                             time.Time
			LastAttempt                                                           *attemptRow
		} `json:"items"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(out, &page); err != nil {
		return err
	}
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
	out, err := c.call("GET", "/v1/admin/intents/"+url.PathEscape(c.ID), nil, nil)
	if err != nil || c.JSON {
		os.Stdout.Write(out)
		return err
	}
	var in struct {
		ID, Bot, IdempotencyKey, Provider, Account, Action, Target, Status, StatusReason, ExternalID, PayloadHash string
		Attempts                                                                                                  []attemptRow
		Resolutions                                                                                               []struct {
			At                                        time.Time
			By, ByKind, Decision, Reason              string
			RecommendationOnly, DuplicateRiskAccepted bool
		}
	}
	if err := json.Unmarshal(out, &in); err != nil {
		return err
	}
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
}

func (c *resolveCmd) Run() error {
	key := c.Key
	if key == "" {
		// The same decision typed twice (a retried command) is one decision.
		sum := sha256.Sum256([]byte(c.ID + "\x00" + c.Decision + "\x00" + c.Reason + "\x00" + c.ExternalID))
		key = "cli-" + hex.EncodeToString(sum[:16])
	}
	body := map[string]string{"decision": c.Decision, "reason": c.Reason}
	if c.ExternalID != "" {
		body["externalId"] = c.ExternalID
	}
	out, err := c.call("POST", "/v1/admin/intents/"+url.PathEscape(c.ID)+"/resolution", body, map[string]string{"Idempotency-Key": key})
	if err != nil || c.JSON {
		os.Stdout.Write(out)
		return err
	}
	var in struct{ ID, Status, StatusReason string }
	_ = json.Unmarshal(out, &in)
	fmt.Printf("%s is now %s (%s)\n", in.ID, in.Status, in.StatusReason)
	return nil
}

type recommendCmd struct {
	apiFlags
	ID       string `arg:"" help:"Intent id."`
	Decision string `required:"" enum:"reconcile,retry,accept-success,abandon" help:"The recommended decision."`
	Summary  string `required:"" help:"The evidence summary behind it."`
}

func (c *recommendCmd) Run() error {
	out, err := c.call("POST", "/v1/admin/intents/"+url.PathEscape(c.ID)+"/recommendation", map[string]string{"decision": c.Decision, "summary": c.Summary}, nil)
	if err != nil || c.JSON {
		os.Stdout.Write(out)
		return err
	}
	fmt.Printf("recommendation recorded on %s; a human still decides\n", c.ID)
	return nil
}
