// Package client is the Go client of the outbox's HTTP API, for bots and
// for operators. It has no AWS dependency.
//
// It gets idempotency right by default: Submit sends each logical attempt
// under one Idempotency-Key — the caller's logical-attempt id, or a key
// generated once and returned — and retries connection errors, timeouts,
// 5xx and 429 (honouring Retry-After) with that same key and byte-identical
// body, so a retry can never create a second intent. Errors are typed:
// errors.Is(err, client.ErrIdempotencyKeyReused) is distinct from
// client.ErrValidation; errors.As(err, *client.APIError) gives the status,
// code and field; *client.RetryError says a call gave up.
//
//	c := client.New("http://127.0.0.1:4000", botToken)
//	key := client.KeyFor("slack", event.ID, "reply") // one key per logical attempt
//	sub, err := c.Submit(ctx, req, client.SubmitOptions{Key: key})
//	in, err := c.Wait(ctx, sub.Intent.ID, client.WaitOptions{})
//
// Operators use c.Admin() (list, show, resolve, recommend, backups).
//
// Retention: a key is honoured for at least the deployment's intent
// retention window (intentRetention, default 7 days) after its intent ends
// — resubmitting it with the same body in that window replays the intent,
// with a different body fails with ErrIdempotencyKeyReused. Intents that
// have not ended never expire. After the window the intent is pruned to a
// tombstone that still answers a replay with the original outcome
// (Intent.Pruned set, Attempts empty) and still refuses a different body,
// for the tombstone window (tombstoneRetention, default 90 days); its
// history then answers ErrPruned. Only after both windows does the key
// start a new intent, so keep a key's retries well inside the first.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one outbox deployment with one bearer token.
type Client struct {
	base   string
	token  string
	hc     *http.Client
	retry  RetryPolicy
	newKey func() string
	now    func() time.Time
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: a clone of
// http.DefaultTransport, no client-wide timeout: RetryPolicy.AttemptTimeout
// bounds each attempt).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetry sets the retry policy (zero fields take their defaults).
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithKeyGenerator replaces NewKey for keys Submit generates.
func WithKeyGenerator(f func() string) Option { return func(c *Client) { c.newKey = f } }

// New returns a client of the API at baseURL (e.g. http://127.0.0.1:4000)
// that authenticates with token.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, newKey: NewKey, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	c.retry = c.retry.withDefaults()
	return c
}

// NewKey returns a fresh random idempotency key. Persist it with the work it
// belongs to before the first Submit, and reuse it for every retry of that
// work, even after a restart.
func NewKey() string {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return "obx-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// KeyFor derives a stable idempotency key from a logical attempt's identity
// (for example the inbound event being answered and the step: KeyFor("slack",
// eventID, "reply")). The same parts always give the same key; different
// parts give different keys.
func KeyFor(parts ...string) string {
	joined := strings.Join(parts, "/")
	if validKey(joined) == nil && !strings.Contains(strings.Join(parts, ""), "/") {
		return joined
	}
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return "obx-" + hex.EncodeToString(h.Sum(nil))
}

// validKey mirrors the server's rule: 1 to 255 printable ASCII characters.
func validKey(key string) error {
	if key == "" || len(key) > 255 {
		return &APIError{Status: http.StatusBadRequest, Code: "invalid_idempotency_key", Field: "Idempotency-Key",
			Message: "an idempotency key has 1 to 255 printable ASCII characters (checked before sending)"}
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return &APIError{Status: http.StatusBadRequest, Code: "invalid_idempotency_key", Field: "Idempotency-Key",
				Message: fmt.Sprintf("the idempotency key has a non-printable or non-ASCII byte at %d (checked before sending)", i)}
		}
	}
	return nil
}

// call is one API call: a method, a path, a body sent byte-identical on
// every attempt, and headers (the Idempotency-Key among them) that never
// change between attempts.
type call struct {
	method, path string
	body         []byte
	key          string // Idempotency-Key, "" for none
	prefer       string // Prefer header, "" for none
	idempotent   bool
	// wait is the Prefer: wait sent (0: none); the attempt's timeout
	// covers it.
	wait time.Duration
}

type result struct {
	status int
	header http.Header
	body   []byte
}

