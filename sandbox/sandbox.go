// Package sandbox is an in-memory HTTP server that plays an external
// messaging/booking provider for tests and local runs. Each account has
// switchable capabilities (idempotency keys with a retention window, outcome
// lookup), an optional bearer token and a FIFO queue of injected faults. The
// sandbox records every side effect it really performed, so reliability tests
// can assert the provider-side effect count rather than local call counts.
//
// The HTTP contract is in README.md beside this file.
package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"time"
)

// Server is the sandbox provider. It is an http.Handler; create it with New
// and call Close when done (before closing the http.Server or httptest.Server
// serving it, so that held requests are let go).
type Server struct {
	now         func() time.Time
	log         *slog.Logger
	maxBody     int64
	defaultHang time.Duration
	mux         *http.ServeMux

	mu         sync.Mutex
	accounts   map[string]*account
	effects    []Effect
	texts      map[string]MessageText // message id -> its current text (messages.go)
	nextID     int64                  // message ids are never reused, not even across Reset
	gen        uint64
	genDone    chan struct{} // closed by Reset: requests of the old generation give up
	isClosed   bool
	closed     chan struct{}
	holds      sync.WaitGroup // requests inside a fault hold, and webhook senders
	wh         webhookState   // webhook sender (webhooks.go)
	state      *stateFile     // persistence (persist.go); nil = in memory only
	requestLog                // every authorised, valid send (modes.go)
}

type account struct {
	name    string
	caps    Capabilities
	token   string
	faults  []Fault
	keys    map[string]*keyState
	release chan struct{} // closed by Release: held requests stop holding
	held    int
	hook    *WebhookConfig // webhook sender config (webhooks.go), nil = none
	modes   modeState      // rate-limit and outage modes (modes.go)
}

// keyState is everything the sandbox knows about one idempotency key of one account.
type keyState struct {
	// Permanent outcome record (lookup never forgets).
	firstBody []byte // response body of the first effect with this key
	effects   int

	// Idempotency record, written only by commits on a key-honouring account.
	hasRecord   bool
	recordBody  []byte
	firstCommit time.Time // start of the retention window

	inflight int           // admitted requests whose commit decision is pending
	owner    chan struct{} // key-honouring accounts: closed when the owner is done
}

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the structured logger (default: discard). Payload bodies are never logged.
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) {
		if l != nil {
			s.log = l
		}
	}
}

// WithMaxBodyBytes limits the size of request bodies (default 1 MiB).
func WithMaxBodyBytes(n int64) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxBody = n
		}
	}
}

// WithDefaultHangDelay sets the hold time of hang faults that give no delayMs (default 30s).
func WithDefaultHangDelay(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.defaultHang = d
		}
	}
}

// New returns a sandbox whose notion of "now" (commit times, key retention)
// comes from now; nil means time.Now. Hold times of hang faults are real
// time; use Release to end them early.
func New(now func() time.Time, opts ...Option) *Server {
	if now == nil {
		now = time.Now
	}
	s := &Server{
		now:         now,
		log:         slog.New(slog.DiscardHandler),
		maxBody:     DefaultMaxBodyBytes,
		defaultHang: DefaultHangDelay,
		accounts:    map[string]*account{},
		genDone:     make(chan struct{}),
		closed:      make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/accounts/{account}/messages", s.handleSend)
	mux.HandleFunc("GET /v1/accounts/{account}/messages", s.handleLookup)
	mux.HandleFunc("GET /v1/accounts/{account}/capabilities", s.handleCapabilities)
	mux.HandleFunc("GET /_sandbox/effects", s.handleEffects)
	mux.HandleFunc("GET /_sandbox/messages/{id}", s.handleMessageText)
	mux.HandleFunc("GET /_sandbox/faults", s.handleGetFaults)
	mux.HandleFunc("POST /_sandbox/faults", s.handlePostFaults)
	mux.HandleFunc("POST /_sandbox/reset", s.handleReset)
	mux.HandleFunc("POST /_sandbox/release", s.handleRelease)
	mux.HandleFunc("GET /_sandbox/health", s.handleHealth)
	mux.HandleFunc("POST /_sandbox/emit", s.handleEmit)
	mux.HandleFunc("GET /_sandbox/webhooks", s.handleWebhooks)
	mux.HandleFunc("GET /_sandbox/requests", s.handleRequests)
	s.mux = mux
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
	if r.Method != http.MethodGet {
		s.save() // e.g. a fault consumed by a send that did not commit
	}
}

// Close lets every held or waiting request go without committing and returns
// once no request is inside a hold any more. Later hang faults do not hold.
// Close is idempotent. It does not close any listener.
func (s *Server) Close() {
	s.mu.Lock()
	if !s.isClosed {
		s.isClosed = true
		close(s.closed)
	}
	s.mu.Unlock()
	s.holds.Wait()
}

// Reset forgets all accounts (capabilities, tokens, faults, keys) and effects.
// Requests held or waiting at that moment give up without committing.
// Message ids keep counting up so that ids stay unique per server.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accounts = map[string]*account{}
	s.effects = nil
	s.texts = nil
	s.gen++
	close(s.genDone)
	s.genDone = make(chan struct{})
	s.wh.reset()
	s.resetRequests()
	_ = s.saveLocked()
}

