// Command bot is a runnable example bot using the Go client. Start the
// outbox with `make run`, then, in another terminal:
//
//	go run ./examples/bot                 # answer three messages, each delivered inline (SubmitAndWait)
//	go run ./examples/bot -n 3 -wait=false # submit only
//
// Each reply is submitted under a key derived from the message it answers
// (client.KeyFor), so running the bot again — or a crash and restart between
// submitting and hearing back — never sends a reply twice: the outbox
// answers with the intent it already holds.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/botharness/outbox/client"
)

func main() {
	// The same variables make run prints (client.BaseURLFromEnv: OUTBOX_API_URL,
	// else http://$OUTBOX_HTTP_ADDR; OUTBOX_BOT_TOKEN).
	api := flag.String("api", client.BaseURLFromEnv(), "outbox API base URL (default $OUTBOX_API_URL, else http://$OUTBOX_HTTP_ADDR)")
	token := flag.String("token", client.TokenFromEnv(client.EnvBotToken, "dev-bot-token"), "bot bearer token ($OUTBOX_BOT_TOKEN)")
	n := flag.Int("n", 3, "how many messages to answer")
	run := flag.String("run", "demo", "conversation id (a new one sends new replies)")
	account := flag.String("account", "acct-1", "sandbox account")
	grant := flag.String("grant", "dev-grant", "grant id (version 1) the replies are sent under")
	wait := flag.Bool("wait", true, "wait for each reply to reach an end state")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := client.CheckReachable(ctx, *api, 2*time.Second); err != nil {
		fail("%v", err)
	}
	c := client.New(*api, *token)
	for i := 1; i <= *n; i++ {
		msgID := fmt.Sprintf("%s-msg-%d", *run, i)
		payload, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("reply to %s", msgID)})
		req := client.IntentRequest{
			Kind: "reply", Provider: "sandbox", Account: *account, Action: "send_message", Target: "chan-1",
			Payload: payload, Grant: client.GrantRef{ID: *grant, Version: 1},
		}
		// One key per logical attempt: "the reply to this message".
		opts := client.SubmitOptions{Key: client.KeyFor("example-bot", msgID, "reply")}
		var sub *client.Submission
		var err error
		if *wait {
			// The outbox makes the attempt inside the request (Prefer: wait)
			// and answers with the provider's answer; otherwise it waits.
			sub, err = c.SubmitAndWait(ctx, req, opts, client.AndWaitOptions{Poll: client.WaitOptions{Interval: 200 * time.Millisecond}})
		} else {
			sub, err = c.Submit(ctx, req, opts)
		}
		switch {
		case errors.Is(err, client.ErrIdempotencyKeyReused):
			fail("%s: this key already holds a different reply (use a new -run): %v", msgID, err)
		case errors.Is(err, client.ErrValidation):
			fail("%s: the outbox refused the request: %v", msgID, err)
		case err != nil:
			fail("%s: %v", msgID, err)
		}
		what := "accepted"
		switch {
		case sub.Replayed:
			what = "already held (replayed)"
		case sub.WaitApplied:
			what = "delivered inline"
		}
		fmt.Printf("%s: intent %s %s, key %s\n", msgID, sub.Intent.ID, what, sub.Key)
		if *wait {
			in := sub.Intent
			fmt.Printf("%s: %s after %d attempt(s) %s %s\n", msgID, in.Status, in.AttemptCount, in.ExternalID, in.StatusReason)
		}
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bot: "+format+"\n", args...)
	os.Exit(1)
}
