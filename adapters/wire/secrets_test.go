package wire

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/botharness/outbox/adapters/providers/httpsigned"
	"github.com/botharness/outbox/adapters/providers/plugin"
	"github.com/botharness/outbox/adapters/providers/slack"
	"github.com/botharness/outbox/adapters/providers/telegram"
	"github.com/botharness/outbox/core"
)

// secretsServer plays Secrets Manager's GetSecretValue (awsJson1.1) for the
// real SDK client, counting reads per secret id.
type secretsServer struct {
	mu     sync.Mutex
	values map[string]string
	reads  map[string]int
}

func newSecretsServer(t *testing.T, values map[string]string) (*secretsServer, *secretsmanager.Client) {
	s := &secretsServer{values: values, reads: map[string]int{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
			http.Error(w, `{"__type":"InvalidRequestException"}`, http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var in struct{ SecretId string }
		_ = json.Unmarshal(b, &in)
		s.mu.Lock()
		s.reads[in.SecretId]++
		v, ok := s.values[in.SecretId]
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`)
			return
		}
		out, _ := json.Marshal(map[string]any{"ARN": "arn:aws:secretsmanager:eu-west-1:111111111111:secret:" + in.SecretId + "-AbCdEf", "Name": in.SecretId, "SecretString": v})
		_, _ = w.Write(out)
	}))
	t.Cleanup(ts.Close)
	client := secretsmanager.New(secretsmanager.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(ts.URL),
		Credentials:  aws.AnonymousCredentials{},
	})
	return s, client
}

func (s *secretsServer) readsOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[id]
}

func (s *secretsServer) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.reads {
		n += c
	}
	return n
}

const (
	smSlackToken   = "xoxb-canary-slack-token"
	smSlackSigning = "canary-slack-signing-secret"
	smTgToken      = "999:canary-telegram-token"
	smTgWebhook    = "canary-telegram-webhook"
	smBearer       = "canary-http-bearer"
)

var smHTTPSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("canary-http-signing-secret-32byt"))

// A configuration holding Secrets Manager references only, as the CDK
// stack requires.
const smConfig = `{
  "http": {"accounts": {"acct": {"url": "https://receiver.example/hook", "secret": "secretsmanager:prod/http#secret", "token": "secretsmanager:prod/http#token"}}},
  "slack": {"baseUrl": "https://slack.example/api", "accounts": {"T1": {"token": "secretsmanager:prod/slack-token", "botId": "B1", "signingSecret": "secretsmanager:prod/slack-signing"}}},
  "telegram": {"baseUrl": "https://telegram.example", "accounts": {"bot1": {"token": "secretsmanager:arn:aws:secretsmanager:eu-west-1:111111111111:secret:prod/tg-AbCdEf#token", "webhookSecret": "secretsmanager:arn:aws:secretsmanager:eu-west-1:111111111111:secret:prod/tg-AbCdEf#webhook"}}}
}`

func smValues() map[string]string {
	return map[string]string{
		"prod/http":          `{"secret":"` + smHTTPSecret + `","token":"` + smBearer + `"}`,
		"prod/slack-token":   smSlackToken,
		"prod/slack-signing": smSlackSigning,
		"arn:aws:secretsmanager:eu-west-1:111111111111:secret:prod/tg-AbCdEf": `{"token":"` + smTgToken + `","webhook":"` + smTgWebhook + `"}`,
	}
}

func accounts(t *testing.T, m core.ProviderMap) (slack.Account, telegram.Account) {
	t.Helper()
	sp, ok := unwrapProvider(m[slack.Name]).(*slack.Provider)
	if !ok {
		t.Fatal("slack not wired")
	}
	tp, ok := unwrapProvider(m[telegram.Name]).(*telegram.Provider)
	if !ok {
		t.Fatal("telegram not wired")
	}
	sa, _ := sp.Account("T1")
	ta, _ := tp.Account("bot1")
	return sa, ta
}

// Provider credentials are read from Secrets Manager by name (whole secret
// or a JSON member), each secret once per cold start.
func TestProvidersReadSecretsManagerReferences(t *testing.T) {
	srv, client := newSecretsServer(t, smValues())
	m, err := ProvidersWith(context.Background(), smConfig, &http.Client{}, &SecretResolver{Reader: client})
	if err != nil {
		t.Fatal(err)
	}
	sa, ta := accounts(t, m)
	if sa.Token != smSlackToken || sa.SigningSecret != smSlackSigning || ta.Token != smTgToken || ta.WebhookSecret != smTgWebhook {
		t.Fatalf("resolved slack %q/%q telegram %q/%q", sa.Token, sa.SigningSecret, ta.Token, ta.WebhookSecret)
	}
	if _, ok := m[httpsigned.Name].(*httpsigned.Provider); !ok {
		t.Fatalf("http provider %T, want the adapter (sending held)", m[httpsigned.Name])
	}
	for id, want := range map[string]int{"prod/http": 1, "prod/slack-token": 1, "prod/slack-signing": 1,
		"arn:aws:secretsmanager:eu-west-1:111111111111:secret:prod/tg-AbCdEf": 1} {
		if got := srv.readsOf(id); got != want {
			t.Errorf("secret %s read %d times, want %d", id, got, want)
		}
	}
}

// A function holding only "verify" (the webhook) never reads a sending
// credential, and its providers refuse to send; one holding none (intake)
// reads nothing and still knows the providers and actions.
func TestProvidersWithholdSecretsOfUsesNotHeld(t *testing.T) {
	for _, c := range []struct {
		uses      string
		wantReads map[string]int
	}{
		{"verify", map[string]int{"prod/slack-signing": 1, "arn:aws:secretsmanager:eu-west-1:111111111111:secret:prod/tg-AbCdEf": 1}},
		{"none", map[string]int{}},
	} {
		t.Run(c.uses, func(t *testing.T) {
			srv, client := newSecretsServer(t, smValues())
			uses, err := ParseSecretUses(c.uses)
			if err != nil {
				t.Fatal(err)
			}
			m, err := ProvidersWith(context.Background(), smConfig, &http.Client{}, &SecretResolver{Uses: uses, Reader: client})
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for id, n := range c.wantReads {
				if got := srv.readsOf(id); got != n {
					t.Errorf("secret %s read %d times, want %d", id, got, n)
				}
				total += n
			}
			if srv.total() != total {
				t.Errorf("%d secret reads, want %d (%v)", srv.total(), total, srv.reads)
			}
			sa, ta := accounts(t, m)
			for _, v := range []string{sa.Token, ta.Token} {
				if v == smSlackToken || v == smTgToken || !strings.HasPrefix(v, "withheld-") {
					t.Errorf("sending credential %q not withheld", v)
				}
			}
			if verify := c.uses == "verify"; (sa.SigningSecret == smSlackSigning) != verify || (ta.WebhookSecret == smTgWebhook) != verify {
				t.Errorf("verify secrets slack %q telegram %q (held: %v)", sa.SigningSecret, ta.WebhookSecret, verify)
			}
			for name, p := range m {
				if !p.SupportsAction("send_message") && name != httpsigned.Name {
					t.Errorf("%s: actions unknown without credentials", name)
				}
				_, err := p.Send(context.Background(), core.SendRequest{IntentID: "it_1", Account: "T1", Action: "send_message", Target: "C1", Payload: []byte(`{}`)})
				var re *core.RetryableError
				if !errors.Is(err, ErrCredentialsWithheld) || !errors.As(err, &re) {
					t.Errorf("%s: send without credentials: %v, want a retryable ErrCredentialsWithheld", name, err)
				}
				if _, err := p.Lookup(context.Background(), core.SendRequest{IntentID: "it_1"}); !errors.Is(err, ErrCredentialsWithheld) {
					t.Errorf("%s: lookup without credentials: %v", name, err)
				}
			}
		})
	}
}

func TestSecretReferenceErrorsNameTheFieldNotTheValue(t *testing.T) {
	_, client := newSecretsServer(t, map[string]string{"notjson": smSlackToken + `{`, "empty": "", "obj": `{"a":"b"}`})
	for name, c := range map[string]struct {
		cfg    string
		reader SecretReader
		want   string
	}{
		"no client":   {`{"slack":{"baseUrl":"https://s.example","accounts":{"T1":{"token":"secretsmanager:prod/x"}}}}`, nil, "slack.accounts.T1.token refers to Secrets Manager secret prod/x"},
		"missing":     {`{"slack":{"baseUrl":"https://s.example","accounts":{"T1":{"token":"secretsmanager:prod/x"}}}}`, client, "slack.accounts.T1.token: read secret prod/x"},
		"not object":  {`{"slack":{"baseUrl":"https://s.example","accounts":{"T1":{"token":"secretsmanager:notjson#token"}}}}`, client, "is not a JSON object"},
		"no member":   {`{"telegram":{"baseUrl":"https://t.example","accounts":{"b":{"token":"secretsmanager:obj#nope"}}}}`, client, `secret obj has no string member "nope"`},
		"empty":       {`{"slack":{"baseUrl":"https://s.example","accounts":{"T1":{"token":"secretsmanager:empty"}}}}`, client, "secret empty is empty"},
		"bad use env": {`{}`, nil, ""},
	} {
		if name == "bad use env" {
			if _, err := ParseSecretUses("send,everything"); err == nil || !strings.Contains(err.Error(), EnvSecretUses) {
				t.Errorf("bad uses accepted: %v", err)
			}
			continue
		}
		res := &SecretResolver{}
		if c.reader != nil {
			res.Reader = c.reader
		}
		_, err := ProvidersWith(context.Background(), c.cfg, &http.Client{}, res)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), smSlackToken) {
			t.Errorf("%s: secret value in error %q", name, err)
		}
	}
}

func TestSecretFieldsListsEverySecretWithItsUse(t *testing.T) {
	got, err := SecretFields(`{"sandbox":{"baseUrl":"http://x","tokens":{"a":"secretsmanager:s/a"}},
	  "http":{"accounts":{"h":{"url":"https://r.example","secret":"whsec_x","previousSecret":"env:OLD"}}},
	  "slack":{"accounts":{"T1":{"token":"xoxb-1","signingSecret":"secretsmanager:s/sign"}}},
	  "telegram":{"accounts":{"b":{"token":"secretsmanager:s/tg#token","webhookSecret":""}}},
	  "stripe":{"accounts":{"shop":{"secretKey":"secretsmanager:s/stripe#key","webhookSecret":"secretsmanager:s/stripe-hook"}}},
	  "gcal":{"accounts":{"cal":{"serviceAccount":"env:GCAL_KEY"}}},
	  "discord":{"accounts":{"d":{"token":"secretsmanager:s/discord"}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []SecretField{
		{"sandbox.tokens.a", SecretForSending, "secretsmanager:s/a"},
		{"http.accounts.h.secret", SecretForSending, "whsec_x"},
		{"http.accounts.h.previousSecret", SecretForSending, "env:OLD"},
		{"slack.accounts.T1.token", SecretForSending, "xoxb-1"},
		{"slack.accounts.T1.signingSecret", SecretForVerifying, "secretsmanager:s/sign"},
		{"telegram.accounts.b.token", SecretForSending, "secretsmanager:s/tg#token"},
		{"stripe.accounts.shop.secretKey", SecretForSending, "secretsmanager:s/stripe#key"},
		{"stripe.accounts.shop.webhookSecret", SecretForVerifying, "secretsmanager:s/stripe-hook"},
		{"gcal.accounts.cal.serviceAccount", SecretForSending, "env:GCAL_KEY"},
		{"discord.accounts.d.token", SecretForSending, "secretsmanager:s/discord"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for v, want := range map[string][2]string{
		"secretsmanager:a/b":   {"a/b", ""},
		"secretsmanager:a/b#k": {"a/b", "k"},
		"secretsmanager:arn:aws:secretsmanager:r:1:secret:n-AbCdEf#k": {"arn:aws:secretsmanager:r:1:secret:n-AbCdEf", "k"},
	} {
		n, k, ok := SecretsManagerRef(v)
		if !ok || n != want[0] || k != want[1] {
			t.Errorf("%s: %q %q %v", v, n, k, ok)
		}
	}
	for _, v := range []string{"secretsmanager:", "xoxb-secretsmanager:x", "env:X"} {
		if _, _, ok := SecretsManagerRef(v); ok {
			t.Errorf("%s parsed as a reference", v)
		}
	}
}

// A secret with two uses (Twilio's auth token authenticates requests and
// verifies callbacks) is listed under both, so the stack grants both
// functions, and a function holding either use reads it.
func TestSecretWithTwoUses(t *testing.T) {
	cfg := `{"twilio":{"statusCallbackBaseUrl":"https://o.example","accounts":{"a":{"accountSid":"AC0123456789abcdef0123456789abcdef","authToken":"secretsmanager:s/tw#token","from":"+15005550006"}}}}`
	got, err := SecretFields(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []SecretField{
		{"twilio.accounts.a.authToken", SecretForSending, "secretsmanager:s/tw#token"},
		{"twilio.accounts.a.authToken", SecretForVerifying, "secretsmanager:s/tw#token"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, uses := range []map[SecretUse]bool{{SecretForSending: true}, {SecretForVerifying: true}} {
		r := &SecretResolver{Uses: uses}
		v, err := r.resolve(context.Background(), plugin.Secret{Field: "f", Use: SecretForSending, AlsoUse: SecretForVerifying, Value: ptr("literal-token")})
		if err != nil || v != "literal-token" {
			t.Fatalf("uses %v: %q %v", uses, v, err)
		}
	}
	r := &SecretResolver{Uses: map[SecretUse]bool{SecretForVerifying: true}}
	if v, _ := r.resolve(context.Background(), plugin.Secret{Field: "f", Use: SecretForSending, Value: ptr("literal-token")}); v == "literal-token" {
		t.Fatal("a send-only secret was read by a verify-only function")
	}
}

func ptr(s string) *string { return &s }
