package e2e

// The client conformance suite (issue 49): clients/conformance/scenarios.json
// run against the Go, TypeScript and Python clients through a
// fault-injecting proxy in front of the stack, counting effects at the
// sandbox.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/client"
	"github.com/botharness/outbox/clients/clientstest"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/sandbox"
)

type confRetry struct {
	MaxAttempts      int `json:"maxAttempts,omitempty"`
	BaseMs           int `json:"baseMs,omitempty"`
	CapMs            int `json:"capMs,omitempty"`
	AttemptTimeoutMs int `json:"attemptTimeoutMs,omitempty"`
}

type confFault struct {
	Action     string `json:"action"`
	Status     int    `json:"status"`
	RetryAfter int    `json:"retryAfter"`
	DelayMs    int    `json:"delayMs"`
}

type confStep struct {
	Op     string      `json:"op"`
	Key    string      `json:"key"`
	Body   string      `json:"body"`
	Wait   int         `json:"wait"`
	Retry  *confRetry  `json:"retry"`
	Faults []confFault `json:"faults"`
	Expect struct {
		OK               bool   `json:"ok"`
		Replayed         bool   `json:"replayed"`
		Error            string `json:"error"`
		Status           any    `json:"status"`
		Code             string `json:"code"`
		Posts            int    `json:"posts"`
		MinPosts         int    `json:"minPosts"`
		MinGets          int    `json:"minGets"`
		RetryNotBeforeMs int    `json:"retryNotBeforeMs"`
	} `json:"expect"`
}

type confScenario struct {
	Name    string     `json:"name"`
	Account string     `json:"account"`
	Steps   []confStep `json:"steps"`
	Effects int        `json:"effects"`
	Status  string     `json:"status"`
}

// confResult is a driver's answer for one step.
type confResult struct {
	OK       bool            `json:"ok"`
	Key      string          `json:"key"`
	Replayed bool            `json:"replayed"`
	Intent   json.RawMessage `json:"intent"`
	Error    *struct {
		Class  string `json:"class"`
		Status int    `json:"status"`
		Code   string `json:"code"`
		Key    string `json:"key"`
	} `json:"error"`
}

// confDriverStep is what a driver is given (driver.mjs, driver.py, goDriver).
type confDriverStep struct {
	BaseURL    string         `json:"baseUrl"`
	Token      string         `json:"token"`
	Retry      confRetry      `json:"retry"`
	Op         string         `json:"op"`
	Body       map[string]any `json:"body"`
	Key        string         `json:"key,omitempty"`
	KeyFile    string         `json:"keyFile,omitempty"`
	Wait       int            `json:"wait,omitempty"`
	IntervalMs int            `json:"intervalMs,omitempty"`
	TimeoutMs  int            `json:"timeoutMs,omitempty"`
}

// confPost is one POST /v1/intents as the proxy received it.
type confPost struct {
	key      string
	body     []byte
	at       time.Time
	answered time.Time // when the proxy answered it (zero: passed through)
}

// confProxy stands between a client and the stack. Faults are armed per
// payload text (one per step: every POST of a step carries it).
type confProxy struct {
	upstream string
	prime    func(account, target string) error
	mu       sync.Mutex
	faults   map[string][]confFault
	posts    map[string][]*confPost
	gets     map[string]int // by path
}

