package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
)

// readmeSnippet returns the first ```sh block after the marker
// <!-- provider-snippet:<name> --> in README.md.
func readmeSnippet(t *testing.T, readme, name string) string {
	t.Helper()
	marker := "<!-- provider-snippet:" + name + " -->"
	_, after, ok := strings.Cut(readme, marker)
	if !ok {
		t.Fatalf("README.md has no %s", marker)
	}
	m := regexp.MustCompile("(?s)^\\s*```sh\n(.*?)```").FindStringSubmatch(after)
	if m == nil {
		t.Fatalf("README.md: no ```sh block right after %s", marker)
	}
	return m[1]
}

// runSnippet runs a README block in bash with env and returns its stdout.
func runSnippet(t *testing.T, script string, env []string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("README snippet failed: %v\n%s\n--- script:\n%s", err, stderr, script)
	}
	return string(out)
}

// readmeFakes start, for each registered provider, the fake that accepts
// what its README configuration block configured: block is the provider's
// member of OUTBOX_PROVIDER_CONFIG (the fake's URL goes in), account and acct
// its one account. They return the fake's count of effects.
var readmeFakes = map[string]func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int{
	"slack": func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int {
		f := fakes.NewSlack(t, time.Now)
		f.AddToken(os.Getenv("SLACK_BOT_TOKEN"), account, acct["botId"].(string))
		f.AddChannel("C0123ABCD")
		block["baseUrl"] = f.URL()
		return f.Posts
	},
	"telegram": func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int {
		f := fakes.NewTelegram(t, time.Now)
		f.AddBot(os.Getenv("TELEGRAM_BOT_TOKEN"), 7001)
		f.AddChat(424242, "private")
		block["baseUrl"] = f.URL()
		return f.Sends
	},
	"stripe": func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int {
		f := fakes.NewStripe(t, time.Now)
		f.AddKey(os.Getenv("STRIPE_SECRET_KEY"))
		f.AddPaymentIntent("pi_3MtwBwLkdIwHu7ix28a3tqPa", 5000)
		block["baseUrl"] = f.URL()
		return f.Refunds
	},
	// Google Calendar: the token endpoint is the key file's token_uri, so the
	// key file is the fake's (the README's is a shortened example).
	"gcal": func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int {
		f := fakes.NewGCal(t, time.Now)
		f.AddCalendar("tables@example.com")
		t.Setenv("GCAL_SERVICE_ACCOUNT_JSON", f.ServiceAccountKey("outbox@your-project.iam.gserviceaccount.com"))
		block["baseUrl"] = f.URL()
		return f.Events
	},
	"discord": func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int {
		f := fakes.NewDiscord(t, time.Now)
		f.AddBot(os.Getenv("DISCORD_BOT_TOKEN"), "1100")
		f.AddChannel("1234567890123456789")
		block["baseUrl"] = f.URL()
		return f.Messages
	},
	"twilio": func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int {
		f := fakes.NewTwilio(t, time.Now)
		f.AddAccount(acct["accountSid"].(string), os.Getenv("TWILIO_AUTH_TOKEN"))
		f.AddNumber(acct["from"].(string))
		block["baseUrl"] = f.URL()
		return f.Created
	},
	"postmark": func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int {
		f := fakes.NewPostmark(t, time.Now)
		f.AddServer(os.Getenv("POSTMARK_SERVER_TOKEN"))
		f.AddSender(acct["from"].(string))
		block["baseUrl"] = f.URL()
		return f.Sent
	},
	"whatsapp": func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int {
		f := fakes.NewWhatsApp(t, time.Now)
		f.AddNumber(acct["phoneNumberId"].(string), os.Getenv("WHATSAPP_ACCESS_TOKEN"))
		block["baseUrl"] = f.URL()
		return f.Messages
	},
	// SES: the endpoint is the SDK's standard variable (no baseUrl).
	"ses": func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int {
		f := fakes.NewSES(t, time.Now)
		f.AddIdentity("example.com")
		if cs, _ := acct["configurationSet"].(string); cs != "" {
			f.AddConfigurationSet(cs)
		}
		t.Setenv("AWS_ENDPOINT_URL_SESV2", f.URL())
		return f.Sent
	},
	"http": func(t *testing.T, block map[string]any, account string, acct map[string]any) func() int {
		f := fakes.NewReceiver(t, fakes.ReceiverOptions{Secret: os.Getenv("ORDERS_HOOK_SECRET"), HonoursKeys: true, Retention: 24 * time.Hour, Now: time.Now})
		acct["url"] = f.URL()
		return f.Effects
	},
}

