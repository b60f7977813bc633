package providers_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/botharness/outbox/adapters/providers/contract"
	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/ses"
	"github.com/botharness/outbox/core"
)

// SES v2 SendEmail through the real AWS SDK against the SES fake: neither
// keys nor lookup; the SDK's own retries must be off (one request per
// attempt, whatever fails).
func contractSES(t *testing.T) {
	contract.Run(t, contract.Subject{
		Name: "ses",
		Start: func(t *testing.T) contract.Env {
			fk := fakes.NewSES(t, time.Now)
			fk.AddIdentity("example.com")
			return contract.Env{Fake: sesFake{fk}, BaseURL: fk.URL()}
		},
		New: func(t *testing.T, baseURL string, timeout time.Duration) core.Provider {
			cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), BaseEndpoint: aws.String(baseURL)}
			p, err := ses.New(nil, ses.Config{Client: ses.NewClient(cfg), Timeout: timeout,
				Accounts: map[string]ses.Account{"mail": {From: "orders@example.com"}}})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Request: func(n int) core.SendRequest {
			id := fmt.Sprintf("it_ses%d", n)
			return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "mail", Action: ses.ActionEmail,
				Target: "jo@example.com", Payload: []byte(fmt.Sprintf(`{"subject":"Order %d","text":"shipped"}`, n)), PayloadHash: "sha256:x", Attempt: 1}
		},
		Documented:         declared(t, "ses", ses.ActionEmail),
		ConfiguredAccounts: true,
	})
}

type sesFake struct{ fk *fakes.SES }

func (f sesFake) Inject(x contract.Fault) { f.fk.Inject(toFault(x)) }
func (f sesFake) Effects(r core.SendRequest) int {
	return len(f.fk.SentWithTag(ses.TagIntent, r.IntentID))
}
func (f sesFake) Release() { f.fk.Release() }
