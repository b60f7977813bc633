package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/botharness/outbox/client"
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

func (c *paceShowCmd) Run() error {
	return call(c.apiFlags, func(ctx context.Context, a *client.Admin) (*client.AccountPacing, error) {
		return a.Pace(ctx, c.Provider, c.Account)
	}, c.printPacing)
}

func (c *paceSetCmd) Run() error {
	var p *client.Pace
	if c.Rate != 0 || c.Per != 0 {
		p = &client.Pace{Rate: c.Rate, Per: c.Per.String(), Burst: c.Burst}
	}
	return call(c.apiFlags, func(ctx context.Context, a *client.Admin) (*client.AccountPacing, error) {
		return a.SetPace(ctx, c.Provider, c.Account, p, c.Reason)
	}, c.printPacing)
}

func (a apiFlags) printPacing(ap *client.AccountPacing) error {
	if done, err := a.printJSON(ap); done {
		return err
	}
	paceStr := func(p *client.Pace) string {
		if p == nil {
			return "none"
		}
		per := p.Per
		if d, err := time.ParseDuration(per); err == nil {
			per = d.String()
		}
		return fmt.Sprintf("%d per %s (burst %d)", p.Rate, per, max(p.Burst, 1))
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintf(tw, "declared\t%s\n", paceStr(ap.Declared))
	if o := ap.Override; o != nil {
		fmt.Fprintf(tw, "override\t%s by %s at %s: %s\n", paceStr(&o.Pace), o.By, o.At.Format(time.RFC3339), o.Reason)
	}
	fmt.Fprintf(tw, "effective\t%s\n", paceStr(ap.Effective))
	if ap.TargetPace != nil {
		fmt.Fprintf(tw, "per target\t%s\n", paceStr(ap.TargetPace))
	}
	if ap.PausedUntil != nil && ap.PausedUntil.After(time.Now()) {
		fmt.Fprintf(tw, "paused until\t%s\n", ap.PausedUntil.Format(time.RFC3339))
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
