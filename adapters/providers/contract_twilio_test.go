package providers_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/contract"
	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/twilio"
	"github.com/botharness/outbox/core"
)

const (
	twilioAccount = "AC00000000000000000000000000000001"
	twilioToken   = "contract-auth-token"
)

// Twilio SMS against the Twilio fake: neither keys nor lookup, so the
// suite checks that a repeat is a second message and that a lost answer is
// an unknown outcome with exactly one message.
func contractTwilio(t *testing.T) {
	contract.Run(t, contract.Subject{
		Name: "twilio",
		Start: func(t *testing.T) contract.Env {
			fk := fakes.NewTwilio(t, time.Now)
			fk.AddAccount(twilioAccount, twilioToken)
			fk.AddNumber("+15005550006")
			return contract.Env{Fake: twilioFake{fk}, BaseURL: fk.URL()}
		},
		New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
			p, err := twilio.New(nil, twilio.Config{BaseURL: baseURL, Timeout: timeout, StatusCallbackBaseURL: "https://outbox.example.com",
				Accounts: map[string]twilio.Account{"alerts": {AccountSID: twilioAccount, AuthToken: twilioToken, From: "+15005550006"}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: func(n int) core.SendRequest {
			id := fmt.Sprintf("it_twilio%d", n)
			return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "alerts", Action: twilio.ActionSMS,
				Target: "+15005550001", Payload: []byte(fmt.Sprintf(`{"body":"hello %s"}`, id)), PayloadHash: "sha256:x", Attempt: 1}
		},
		Documented:         declared(t, "twilio", twilio.ActionSMS),
		ConfiguredAccounts: true,
	})
}

type twilioFake struct{ fk *fakes.Twilio }

func (f twilioFake) Inject(x contract.Fault) { f.fk.Inject(toFault(x)) }
func (f twilioFake) Effects(r core.SendRequest) int {
	return len(f.fk.CreatedWith("intent=" + r.IntentID))
}
func (f twilioFake) Release() { f.fk.Release() }