// TestREADMEProviderSnippets executes README "Connecting a real provider":
// for every registered provider but the sandbox, the configuration block
// (its exports; `make run` is this test's stack) and then the block that
// makes the grant and sends through it, with the variables make run prints.
// The only change to the README's configuration is the provider's base URL
// (or the receiver's URL), pointed at the fake in adapters/providers/fakes.
// Each send must end succeeded with exactly one effect at the fake, the
// sandbox must still be loaded beside the provider (wire.WithSandbox, as
// make run does), and the banner's provider list must name the account.
func TestREADMEProviderSnippets(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, r := range wire.Registered {
		if r.Local {
			continue // the sandbox: make run starts it
		}
		name := r.Name
		t.Run(name, func(t *testing.T) {
			// 1. The configuration block, without its `make run`.
			config := readmeSnippet(t, readme, name+":config")
			if !strings.Contains(config, "\nmake run\n") {
				t.Fatalf("the %s configuration block does not end with make run:\n%s", name, config)
			}
			vars := map[string]string{}
			sc := bufio.NewScanner(strings.NewReader(runSnippet(t, strings.Replace(config, "\nmake run\n", "\nenv\n", 1), nil)))
			for sc.Scan() {
				if k, v, ok := strings.Cut(sc.Text(), "="); ok {
					vars[k] = v
				}
			}
			for k, v := range vars {
				if k != "PATH" && k != "HOME" && k != "PWD" && k != "SHLVL" && k != "_" {
					t.Setenv(k, v) // the "env:NAME" secrets are read from the environment
				}
			}
			var doc map[string]map[string]any
			if err := json.Unmarshal([]byte(vars["OUTBOX_PROVIDER_CONFIG"]), &doc); err != nil {
				t.Fatalf("OUTBOX_PROVIDER_CONFIG from the README is not JSON: %v", err)
			}
			block := doc[name]
			accounts, _ := block["accounts"].(map[string]any)
			if len(accounts) != 1 {
				t.Fatalf("the %s block should configure one account: %v", name, block)
			}
			var account string
			var acct map[string]any
			for k, v := range accounts {
				account, acct = k, v.(map[string]any)
			}

			// 2. The fake, accepting what the README configured.
			setup, ok := readmeFakes[name]
			if !ok {
				t.Fatalf("%s is registered but this test has no fake for its README blocks (add it to readmeFakes)", name)
			}
			effects := setup(t, block, account, acct)
			cfg, _ := json.Marshal(doc)

			// make run's merge keeps the sandbox beside the provider, and the banner names both.
			merged, err := wire.WithSandbox(string(cfg), "http://127.0.0.1:4100", 3000)
			if err != nil {
				t.Fatal(err)
			}
			loaded, err := wire.DescribeProviders(merged)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string][]string{}
			for _, p := range loaded {
				names[p.Name] = p.Accounts
			}
			if _, ok := names["sandbox"]; !ok || len(names[name]) != 1 || names[name][0] != account {
				t.Fatalf("providers loaded from the README configuration: %v; want sandbox and %s (account %s)", loaded, name, account)
			}
			if _, err := wire.Providers(merged, nil); err != nil {
				t.Fatalf("the README configuration does not load: %v", err)
			}

			// 3. The stack (the harness adds the sandbox the same way). The
			// README's members keep the default 10 s request timeout, which
			// the lease must outlive (the harness's own lease is 10 s).
			e := newEnv(t, options{Config: wire.Config{ProviderConfig: strings.TrimSuffix(strings.TrimPrefix(string(cfg), "{"), "}"),
				Policy: core.AttemptPolicy{Lease: 15 * time.Second}}})
			if err := auth.SeedToken(context.Background(), e.st.App.Tokens, "dev-bot-token", core.Principal{Kind: core.PrincipalBot, Name: "dev-bot"}, time.Now()); err != nil {
				t.Fatal(err)
			}

			// 4. The README's grant and send, with the banner's variables.
			out := runSnippet(t, readmeSnippet(t, readme, name+":use"), []string{
				"OUTBOX_API_URL=" + e.api.URL, "OUTBOX_BOT_TOKEN=dev-bot-token", "OUTBOX_OPERATOR_TOKEN=" + opToken,
			})
			dec := json.NewDecoder(strings.NewReader(out))
			var answers []map[string]any
			for dec.More() {
				var a map[string]any
				if err := dec.Decode(&a); err != nil {
					t.Fatalf("the snippet's answers are not JSON: %v\n%s", err, out)
				}
				answers = append(answers, a)
			}
			if len(answers) != 2 || answers[0]["error"] != nil || answers[1]["error"] != nil {
				t.Fatalf("the grant and the send should both be accepted; got:\n%s", out)
			}
			id, _ := answers[1]["id"].(string)
			in := e.waitStatus(id, 20*time.Second, core.StatusSucceeded)
			if in.Status != core.StatusSucceeded || in.ExternalID == "" {
				t.Fatalf("the %s intent ended %s (external id %q); want succeeded with the provider's id", name, in.Status, in.ExternalID)
			}
			if n := effects(); n != 1 {
				t.Fatalf("the %s fake performed %d effects, want 1", name, n)
			}
			// The sandbox is still there.
			e.mustSubmit("sandbox-beside-"+name, intentBody("acct-1", "chan-1", "still here"))
			t.Logf("%s: intent %s succeeded, external id %s, %s effect(s) at the fake", name, id, in.ExternalID, strconv.Itoa(effects()))
		})
	}
}
