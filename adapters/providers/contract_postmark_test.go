package providers_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/contract"
	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/postmark"
	"github.com/botharness/outbox/core"
)

// Postmark email against the Postmark fake: no keys, the outbound message
// search by Metadata as the lookup.
func contractPostmark(t *testing.T) {
	contract.Run(t, contract.Subject{
		Name: "postmark",
		Start: func(t *testing.T) contract.Env {
			fk := fakes.NewPostmark(t, time.Now)
			fk.AddServer("pm-server-token")
			fk.AddSender("orders@example.com")
			return contract.Env{Fake: postmarkFake{fk}, BaseURL: fk.URL()}
		},
		New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
			p, err := postmark.New(nil, postmark.Config{BaseURL: baseURL, Timeout: timeout,
				Accounts: map[string]postmark.Account{"mail": {ServerToken: "pm-server-token", From: "orders@example.com"}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: func(n int) core.SendRequest {
			id := fmt.Sprintf("it_postmark%d", n)
			return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "mail", Action: postmark.ActionEmail,
				Target: "jo@example.com", Payload: []byte(fmt.Sprintf(`{"Subject":"Order %d","TextBody":"shipped"}`, n)), PayloadHash: "sha256:x", Attempt: 1}
		},
		Documented:         declared(t, "postmark", postmark.ActionEmail),
		ConfiguredAccounts: true,
	})
}

type postmarkFake struct{ fk *fakes.Postmark }

func (f postmarkFake) Inject(x contract.Fault) { f.fk.Inject(toFault(x)) }
func (f postmarkFake) Effects(r core.SendRequest) int {
	return len(f.fk.SentWith(postmark.MetadataIntentKey, r.IntentID))
}
func (f postmarkFake) Release() { f.fk.Release() }