func newConfProxy(t *testing.T, upstream string, prime func(account, target string) error) (*confProxy, string) {
	p := &confProxy{upstream: upstream, prime: prime, faults: map[string][]confFault{}, posts: map[string][]*confPost{}, gets: map[string]int{}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *confProxy) arm(text string, faults []confFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults[text] = append([]confFault(nil), faults...)
}

func (p *confProxy) seen(text string) []confPost {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []confPost
	for _, s := range p.posts[text] {
		out = append(out, *s)
	}
	return out
}

func (p *confProxy) getsOf(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gets[path]
}

func (p *confProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var fault *confFault
	var rec *confPost
	if r.Method == http.MethodPost && r.URL.Path == "/v1/intents" {
		var b struct {
			Payload struct {
				Text string `json:"text"`
			} `json:"payload"`
		}
		_ = json.Unmarshal(body, &b)
		rec = &confPost{key: r.Header.Get("Idempotency-Key"), body: body, at: time.Now()}
		p.mu.Lock()
		p.posts[b.Payload.Text] = append(p.posts[b.Payload.Text], rec)
		if fs := p.faults[b.Payload.Text]; len(fs) > 0 {
			fault = &fs[0]
			p.faults[b.Payload.Text] = fs[1:]
		}
		p.mu.Unlock()
	} else if r.Method == http.MethodGet {
		p.mu.Lock()
		p.gets[r.URL.Path]++
		p.mu.Unlock()
	}
	if fault != nil && fault.Action == "take-account-slot" {
		// Another intent of the same account goes first and takes its slot
		// (sent inline): the client's intent must wait for the next one.
		var b struct {
			Account string `json:"account"`
			Target  string `json:"target"`
		}
		_ = json.Unmarshal(body, &b)
		if err := p.prime(b.Account, b.Target); err != nil {
			http.Error(w, "conformance proxy: take the account's slot: "+err.Error(), http.StatusBadGateway)
			return
		}
		fault = nil
	}
	if fault != nil && fault.Action == "answer" {
		if fault.RetryAfter > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(fault.RetryAfter))
		}
		w.Header().Set("Content-Type", "application/json")
		p.mu.Lock()
		rec.answered = time.Now()
		p.mu.Unlock()
		w.WriteHeader(fault.Status)
		if fault.Status == http.StatusTooManyRequests {
			_, _ = io.WriteString(w, `{"error":{"code":"rate_limited","message":"over the bot's rate (conformance proxy)"}}`)
		} else {
			_, _ = io.WriteString(w, `{"message":"Service Unavailable"}`)
		}
		return
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if fault != nil {
		// The outbox has answered (and committed): the client never sees it.
		if fault.Action == "delay-answer" {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Duration(fault.DelayMs) * time.Millisecond):
			}
		}
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// confClients are the three clients' drivers.
type confDriver func(t confTB, step confDriverStep) confResult

func nodeDriver(t confTB, step confDriverStep) confResult {
	node, err := clientstest.Node()
	if err != nil {
		t.Fatal(err)
	}
	return execDriver(t, node, filepath.Join(clientstest.Root(), "clients", "conformance", "driver.mjs"), step)
}

func pythonDriver(t confTB, step confDriverStep) confResult {
	py, err := clientstest.Python()
	if err != nil {
		t.Fatal(err)
	}
	// -S: no site-packages (nor their start-up cost): the client runs on the bare interpreter.
	return execDriver(t, py, filepath.Join(clientstest.Root(), "clients", "conformance", "driver.py"), step, "-S")
}

func execDriver(t confTB, bin, script string, step confDriverStep, flags ...string) confResult {
	t.Helper()
	arg, _ := json.Marshal(step)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(flags, script, string(arg))...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", filepath.Base(bin), filepath.Base(script), err, out, stderr.String())
	}
	var res confResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		t.Fatalf("%s: not one JSON line: %v\n%s\nstderr: %s", filepath.Base(script), err, out, stderr.String())
	}
	return res
}