// ErrInvalidConfig wraps every validation error of Configure.
var ErrInvalidConfig = errors.New("invalid sandbox config")

// Configure applies a POST /_sandbox/faults body and returns the account's new state.
func (s *Server) Configure(c Config) (AccountState, error) {
	if err := c.validate(); err != nil {
		return AccountState{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accountLocked(c.Account)
	if p := c.Capabilities; p != nil {
		keys, chosen := a.caps.IdempotencyKeys, a.caps.ClientChosenIDs
		if p.IdempotencyKeys != nil {
			keys = *p.IdempotencyKeys
		}
		if p.ClientChosenIDs != nil {
			chosen = *p.ClientChosenIDs
		}
		if keys && chosen {
			return AccountState{}, fmt.Errorf("%w: clientChosenIds and idempotencyKeys are exclusive (a chosen id refuses a repeat, a key replays it)", ErrInvalidConfig)
		}
		if p.IdempotencyKeys != nil {
			a.caps.IdempotencyKeys = *p.IdempotencyKeys
		}
		if p.KeyRetentionSeconds != nil {
			a.caps.KeyRetentionSeconds = *p.KeyRetentionSeconds
		}
		if p.Lookup != nil {
			a.caps.Lookup = *p.Lookup
		}
		if p.ConcurrentKeyPolicy != nil {
			a.caps.ConcurrentKeyPolicy = *p.ConcurrentKeyPolicy
		}
		if p.ClientChosenIDs != nil {
			a.caps.ClientChosenIDs = *p.ClientChosenIDs
		}
	}
	if c.Token != nil {
		a.token = *c.Token
	}
	a.configureWebhook(c.Webhook)
	a.configureModes(c, s.now())
	if c.Faults != nil {
		if c.Append {
			a.faults = append(a.faults, slices.Clone(c.Faults)...)
		} else {
			a.faults = slices.Clone(c.Faults)
		}
	}
	if err := s.saveLocked(); err != nil {
		return AccountState{}, err
	}
	return a.state(), nil
}

func (c Config) validate() error {
	if c.Account == "" {
		return fmt.Errorf("%w: account is required", ErrInvalidConfig)
	}
	if p := c.Capabilities; p != nil {
		if p.KeyRetentionSeconds != nil && *p.KeyRetentionSeconds < 0 {
			return fmt.Errorf("%w: keyRetentionSeconds must be >= 0", ErrInvalidConfig)
		}
		if p.ConcurrentKeyPolicy != nil && *p.ConcurrentKeyPolicy != PolicyWait && *p.ConcurrentKeyPolicy != PolicyConflict {
			return fmt.Errorf("%w: concurrentKeyPolicy must be %q or %q", ErrInvalidConfig, PolicyWait, PolicyConflict)
		}
	}
	if c.RateLimit != nil {
		if err := c.RateLimit.validate(); err != nil {
			return err
		}
	}
	if c.Outage != nil {
		if err := c.Outage.validate(); err != nil {
			return err
		}
	}
	if c.Webhook != nil {
		if err := c.Webhook.validate(); err != nil {
			return err
		}
	}
	for i, f := range c.Faults {
		if !f.Kind.valid() {
			return fmt.Errorf("%w: faults[%d]: unknown kind %q", ErrInvalidConfig, i, f.Kind)
		}
		if f.DelayMs < 0 || f.RetryAfterSeconds < 0 {
			return fmt.Errorf("%w: faults[%d]: delayMs and retryAfterSeconds must be >= 0", ErrInvalidConfig, i)
		}
	}
	return nil
}

// State reports an account's capabilities, remaining faults and held requests
// (defaults for an account the sandbox has not seen).
func (s *Server) State(accountName string) AccountState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.accounts[accountName]; ok {
		return a.state()
	}
	return newAccount(accountName).state()
}

// States reports every known account, sorted by name.
func (s *Server) States() []AccountState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]AccountState, 0, len(s.accounts))
	for _, a := range s.accounts {
		out = append(out, a.state())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out
}

