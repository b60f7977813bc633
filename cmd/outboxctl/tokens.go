package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core/auth"
)

// The token commands read and write the table directly: the first operator
// token has to come from somewhere other than the API it unlocks
// (docs/decisions.md "Tokens"). The admin API lists and revokes tokens too.

// withTokens runs f on the table's token registry.
func withTokens(root *cli, f func(ctx context.Context, reg *dynamo.Tokens) error) error {
	ctx := context.Background()
	clients, err := tableClients(ctx)
	if err != nil {
		return err
	}
	return f(ctx, dynamo.NewTokens(clients.DynamoDB, root.Table))
}

type tokenIssueCmd struct {
	Kind      string        `required:"" enum:"bot,operator,orchestrator" help:"Principal kind: bot, operator or orchestrator."`
	Name      string        `required:"" help:"Principal name, the token's owner (a bot's name scopes its intents)."`
	ExpiresIn time.Duration `help:"Expire the token this long after issuing (default: no expiry)."`
	Token     string        `help:"Use this token instead of generating one (dev only)." env:"OUTBOX_TOKEN"`
	JSON      bool          `help:"Print {token, id, ...} as JSON."`
}

func (c *tokenIssueCmd) Run(root *cli) error {
	return withTokens(root, func(ctx context.Context, reg *dynamo.Tokens) error {
		now := time.Now().UTC()
		req := auth.TokenIssue{Kind: c.Kind, Owner: c.Name, Secret: c.Token}
		if c.ExpiresIn > 0 {
			at := now.Add(c.ExpiresIn)
			req.ExpiresAt = &at
		}
		secret, t, err := auth.IssueToken(ctx, reg, req, now)
		if err != nil {
			return err
		}
		// The token is shown once, to the operator who asked for it; it is never logged or stored.
		if c.JSON {
			return json.NewEncoder(os.Stdout).Encode(map[string]any{"token": secret, "record": t})
		}
		fmt.Println(secret)
		fmt.Fprintf(os.Stderr, "issued %s (%s %s)\n", t.ID, t.Kind, t.Owner)
		return nil
	})
}

type tokenListCmd struct {
	JSON bool `help:"Print the records as JSON."`
}

func (c *tokenListCmd) Run(root *cli) error {
	return withTokens(root, func(ctx context.Context, reg *dynamo.Tokens) error {
		var all []auth.Token
		cursor := ""
		for {
			page, next, err := reg.ListTokens(ctx, cursor, 100)
			if err != nil {
				return err
			}
			all = append(all, page...)
			if next == "" {
				break
			}
			cursor = next
		}
		if c.JSON {
			return json.NewEncoder(os.Stdout).Encode(all)
		}
		now := time.Now()
		w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tKIND\tOWNER\tSTATUS\tCREATED\tEXPIRES\tREVOKED")
		tm := func(t *time.Time) string {
			if t == nil {
				return "-"
			}
			return t.UTC().Format(time.RFC3339)
		}
		for _, t := range all {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.Owner, t.TokenStatus(now), t.CreatedAt.UTC().Format(time.RFC3339), tm(t.ExpiresAt), tm(t.RevokedAt))
		}
		return w.Flush()
	})
}

type tokenRevokeCmd struct {
	ID     string `arg:"" help:"Token id (tok_...)."`
	Reason string `required:"" help:"Why (recorded with the token)."`
}

func (c *tokenRevokeCmd) Run(root *cli) error {
	return withTokens(root, func(ctx context.Context, reg *dynamo.Tokens) error {
		t, err := reg.RevokeToken(ctx, c.ID, time.Now().UTC(), c.Reason)
		if err != nil {
			return err
		}
		fmt.Printf("revoked %s (%s %s) at %s\n", t.ID, t.Kind, t.Owner, t.RevokedAt.UTC().Format(time.RFC3339))
		return nil
	})
}

type tokenRotateCmd struct {
	ID      string        `arg:"" help:"Id of the token to replace (tok_...)."`
	Overlap time.Duration `default:"24h" help:"How long the old token keeps working (core.DefaultRotationOverlap)."`
	JSON    bool          `help:"Print {token, record, old} as JSON."`
}

func (c *tokenRotateCmd) Run(root *cli) error {
	return withTokens(root, func(ctx context.Context, reg *dynamo.Tokens) error {
		secret, nt, old, err := auth.RotateToken(ctx, reg, c.ID, c.Overlap, time.Now().UTC())
		if err != nil {
			return err
		}
		if c.JSON {
			return json.NewEncoder(os.Stdout).Encode(map[string]any{"token": secret, "record": nt, "old": old})
		}
		fmt.Println(secret)
		fmt.Fprintf(os.Stderr, "issued %s; %s expires at %s\n", nt.ID, old.ID, old.ExpiresAt.UTC().Format(time.RFC3339))
		return nil
	})
}

type tokenAdoptCmd struct{}

func (c *tokenAdoptCmd) Run(root *cli) error {
	ctx := context.Background()
	clients, err := tableClients(ctx)
	if err != nil {
		return err
	}
	reg := dynamo.NewTokens(clients.DynamoDB, root.Table)
	hashes, err := dynamo.LegacyTokenHashes(ctx, clients.DynamoDB, root.Table)
	if err != nil {
		return err
	}
	for _, h := range hashes {
		t, err := reg.AdoptToken(ctx, h, time.Now())
		if err != nil {
			return err
		}
		fmt.Printf("adopted %s (%s %s)\n", t.ID, t.Kind, t.Owner)
	}
	fmt.Printf("%d tokens adopted\n", len(hashes))
	return nil
}
