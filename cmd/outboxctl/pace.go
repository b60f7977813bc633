package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"text/tabwriter"
	"time"

	"github.com/botharness/outbox/core"
)

// pace show|set: an account's pace, pause and circuit breaker (issue 15).
type paceShowCmd struct {
	apiFlags
	Provider string `arg:"" help:"Provider (e.g. sandbox, slack)."`
	Account  string `arg:"" help:"Provider account."`
}

type paceSetCmd struct {
	apiFlags
	Provider string        `arg:"" help:"Provider (e.g. sandbox, slack)."`
	Account  string        `arg:"" help:"Provider account."`
	Rate     int           `help:"Sends per --per (with --per); omit both to return to the declared pace."`
	Per      time.Duration `help:"Period of --rate, e.g. 1s or 1m."`
	Burst    int           `default:"1" help:"Sends allowed back to back after an idle spell."`
	Reason   string        `required:"" help:"Why (recorded with the change)."`
}

func pacePath(provider, account string) string {
	return "/v1/admin/capabilities/" + url.PathEscape(provider) + "/" + url.PathEscape(account) + "/pace"
}

func (c *paceShowCmd) Run() error {
	out, err := c.call("GET", pacePath(c.Provider, c.Account), nil, nil)
	if err != nil {
		return err
	}
	return printPacing(out, c.JSON)
}

func (c *paceSetCmd) Run() error {
	body := core.PaceRequest{Reason: c.Reason}
	if c.Rate != 0 || c.Per != 0 {
		body.Pace = &core.Pace{Rate: c.Rate, Per: c.Per, Burst: c.Burst}
	}
	out, err := c.call("PUT", pacePath(c.Provider, c.Account), body, nil)
	if err != nil {
		return err
	}
	return printPacing(out, c.JSON)
}

func printPacing(out []byte, raw bool) error {
	if raw {
		_, err := os.Stdout.Write(append(out, '\n'))
		return err
	}
	var ap core.AccountPacing
	if err := json.Unmarshal(out, &ap); err != nil {
		return err
	}
	paceStr := func(p *core.Pace) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprintf("%d per %s (burst %d)", p.Rate, p.Per, p.Burst)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintf(tw, "declared\t%s\n", paceStr(ap.Declared))
	if o := ap.Override; o != nil {
		fmt.Fprintf(tw, "override\t%s by %s at %s: %s\n", paceStr(&o.Pace), o.By, o.At.Format(time.RFC3339), o.Reason)
	}
	fmt.Fprintf(tw, "effective\t%s\n", paceStr(ap.Effective))
	if ap.Paused != nil && ap.Paused.After(time.Now()) {
		fmt.Fprintf(tw, "paused until\t%s\n", ap.Paused.Format(time.RFC3339))
	}
	b := ap.Breaker
	state := "closed"
	if b.Open {
		state = "open"
		if b.OpenUntil != nil {
			state += " until " + b.OpenUntil.Format(time.RFC3339)
		}
	}
	fmt.Fprintf(tw, "breaker\t%s (consecutive failures %d, opens %d)\n", state, b.Failures, b.Opens)
	for _, ev := range ap.Events {
		fmt.Fprintf(tw, "event\t%s %s: %s\n", ev.At.Format(time.RFC3339), ev.Kind, ev.Detail)
	}
	return tw.Flush()
}