// Effects returns the effects matching f, in commit order.
func (s *Server) Effects(f EffectFilter) []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Effect{}
	for _, e := range s.effects {
		if f.match(e) {
			out = append(out, e)
		}
	}
	return out
}

// EffectCount returns the number of effects matching f.
func (s *Server) EffectCount(f EffectFilter) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.effects {
		if f.match(e) {
			n++
		}
	}
	return n
}

// Release ends the hold of every request currently held by a hang or
// hang_no_commit fault on the account ("" = all accounts); they then go on as
// if their delay had passed. It returns how many requests were held.
func (s *Server) Release(accountName string) int {
	n := 0
	s.eachAccount(accountName, func(a *account) {
		n += a.held
		close(a.release)
		a.release = make(chan struct{})
	})
	return n
}

// Held returns how many requests are held by a fault on the account ("" = all accounts).
func (s *Server) Held(accountName string) int {
	n := 0
	s.eachAccount(accountName, func(a *account) { n += a.held })
	return n
}

// eachAccount calls f, with s.mu held, for the named account ("" = every
// account).
func (s *Server) eachAccount(accountName string, f func(*account)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, a := range s.accounts {
		if accountName == "" || name == accountName {
			f(a)
		}
	}
}

// TB is the part of testing.TB that StartTest needs.
type TB interface {
	Helper()
	Cleanup(func())
}

// StartTest is a convenience for tests: it starts the sandbox on a loopback
// port with an httptest-like server and arranges Close in the right order at
// the end of the test. It returns the sandbox and its base URL.
func StartTest(tb TB, now func() time.Time, opts ...Option) (*Server, string) {
	tb.Helper()
	s := New(now, opts...)
	ts := httptest.NewServer(s) // binds 127.0.0.1:0
	tb.Cleanup(func() {
		s.Close() // release holds first, or the HTTP server would wait for them
		ts.Close()
	})
	return s, ts.URL
}

func newAccount(name string) *account {
	return &account{
		name:    name,
		caps:    DefaultCapabilities(),
		keys:    map[string]*keyState{},
		release: make(chan struct{}),
	}
}

func (s *Server) accountLocked(name string) *account {
	a, ok := s.accounts[name]
	if !ok {
		a = newAccount(name)
		s.accounts[name] = a
	}
	return a
}

func (a *account) state() AccountState {
	return AccountState{
		Account:      a.name,
		Capabilities: a.caps,
		TokenSet:     a.token != "",
		Faults:       append([]Fault{}, a.faults...),
		Held:         a.held,
		Webhook:      a.hook.state(),
		RateLimit:    a.modes.rateState(),
		OutageUntil:  a.modes.outageState(),
	}
}

func (a *account) key(k string) *keyState {
	ks, ok := a.keys[k]
	if !ok {
		ks = &keyState{}
		a.keys[k] = ks
	}
	return ks
}

// popFault removes and returns the first queued fault that matches target.
func (a *account) popFault(target string) (Fault, bool) {
	for i, f := range a.faults {
		if f.matches(target) {
			a.faults = slices.Delete(a.faults, i, i+1)
			return f, true
		}
	}
	return Fault{}, false
}

func (a *account) retention() time.Duration {
	return time.Duration(a.caps.KeyRetentionSeconds) * time.Second
}