// goDriver is the Go client, in this process, doing what the other drivers do.
func goDriver(t confTB, step confDriverStep) confResult {
	t.Helper()
	key := step.Key
	if step.KeyFile != "" {
		if b, err := os.ReadFile(step.KeyFile); err == nil {
			key = strings.TrimSpace(string(b))
		} else {
			key = client.NewKey()
			if err := os.WriteFile(step.KeyFile, []byte(key+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	c := client.New(step.BaseURL, step.Token, client.WithRetry(client.RetryPolicy{MaxAttempts: step.Retry.MaxAttempts,
		Base: ms(step.Retry.BaseMs), Cap: ms(step.Retry.CapMs), AttemptTimeout: ms(step.Retry.AttemptTimeoutMs)}))
	payload, _ := json.Marshal(step.Body["payload"])
	var grant client.GrantRef
	gb, _ := json.Marshal(step.Body["grant"])
	_ = json.Unmarshal(gb, &grant)
	req := client.IntentRequest{Kind: step.Body["kind"].(string), Provider: step.Body["provider"].(string), Account: step.Body["account"].(string),
		Action: step.Body["action"].(string), Target: step.Body["target"].(string), Payload: payload, Grant: grant}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var sub *client.Submission
	var err error
	if step.Op == "submitAndWait" {
		sub, err = c.SubmitAndWait(ctx, req, client.SubmitOptions{Key: key}, client.AndWaitOptions{Wait: time.Duration(step.Wait) * time.Second,
			Poll: client.WaitOptions{Interval: ms(step.IntervalMs)}})
	} else {
		sub, err = c.Submit(ctx, req, client.SubmitOptions{Key: key})
	}
	if err != nil {
		res := confResult{}
		res.Error = &struct {
			Class  string `json:"class"`
			Status int    `json:"status"`
			Code   string `json:"code"`
			Key    string `json:"key"`
		}{Key: key}
		var apiErr *client.APIError
		var retryErr *client.RetryError
		if errors.As(err, &apiErr) {
			res.Error.Status, res.Error.Code = apiErr.Status, apiErr.Code
		}
		switch {
		case errors.Is(err, client.ErrIdempotencyKeyReused):
			res.Error.Class = "IdempotencyKeyReusedError"
		case errors.Is(err, client.ErrValidation):
			res.Error.Class = "ValidationError"
		case errors.As(err, &retryErr) && errors.Is(err, client.ErrRateLimited):
			res.Error.Class = "RateLimitedError"
		case errors.As(err, &retryErr):
			res.Error.Class = "RetryError"
		default:
			res.Error.Class = "APIError"
		}
		return res
	}
	in, _ := json.Marshal(sub.Intent)
	return confResult{OK: true, Key: sub.Key, Replayed: sub.Replayed, Intent: in}
}

// TestClientConformance runs every scenario against every client, all at
// once on one stack (each run has its own key, target and payload).
func TestClientConformance(tt *testing.T) {
	tt.Parallel()
	raw, err := os.ReadFile(filepath.Join(clientstest.Root(), "clients", "conformance", "scenarios.json"))
	if err != nil {
		tt.Fatal(err)
	}
	var doc struct {
		Retry     confRetry      `json:"retry"`
		Scenarios []confScenario `json:"scenarios"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		tt.Fatal(err)
	}
	if len(doc.Scenarios) < 7 {
		tt.Fatalf("only %d scenarios", len(doc.Scenarios))
	}
	if err := clientstest.BuildTypeScript(); err != nil {
		tt.Fatal(err)
	}
	drivers := []struct {
		name string
		run  confDriver
	}{{"go", goDriver}, {"typescript", nodeDriver}, {"python", pythonDriver}}
	// One paced account per client: 1 send per 3 s, so an intent sent just
	// after another (the take-account-slot fault) waits seconds for its
	// slot and Prefer: wait declines.
	var paced []string
	for _, d := range drivers {
		paced = append(paced, fmt.Sprintf(`"sandbox/acct-paced-%s":{"rate":1,"per":"3s"}`, d.name))
	}
	e := newEnv(tt, options{Config: wire.Config{ProviderConfig: `"pacing":{"accounts":{` + strings.Join(paced, ",") + `}}`}})
	proxy, proxyURL := newConfProxy(tt, e.api.URL, func(account, target string) error {
		return confPrime(e, randName("prime-"), intentBody(account, target+"-prime", "prime"))
	})
	run := randName("")
	// The runs go side by side, six at a time, in goroutines of this one
	// test (parallel subtests would each hold one of e2e's -parallel slots,
	// mostly waiting; all 21 at once made each driver's start-up the tail).
	var runs []*confRun
	var wg sync.WaitGroup
	slots := make(chan struct{}, 6)
	for _, d := range drivers {
		for _, sc := range doc.Scenarios {
			t := &confRun{name: d.name + "/" + sc.Name}
			runs = append(runs, t)
			keyFile := filepath.Join(tt.TempDir(), "key")
			wg.Add(1)
			go func() {
				defer wg.Done()
				slots <- struct{}{}
				defer func() { <-slots }()
				start := time.Now()
				defer func() { t.took = time.Since(start) }()
				nonce := fmt.Sprintf("%s-%s-%s", d.name, sc.Name, run)
				account, target := "acct-conf", "chan-"+nonce
				if sc.Account == "paced" {
					account = "acct-paced-" + d.name
				}
				key := client.KeyFor("conformance", d.name, sc.Name, run)
				var ids []string
				var keys []string
				for i, st := range sc.Steps {
					text := nonce + "-" + st.Body
					proxy.arm(text, st.Faults)
					retry := doc.Retry
					if st.Retry != nil && st.Retry.MaxAttempts > 0 {
						retry.MaxAttempts = st.Retry.MaxAttempts
					}
					step := confDriverStep{BaseURL: proxyURL, Token: botToken, Retry: retry, Op: st.Op, Wait: st.Wait, IntervalMs: 200, TimeoutMs: 60000,
						Body: map[string]any{"kind": "reply", "provider": "sandbox", "account": account, "action": testAction, "target": target,
							"payload": map[string]any{"text": text}, "grant": map[string]any{"id": "g-1", "version": 1}}}
					if st.Key == "persisted" {
						step.KeyFile = keyFile
					} else {
						step.Key = key
					}
					before := len(proxy.seen(text))
					res := d.run(t, step)
					posts := proxy.seen(text)[before:]
					where := fmt.Sprintf("step %d (%s)", i+1, st.Op)
					x := st.Expect
					if res.OK != x.OK {
						t.Fatalf("%s: ok=%v, want %v: %+v %+v", where, res.OK, x.OK, res, res.Error)
					}
					if res.OK {
						var in struct {
							ID     string `json:"id"`
							Status string `json:"status"`
						}
						if err := json.Unmarshal(res.Intent, &in); err != nil || in.ID == "" {
							t.Fatalf("%s: the answer holds no intent: %s", where, res.Intent)
						}
						if res.Replayed != x.Replayed {
							t.Errorf("%s: replayed=%v, want %v", where, res.Replayed, x.Replayed)
						}
						if s, ok := x.Status.(string); ok && in.Status != s {
							t.Errorf("%s: status %s, want %s", where, in.Status, s)
						}
						ids = append(ids, in.ID)
						keys = append(keys, res.Key)
					} else {
						if res.Error == nil {
							t.Fatalf("%s: no error", where)
						}
						if res.Error.Class != x.Error {
							t.Errorf("%s: %s, want %s (%+v)", where, res.Error.Class, x.Error, res.Error)
						}
						if n, ok := x.Status.(float64); ok && res.Error.Status != int(n) {
							t.Errorf("%s: status %d, want %v", where, res.Error.Status, n)
						}
						if x.Code != "" && res.Error.Code != x.Code {
							t.Errorf("%s: code %q, want %q", where, res.Error.Code, x.Code)
						}
						if res.Error.Key == "" {
							t.Errorf("%s: the error names no key to resubmit under", where)
						}
						keys = append(keys, res.Error.Key)
					}
					// At the proxy: the attempts of one call carry one key and the same bytes.
					if x.Posts > 0 && len(posts) != x.Posts {
						t.Errorf("%s: %d POSTs reached the proxy, want %d", where, len(posts), x.Posts)
					}
					if len(posts) < x.MinPosts {
						t.Errorf("%s: %d POSTs reached the proxy, want at least %d", where, len(posts), x.MinPosts)
					}
					for _, p := range posts {
						if p.key != posts[0].key || !bytes.Equal(p.body, posts[0].body) {
							t.Errorf("%s: a retry changed the key or the bytes: %q %s, first %q %s", where, p.key, p.body, posts[0].key, posts[0].body)
						}
					}
					if x.RetryNotBeforeMs > 0 && len(posts) >= 2 {
						if gap := posts[1].at.Sub(posts[0].answered); posts[0].answered.IsZero() || gap < time.Duration(x.RetryNotBeforeMs)*time.Millisecond {
							t.Errorf("%s: retried %v after the 429, before its Retry-After (%d ms)", where, gap, x.RetryNotBeforeMs)
						}
					}
					if x.MinGets > 0 && len(ids) > 0 {
						if n := proxy.getsOf("/v1/intents/" + ids[len(ids)-1]); n < x.MinGets {
							t.Errorf("%s: %d GETs of the intent, want at least %d (submitAndWait polls)", where, n, x.MinGets)
						}
					}
					for _, k := range keys {
						if k != keys[0] {
							t.Errorf("%s: key %q, an earlier step used %q", where, k, keys[0])
						}
					}
				}
				if len(ids) == 0 {
					t.Fatal("no step answered an intent")
				}
				for _, id := range ids {
					if id != ids[0] {
						t.Fatalf("two intents: %v", ids)
					}
				}
				if err := confWaitStatus(e, ids[0], 60*time.Second, core.Status(sc.Status)); err != nil {
					t.Fatalf("%v", err)
				}
				for _, q := range []string{"?intentId=" + ids[0], "?idempotencyKey=" + ids[0], "?target=" + target} {
					if n, err := confEffects(e, q); err != nil || n != sc.Effects {
						t.Errorf("%d effects at the sandbox for %s (%v), want %d", n, q, err, sc.Effects)
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, r := range runs {
		if len(r.errs) > 0 {
			tt.Errorf("%s (%v):\n  %s", r.name, r.took.Round(time.Millisecond), strings.Join(r.errs, "\n  "))
		} else {
			tt.Logf("%s: passed in %v", r.name, r.took.Round(time.Millisecond))
		}
	}
}

// confTB is what a run reports through: a *testing.T, or a confRun.
type confTB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// confRun collects one run's failures; Fatal ends the run's goroutine.
type confRun struct {
	name string
	took time.Duration
	errs []string
}

func (r *confRun) Helper() {}
func (r *confRun) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *confRun) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *confRun) Fatal(args ...any)                 { r.Errorf("%s", fmt.Sprint(args...)); runtime.Goexit() }

// confPrime submits an intent with Prefer: wait, taking its account's slot.
func confPrime(e *env, key, body string) error {
	req, _ := http.NewRequest(http.MethodPost, e.api.URL+"/v1/intents", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+botToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Prefer", "wait=5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	return nil
}

// confWaitStatus polls the intent in the table until it has the status.
func confWaitStatus(e *env, id string, timeout time.Duration, want core.Status) error {
	deadline := time.Now().Add(timeout)
	var last core.Status
	for time.Now().Before(deadline) {
		in, err := e.st.App.Store.Get(context.Background(), id)
		if err != nil {
			return err
		}
		if last = in.Status; last == want {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("intent %s is %s, want %s after %v", id, last, want, timeout)
}

// confEffects counts the sandbox's effects for a query, over HTTP.
func confEffects(e *env, query string) (int, error) {
	resp, err := http.Get(e.sbURL + "/_sandbox/effects" + query)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var er sandbox.EffectsResponse
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&er); err != nil {
		return 0, err
	}
	if er.Count != len(er.Effects) {
		return 0, fmt.Errorf("count %d but %d effects listed", er.Count, len(er.Effects))
	}
	return er.Count, nil
}
