package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/discord"
	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/core"
)

func discordMessage(text string) string {
	return fmt.Sprintf(`{"kind":"reply","provider":"discord","account":"support","action":"send_message","target":"1300","payload":{"content":%q},"grant":{"id":"g-discord","version":1}}`, text)
}

// Discord messages against the Discord fake (adapters/providers/fakes/discord.go):
// the nonce deduplicates a retry inside its window; past it, a human decides.
func TestDiscordMessages(t *testing.T) {
	t.Parallel()
	fk := fakes.NewDiscord(t, time.Now)
	fk.AddBot("bot-token-e2e", "1100")
	fk.AddChannel("1300")
	member := func(window int) string {
		return fmt.Sprintf(`{"baseUrl":%q,"timeoutMs":2000,"nonceWindowSeconds":%d,"accounts":{"support":{"token":"bot-token-e2e"}}}`, fk.URL(), window)
	}
	e := providerEnv(t, "discord", member(300))
	nonceRequests := func(id string) []fakes.DiscordRequest {
		var out []fakes.DiscordRequest
		for _, r := range fk.Requests() {
			if r.Nonce == discord.Nonce(id) {
				out = append(out, r)
			}
		}
		return out
	}
	t.Run("happy path", func(t *testing.T) {
		id := e.mustSubmit("discord-happy", discordMessage("hello"))
		in := e.waitStatus(id, 15*time.Second, core.StatusSucceeded)
		if n := fk.MessagesWithNonce(discord.Nonce(id)); n != 1 || in.ExternalID == "" {
			t.Fatalf("%d messages, external id %q", n, in.ExternalID)
		}
	})
	t.Run("response lost after commit: the same nonce returns the message", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
		id := e.mustSubmit("discord-drop", discordMessage("lost answer"))
		in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		reqs := nonceRequests(id)
		if len(reqs) < 2 || fk.MessagesWithNonce(discord.Nonce(id)) != 1 || in.ExternalID == "" {
			t.Fatalf("%d requests, %d messages, %s", len(reqs), fk.MessagesWithNonce(discord.Nonce(id)), trail(in))
		}
		for _, r := range reqs {
			if !r.EnforceNonce || r.Nonce != reqs[0].Nonce {
				t.Fatalf("the retry's nonce differs or is not enforced: %+v", reqs)
			}
		}
	})
	t.Run("a documented rejection fails without a retry", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.Reject})
		id := e.mustSubmit("discord-reject", discordMessage("rejected"))
		in := e.waitStatus(id, 15*time.Second, core.StatusFailed)
		if n := len(nonceRequests(id)); n != 1 || fk.MessagesWithNonce(discord.Nonce(id)) != 0 || in.AttemptCount != 1 {
			t.Fatalf("%d requests, %s", n, trail(in))
		}
	})
	t.Run("429 honours the body's fractional retry_after", func(t *testing.T) {
		fk.Inject(fakes.Fault{Kind: fakes.RateLimit, RetryAfter: 1500 * time.Millisecond})
		id := e.mustSubmit("discord-429", discordMessage("rate limited"))
		in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
		reqs := nonceRequests(id)
		if len(reqs) != 2 || reqs[0].Status != http.StatusTooManyRequests || fk.MessagesWithNonce(discord.Nonce(id)) != 1 {
			t.Fatalf("requests %+v, %s", reqs, trail(in))
		}
		var limited *core.Attempt
		for i := range in.Attempts {
			if in.Attempts[i].Evidence.HTTPStatus == http.StatusTooManyRequests {
				limited = &in.Attempts[i]
			}
		}
		if limited == nil || in.Attempts[len(in.Attempts)-1].StartedAt.Sub(limited.EndedAt) < 1500*time.Millisecond {
			t.Fatalf("the retry did not wait retry_after: %s", trail(in))
		}
	})
	t.Run("Prefer: wait answers succeeded inline", func(t *testing.T) {
		r := e.submitWait(botToken, "discord-inline", discordMessage("inline"), 5)
		var in core.Intent
		r.json(t, &in)
		if r.status != http.StatusCreated || in.Status != core.StatusSucceeded || fk.MessagesWithNonce(discord.Nonce(in.ID)) != 1 {
			t.Fatalf("inline: %d %s", r.status, r.body)
		}
	})
	t.Run("past the window an ambiguous failure goes to a human", func(t *testing.T) {
		// A one-second window: the retry (at least a second later) is past it.
		short := providerEnv(t, "discord", member(1))
		fk.Inject(fakes.Fault{Kind: fakes.DropAfterCommit})
		id := short.mustSubmit("discord-window", discordMessage("past the window"))
		in := short.waitStatus(id, 20*time.Second, core.StatusNeedsHuman)
		short.assertEffectsStayAt(func() int { return fk.MessagesWithNonce(discord.Nonce(id)) }, 1, time.Second)
		if n := len(nonceRequests(id)); n != 1 {
			t.Fatalf("%d sends past the window, want 1 (%s)", n, trail(in))
		}
	})
}

// assertEffectsStayAt: count() stays n for the whole window.
func (e *env) assertEffectsStayAt(count func() int, n int, window time.Duration) {
	e.t.Helper()
	e.consistently(window, fmt.Sprintf("effects stay %d", n), func() bool { return count() == n })
}
