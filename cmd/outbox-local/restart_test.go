package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/sandbox"
)

// TestRestartMidConversationKeepsSandboxState: make run's host and its
// in-process sandbox (OUTBOX_SANDBOX_STATE_FILE, as localstack/run.sh sets
// it) are killed and started again on the same data. The sandbox still has
// the account's webhook settings and continues its id counters, so the
// acknowledgement of a send made after the restart — whose response the
// sandbox drops, leaving the intent to a human on a provider without keys or
// lookup — carries a new event id and resolves its intent; no two intents
// share a sandbox external id, and the effects from before the restart are
// still listed.
func TestRestartMidConversationKeepsSandboxState(t *testing.T) {
	t.Parallel()
	requireEmulators(t)
	ctx := context.Background()
	bin := hostBinary(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	table := "restart_" + hex.EncodeToString(b[:])
	clients, err := awsconfig.LoadClients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = clients.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	const secret = "whsec_cmVzdGFydC1yZXN0YXJ0LXJlc3RhcnQ="
	state := filepath.Join(t.TempDir(), "data", "sandbox", "state.json")
	addr, sbAddr := lowFreeAddr(t), lowFreeAddr(t)
	api, sb := "http://"+addr, "http://"+sbAddr
	start := func() *exec.Cmd {
		return startHost(t, bin, api, "host",
			"OUTBOX_HTTP_ADDR="+addr, "OUTBOX_SANDBOX_ADDR="+sbAddr, "OUTBOX_TABLE="+table,
			"OUTBOX_SANDBOX_STATE_FILE="+state, "OUTBOX_PROVIDER_CONFIG=", "OUTBOX_SANDBOX_URL=",
			fmt.Sprintf(`OUTBOX_WEBHOOK_SECRETS={"sandbox/acct-r":%q}`, secret), "LOG_LEVEL=info")
	}
	store := dynamo.New(clients.DynamoDB, table)
	submit := func(key string) string {
		body := `{"kind":"reply","provider":"sandbox","account":"acct-r","action":"send_message","target":"chan-1","payload":{"text":"` + key + `"},"grant":{"id":"dev-grant","version":1}}`
		var created struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(post(t, api+"/v1/intents", key, body, http.StatusCreated), &created); err != nil || created.ID == "" {
			t.Fatalf("submit %s: %v", key, err)
		}
		return created.ID
	}
	waitStatus := func(id string, want core.Status) *core.Intent {
		var got *core.Intent
		waitFor(t, 30*time.Second, fmt.Sprintf("intent %s reaches %s", id, want), func() bool {
			in, err := store.Get(ctx, id)
			got = in
			return err == nil && in.Status == want
		})
		return got
	}

	host := start()
	// A provider with neither keys nor lookup, which acknowledges every
	// commit by webhook 1.5 s later (after the dispatcher has recorded the
	// uncertain outcome).
	post(t, sb+"/_sandbox/faults", "", fmt.Sprintf(`{"account":"acct-r","webhook":{"url":%q,"secret":%q,"delayMs":1500}}`,
		api+"/v1/webhooks/sandbox/acct-r", secret), http.StatusOK)
	before := waitStatus(submit("restart-1"), core.StatusSucceeded)
	waitFor(t, 30*time.Second, "the first acknowledgement is delivered", func() bool {
		var d struct{ Deliveries []sandbox.WebhookDelivery }
		getJSON(t, sb+"/_sandbox/webhooks?account=acct-r", &d)
		return len(d.Deliveries) > 0 && d.Deliveries[len(d.Deliveries)-1].Status == http.StatusOK
	})

	// Kill both mid-conversation (SIGKILL: nothing is saved on the way out).
	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	start()

	var effects sandbox.EffectsResponse
	getJSON(t, sb+"/_sandbox/effects?account=acct-r", &effects)
	if effects.Count != 1 || effects.Effects[0].IntentID != before.ID {
		t.Fatalf("sandbox effects after the restart: %+v; want the one effect of %s", effects, before.ID)
	}
	// The next send is committed and its answer dropped: with neither keys
	// nor lookup the intent waits for a human, until the acknowledgement
	// (sent by the webhook settings kept across the restart) resolves it.
	post(t, sb+"/_sandbox/faults", "", `{"account":"acct-r","faults":[{"kind":"drop_after_commit"}]}`, http.StatusOK)
	after := waitStatus(submit("restart-2"), core.StatusSucceeded)
	getJSON(t, sb+"/_sandbox/effects?account=acct-r", &effects)
	seen := map[string]string{}
	for _, e := range effects.Effects {
		if other, dup := seen[e.MessageID]; dup {
			t.Fatalf("sandbox external id %s names two intents: %s and %s", e.MessageID, other, e.IntentID)
		}
		seen[e.MessageID] = e.IntentID
	}
	if len(seen) != 2 || before.ExternalID == "" || before.ExternalID == after.ExternalID {
		t.Fatalf("external ids %q (before) and %q (after), effects %v; want two distinct", before.ExternalID, after.ExternalID, seen)
	}
	t.Logf("before the restart %s -> %s; after it %s -> %s (resolved by the acknowledgement)", before.ID, before.ExternalID, after.ID, after.ExternalID)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// lowFreeAddr is a free loopback address below the ephemeral port range.
func lowFreeAddr(t *testing.T) string {
	t.Helper()
	for range 200 {
		n, _ := rand.Int(rand.Reader, big.NewInt(12000))
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+n.Int64())
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free port in 20000-32000")
	return ""
}