// fetch makes the call and decodes its answer as a new T.
func fetch[T any](ctx context.Context, c *Client, cl call) (*T, error) {
	var v T
	if _, err := c.do(ctx, cl, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// send is fetch with body, as JSON, as the call's body.
func send[T any](ctx context.Context, c *Client, cl call, body any) (*T, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	cl.body = b
	return fetch[T](ctx, c, cl)
}

// do runs a call with retries and decodes a 2xx answer into out.
func (c *Client) do(ctx context.Context, cl call, out any) (result, error) {
	var last error
	for attempt := 1; ; attempt++ {
		res, err := c.once(ctx, cl)
		if err == nil && res.status < 300 {
			if out != nil {
				if err := json.Unmarshal(res.body, out); err != nil {
					return res, fmt.Errorf("%w: %d answer is not the documented JSON: %v", ErrUnexpected, res.status, err)
				}
			}
			return res, nil
		}
		var retryAfter time.Duration
		if err == nil {
			apiErr := decodeError(res, c.now())
			retryAfter = apiErr.RetryAfter
			err = apiErr
		}
		if ctx.Err() != nil {
			return res, &RetryError{Attempts: attempt, Last: err, Stop: ctx.Err()}
		}
		if !shouldRetry(cl.idempotent, res.status, errIfTransport(res, err)) {
			return res, err // after a retry too: the server's answer is the answer
		}
		last = err
		if attempt >= c.retry.MaxAttempts {
			return res, &RetryError{Attempts: attempt, Last: last}
		}
		wait := c.retry.backoff(attempt, retryAfter)
		if dl, ok := ctx.Deadline(); ok && c.now().Add(wait).After(dl) {
			// Waiting would outlive the caller's deadline: give up now.
			return res, &RetryError{Attempts: attempt, Last: last, Stop: context.DeadlineExceeded}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, &RetryError{Attempts: attempt, Last: last, Stop: ctx.Err()}
		case <-t.C:
		}
	}
}

// errIfTransport returns err only when no HTTP answer was received.
func errIfTransport(res result, err error) error {
	if res.status != 0 {
		return nil
	}
	return err
}

// once sends one attempt.
func (c *Client) once(ctx context.Context, cl call) (result, error) {
	timeout := c.retry.AttemptTimeout
	if cl.wait > 0 {
		// The server may hold the answer up to the wait, plus the attempt.
		timeout = max(timeout, cl.wait+preferSlack)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(actx, cl.method, c.base+cl.path, body)
	if err != nil {
		return result{}, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if cl.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.key != "" {
		req.Header.Set("Idempotency-Key", cl.key)
	}
	if cl.prefer != "" {
		req.Header.Set("Prefer", cl.prefer)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "outbox-go-client/1")
	resp, err := c.hc.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		// The answer was cut off: as uncertain as a dropped connection.
		return result{}, fmt.Errorf("read answer: %w", err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func decodeError(res result, now time.Time) *APIError {
	e := &APIError{Status: res.status, RetryAfter: parseRetryAfter(res.header.Get("Retry-After"), now)}
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(res.body, &body) == nil {
		if body.Error != nil {
			e.Code, e.Message, e.Field = body.Error.Code, body.Error.Message, body.Error.Field
			return e
		}
		e.Message = body.Message
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(res.body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
	}
	return e
}

// SubmitOptions are the options of Submit.
type SubmitOptions struct {
	// Key is the idempotency key of this logical attempt: the caller's own
	// id for it (see KeyFor), or a key from NewKey persisted before sending.
	// Re-submitting the same attempt — after a crash, a timeout, a deploy —
	// must use the same key. Empty: Submit generates one and returns it in
	// Submission.Key (and in *SubmitError.Key on failure).
	Key string
	// PreferWait, when positive, asks the API to attempt the intent inline
	// and answer with its state after the attempt (`Prefer: wait=N`, whole
	// seconds, at least 1). The API may decline (Submission.WaitApplied
	// false): the intent is then accepted as usual and Wait learns its end.
	PreferWait time.Duration
}

// Submission is the answer of Submit.
type Submission struct {
	Key    string
	Intent *Intent
	// Replayed: the server already held this intent under this key (an
	// earlier attempt of this call, or of a previous run, got through).
	Replayed bool
	// WaitApplied: the API honoured SubmitOptions.PreferWait (it answered
	// Preference-Applied): Intent is its state after the inline attempt.
	WaitApplied bool
}

// Submit commits an intent under one idempotency key. Connection errors,
// timeouts, 5xx and 429 are retried with the same key and the same bytes;
// a 200 Idempotent-Replayed answer is a success like 201.
func (c *Client) Submit(ctx context.Context, req IntentRequest, opts SubmitOptions) (*Submission, error) {
	key := opts.Key
	if key == "" {
		key = c.newKey()
	}
	fail := func(err error) (*Submission, error) { return nil, &SubmitError{Key: key, Err: err} }
	if err := validKey(key); err != nil {
		return fail(err)
	}
	body, err := json.Marshal(req) // once: every attempt sends these bytes
	if err != nil {
		return fail(fmt.Errorf("%w: encode intent: %v", ErrValidation, err))
	}
	cl := call{method: http.MethodPost, path: "/v1/intents", body: body, key: key, idempotent: true}
	if opts.PreferWait > 0 {
		cl.prefer = "wait=" + strconv.Itoa(max(1, int(opts.PreferWait/time.Second)))
		cl.wait = opts.PreferWait
	}
	var in Intent
	res, err := c.do(ctx, cl, &in)
	if err != nil {
		return fail(err)
	}
	return &Submission{Key: key, Intent: &in, Replayed: res.header.Get("Idempotent-Replayed") == "true",
		WaitApplied: cl.prefer != "" && strings.HasPrefix(strings.TrimSpace(res.header.Get("Preference-Applied")), "wait")}, nil
}

// DefaultInlineWait is the wait SubmitAndWait asks for by default (the
// server's default cap).
const DefaultInlineWait = 10 * time.Second

// preferSlack is how much longer than its Prefer: wait an attempt may take.
const preferSlack = 5 * time.Second

// AndWaitOptions are the options of SubmitAndWait.
type AndWaitOptions struct {
	// Wait is the Prefer: wait asked of the server, whole seconds (default
	// DefaultInlineWait; the server caps it).
	Wait time.Duration
	// Poll is how Wait polls when the answer is not settled yet.
	Poll WaitOptions
}

// SubmitAndWait submits the intent asking the server to make its first
// attempt inside the request (Prefer: wait, issue 26), and returns it
// settled: succeeded with the provider's external id, failed, needs-human,
// and so on. When the answer is not settled (the account's gate deferred
// it, a retry or a reconciliation is due), it falls back to Wait, bounded
// by ctx. Retries of the POST carry the same key, bytes and preference: a
// retry while the first attempt is still in flight waits for its outcome.
// Submission.WaitApplied says whether the server answered after the attempt.
func (c *Client) SubmitAndWait(ctx context.Context, req IntentRequest, opts SubmitOptions, w AndWaitOptions) (*Submission, error) {
	wait := w.Wait
	if wait <= 0 {
		wait = DefaultInlineWait
	}
	opts.PreferWait = max(wait.Truncate(time.Second), time.Second)
	sub, err := c.Submit(ctx, req, opts)
	if err != nil || sub.Intent.Status.Settled() {
		return sub, err
	}
	in, err := c.Wait(ctx, sub.Intent.ID, w.Poll)
	if in != nil {
		sub.Intent = in
	}
	if err != nil {
		return sub, &SubmitError{Key: sub.Key, Err: err}
	}
	return sub, nil
}

// Get reads one of this bot's intents.
func (c *Client) Get(ctx context.Context, id string) (*Intent, error) {
	return fetch[Intent](ctx, c, call{method: http.MethodGet, path: "/v1/intents/" + url.PathEscape(id), idempotent: true})
}

// History reads one slice of one of this bot's intents' whole attempt and
// resolution history, oldest first: cursor "" for the first, then each
// slice's NextCursor until it is "". Entries older than the intent's inline
// ones (Intent.History) are only served here.
func (c *Client) History(ctx context.Context, id, cursor string) (*HistorySlice, error) {
	return history(ctx, c, "/v1/intents/"+url.PathEscape(id)+"/history", cursor)
}

func history(ctx context.Context, c *Client, path, cursor string) (*HistorySlice, error) {
	if cursor != "" {
		path += "?" + url.Values{"cursor": {cursor}}.Encode()
	}
	return fetch[HistorySlice](ctx, c, call{method: http.MethodGet, path: path, idempotent: true})
}

// WaitOptions are the options of Wait.
type WaitOptions struct {
	// Interval between polls (default 500ms), growing by half up to
	// MaxInterval (default 5s).
	Interval, MaxInterval time.Duration
}

// Wait polls the intent until it is settled: a terminal status, or
// needs-human. It returns the intent then, or ctx's error (with the last
// intent seen, if any) when ctx ends first.
func (c *Client) Wait(ctx context.Context, id string, opts WaitOptions) (*Intent, error) {
	return c.wait(ctx, opts, func(ctx context.Context) (*Intent, error) { return c.Get(ctx, id) })
}

func (c *Client) wait(ctx context.Context, opts WaitOptions, get func(context.Context) (*Intent, error)) (*Intent, error) {
	interval, maxInterval := opts.Interval, opts.MaxInterval
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	if maxInterval < interval {
		maxInterval = max(5*time.Second, interval)
	}
	var last *Intent
	for {
		in, err := get(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return last, fmt.Errorf("outbox: wait: %w", ctx.Err())
			}
			return last, err
		}
		last = in
		if in.Status.Settled() {
			return in, nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, fmt.Errorf("outbox: wait for %s (last seen %s): %w", in.ID, in.Status, ctx.Err())
		case <-t.C:
		}
		interval = min(interval*3/2, maxInterval)
	}
}

// SourceUpdate is a source's current revision.
type SourceUpdate struct {
	Revision int64 `json:"revision"`
	Deleted  bool  `json:"deleted,omitempty"`
}

// PutSource records the current revision of a source the bot answers.
// Revisions only move forward: an older one answers Applied false.
func (c *Client) PutSource(ctx context.Context, sourceID string, u SourceUpdate) (*SourceState, error) {
	return send[SourceState](ctx, c, call{method: http.MethodPut, path: "/v1/sources/" + url.PathEscape(sourceID), idempotent: true}, u)
}
