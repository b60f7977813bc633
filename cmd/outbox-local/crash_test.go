package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/sandbox"
)

// TestCrashedLocalHostIsSweptWithinLease: the local host honours
// OUTBOX_ATTEMPT_POLICY's lease and sweep grace like the functions. With a
// 5 s lease, a host
// killed (SIGKILL) while an attempt is in flight leaves the intent in flight;
// a restarted host's sweeper takes it down the unknown-outcome path within
// about lease + grace + one sweep interval of the crash, not the 60 s
// default lease.
func TestCrashedLocalHostIsSweptWithinLease(t *testing.T) {
	t.Parallel()
	requireEmulators(t)
	const (
		lease    = 5 * time.Second
		grace    = 2 * time.Second
		interval = 2 * time.Second
	)
	ctx := context.Background()
	bin := hostBinary(t)
	// The provider runs outside the host, so it survives the crash; its
	// account hangs every send, so the attempt is in flight when we kill.
	_, sbURL := sandbox.StartTest(t, time.Now)
	post(t, sbURL+"/_sandbox/faults", "", `{"account":"acct-crash","faults":[{"kind":"hang","delayMs":30000}]}`, http.StatusOK)

	start, store := hostLauncher(t, bin, "crash_", sbURL, lease, grace, interval)

	host, addr := start()
	body := `{"kind":"reply","provider":"sandbox","account":"acct-crash","action":"send_message","target":"chan-1","payload":{"text":"crash"},"grant":{"id":"dev-grant","version":1}}`
	var created struct {
		ID string `json:"id"`
	}
	json.Unmarshal(post(t, "http://"+addr+"/v1/intents", "crash-1", body, http.StatusCreated), &created)
	if created.ID == "" {
		t.Fatal("no intent id in the answer")
	}
	var inFlight *core.Intent
	waitFor(t, 30*time.Second, "the attempt is in flight", func() bool {
		in, err := store.Get(ctx, created.ID)
		if err == nil && in.Status == core.StatusInFlight {
			inFlight = in
			return true
		}
		return false
	})
	if err := host.Process.Kill(); err != nil { // SIGKILL: no shutdown path runs
		t.Fatal(err)
	}
	_ = host.Wait()
	killedAt := time.Now()
	if in, err := store.Get(ctx, created.ID); err != nil || in.Status != core.StatusInFlight {
		t.Fatalf("after the kill: %v %v; the attempt must still be in flight (the provider hangs past the kill)", in, err)
	}
	if got := inFlight.Lease.Until.Sub(inFlight.Lease.Since); got != lease {
		t.Fatalf("the host claimed with a %s lease, want OUTBOX_ATTEMPT_POLICY's lease %s", got, lease)
	}

	start()
	var swept *core.Intent
	bound := lease + grace + interval + 10*time.Second // + the second host's start-up
	waitFor(t, bound, "the restarted host sweeps the crashed attempt", func() bool {
		in, err := store.Get(ctx, created.ID)
		if err == nil && in.Status != core.StatusInFlight {
			swept = in
			return true
		}
		return false
	})
	took := time.Since(killedAt)
	last := swept.Attempts[len(swept.Attempts)-1]
	if last.Result != core.ResultLeaseExpired || !last.StartedAt.Equal(inFlight.Lease.Since) {
		t.Fatalf("swept to %s with last attempt %s started %s; want lease-expired started at the claim %s", swept.Status, last.Result, last.StartedAt, inFlight.Lease.Since)
	}
	t.Logf("crashed host's in-flight intent swept to %s %.1fs after the kill (lease %s, grace %s, sweep interval %s)", swept.Status, took.Seconds(), lease, grace, interval)
}

func post(t *testing.T, url, key, body string, want int) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer dev-bot-token")
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s, want %d", url, resp.StatusCode, b, want)
	}
	return b
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return lowFreeAddr(t) // below the ephemeral range: no outgoing connection holds it
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hostLauncher makes a fresh table for one process test and returns a start
// of the host binary on it (a free port below 32768, the sandbox at sbURL,
// the given lease and sweeper clocks; killed and its output logged on
// failure at cleanup, answering /healthz when start returns) and the
// table's store. Tables and queues are deleted at cleanup.
func hostLauncher(t *testing.T, bin, prefix, sbURL string, lease, grace, interval time.Duration) (func() (*exec.Cmd, string), *dynamo.Store) {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	table := prefix + hex.EncodeToString(b[:])
	clients, err := awsconfig.LoadClients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = clients.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		for _, q := range []string{table + "-retry", table + "-retry-dlq", table + "-inbox", table + "-inbox-dlq"} {
			if u, err := clients.SQS.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(q)}); err == nil {
				_, _ = clients.SQS.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: u.QueueUrl})
			}
		}
	})
	start := func() (*exec.Cmd, string) {
		addr := freeAddr(t)
		cmd := startHost(t, bin, "http://"+addr, "host "+addr,
			"OUTBOX_HTTP_ADDR="+addr, "OUTBOX_SANDBOX_URL="+sbURL, "OUTBOX_TABLE="+table,
			fmt.Sprintf(`OUTBOX_PROVIDER_CONFIG={"sandbox":{"baseUrl":%q,"timeoutMs":4000}}`, sbURL),
			fmt.Sprintf(`OUTBOX_ATTEMPT_POLICY={"lease":%q,"sweepGrace":%q}`, lease, grace), "OUTBOX_SWEEP_INTERVAL="+interval.String(),
			"LOG_LEVEL=info")
		return cmd, addr
	}
	return start, dynamo.New(clients.DynamoDB, table)
}

// startHost starts the host binary with env added to the environment and
// returns once it answers /healthz at base. It is killed at cleanup, and its
// output logged (as label) when the test failed.
func startHost(t *testing.T, bin, base, label string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", label, logs.String())
		}
	})
	waitFor(t, 90*time.Second, "the host answers /healthz", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return cmd
}
