package clients

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/webhooksig"
)

// clients/webhookvectors.json holds deliveries signed by the outbox's own
// Standard Webhooks signer; the TypeScript and Python clients' verifiers are
// checked against the same file (their unit tests), this test checks that
// the file is what the signer and verifier of the Go side say.
func TestWebhookVectorsAreTheOutboxSigners(t *testing.T) {
	b, err := os.ReadFile("webhookvectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Secret         string `json:"secret"`
		PreviousSecret string `json:"previousSecret"`
		Cases          []struct {
			Name    string            `json:"name"`
			Valid   bool              `json:"valid"`
			Now     int64             `json:"now"`
			Headers map[string]string `json:"headers"`
			Body    string            `json:"body"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	g := doc.Cases[0]
	ts, _ := strconv.ParseInt(g.Headers["webhook-timestamp"], 10, 64)
	sig, err := webhooksig.Sign(g.Headers["webhook-id"], time.Unix(ts, 0), []byte(g.Body), doc.PreviousSecret, doc.Secret)
	if err != nil || sig != g.Headers["webhook-signature"] {
		t.Fatalf("the signer gives %q (%v), the vector holds %q", sig, err, g.Headers["webhook-signature"])
	}
	valid := 0
	for _, c := range doc.Cases {
		v := webhooksig.Verifier{Secrets: webhooksig.StaticSecrets{"ops/*": {doc.Secret}}, Now: func() time.Time { return time.Unix(c.Now, 0) }}
		_, err := v.Verify(context.Background(), "ops", "events", c.Headers, []byte(c.Body))
		if (err == nil) != c.Valid {
			t.Errorf("%s: the outbox's verifier says %v, the vector says valid=%v", c.Name, err, c.Valid)
		}
		if c.Valid {
			valid++
		}
	}
	if valid == 0 || valid == len(doc.Cases) {
		t.Fatalf("%d of %d cases valid: the vectors must hold both", valid, len(doc.Cases))
	}
}
