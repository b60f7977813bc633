package providers_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/contract"
	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/whatsapp"
	"github.com/botharness/outbox/core"
)

// WhatsApp against the Cloud API fake: neither keys nor lookup.
func contractWhatsApp(t *testing.T) {
	contract.Run(t, contract.Subject{
		Name: "whatsapp",
		Start: func(t *testing.T) contract.Env {
			fk := fakes.NewWhatsApp(t, time.Now)
			fk.AddNumber("106540352242922", "wa-contract-token")
			return contract.Env{Fake: whatsappFake{fk}, BaseURL: fk.URL()}
		},
		New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
			p, err := whatsapp.New(nil, whatsapp.Config{BaseURL: baseURL, Timeout: timeout,
				Accounts: map[string]whatsapp.Account{"support": {PhoneNumberID: "106540352242922", AccessToken: "wa-contract-token"}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: func(n int) core.SendRequest {
			id := fmt.Sprintf("it_wa%d", n)
			return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "support", Action: whatsapp.ActionSend,
				Target: "+16505551234", Payload: []byte(fmt.Sprintf(`{"type":"text","text":{"body":"hello %s"}}`, id)), PayloadHash: "sha256:x", Attempt: 1}
		},
		Documented:         declared(t, "whatsapp", whatsapp.ActionSend),
		ConfiguredAccounts: true,
	})
}

type whatsappFake struct{ fk *fakes.WhatsApp }

func (f whatsappFake) Inject(x contract.Fault)        { f.fk.Inject(toFault(x)) }
func (f whatsappFake) Effects(r core.SendRequest) int { return len(f.fk.SentWith(r.IntentID)) }
func (f whatsappFake) Release()                       { f.fk.Release() }
