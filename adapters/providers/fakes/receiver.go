package fakes

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Receiver is a fake of a generic webhook receiver that verifies Standard
// Webhooks signatures (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md)
// with the reference Go library, so the adapter's signer is checked by an
// independent implementation. What it promises is configurable, like the
// receivers the "http" provider talks to: deduplication by Idempotency-Key
// for a retention period, a lookup endpoint, and what 409 means.
//
// Endpoints (under URL()):
//
//	POST /hooks           -> 200/201 {"id":"rcv_N"} | 400 | 401 | 409 | 422 | 429 | 5xx
//	GET  /lookup?key=K    -> 200 {"state":"found","id":"rcv_N"} | {"state":"pending"} | {"state":"absent"}
type Receiver struct {
	opts   ReceiverOptions
	wh     *standardwebhooks.Webhook
	faults *faultQueue
	base   string

	mu         sync.Mutex
	seq        int
	effects    []ReceiverEffect
	keys       map[string]*rcvKey
	badSigs    int
	deliveries []http.Header
}

// ReceiverOptions configures a Receiver.
type ReceiverOptions struct {
	// Secret is the whsec_ signing secret.
	Secret string
	// HonoursKeys: deduplicate by Idempotency-Key for Retention.
	HonoursKeys bool
	Retention   time.Duration
	// ConflictOnDuplicate answers a key seen before with 409
	// {"code":"duplicate"} instead of replaying the first answer.
	ConflictOnDuplicate bool
	// Lookup enables GET /lookup.
	Lookup bool
	// Now is the receiver's clock (retention, timestamp tolerance).
	Now func() time.Time
}

type rcvKey struct {
	id        string
	first     time.Time
	effects   int
	inflight  int
	committed bool
}

// ReceiverEffect is one side effect the receiver performed.
type ReceiverEffect struct {
	ID       string
	Key      string
	IntentID string
	Type     string
	Target   string
}

// NewReceiver starts a receiver.
func NewReceiver(tb TB, opts ReceiverOptions) *Receiver {
	tb.Helper()
	if opts.Now == nil {
		opts.Now = time.Now
	}
	wh, err := standardwebhooks.NewWebhook(opts.Secret)
	if err != nil {
		panic(fmt.Sprintf("fakes: receiver secret: %v", err))
	}
	rc := &Receiver{opts: opts, wh: wh, faults: newFaultQueue(), keys: map[string]*rcvKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks", rc.deliver)
	mux.HandleFunc("GET /lookup", rc.lookup)
	srv := start(tb, mux, rc.faults)
	rc.base = srv.URL
	return rc
}

// URL is the delivery endpoint.
func (rc *Receiver) URL() string { return rc.base + "/hooks" }

// LookupURL is the lookup endpoint.
func (rc *Receiver) LookupURL() string { return rc.base + "/lookup" }

// Inject queues faults for the next deliveries.
func (rc *Receiver) Inject(fs ...Fault) { rc.faults.push(fs...) }

// Release lets held responses go.
func (rc *Receiver) Release() { rc.faults.Release() }

// Effects is the number of side effects performed.
func (rc *Receiver) Effects() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.effects)
}

// EffectsFor counts effects performed for an idempotency key.
func (rc *Receiver) EffectsFor(key string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, e := range rc.effects {
		if e.Key == key {
			n++
		}
	}
	return n
}

// BadSignatures counts deliveries refused for their signature.
func (rc *Receiver) BadSignatures() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.badSigs
}

// Deliveries returns the headers of every delivery that reached the receiver.
func (rc *Receiver) Deliveries() []http.Header {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]http.Header(nil), rc.deliveries...)
}

func writeRcv(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (rc *Receiver) verify(body []byte, h http.Header) error {
	if err := rc.wh.VerifyIgnoringTimestamp(body, h); err != nil {
		return err
	}
	ts, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err != nil {
		return err
	}
	if d := rc.opts.Now().Sub(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp outside tolerance")
	}
	return nil
}

type rcvEnvelope struct {
	Type string `json:"type"`
	Data struct {
		IntentID string `json:"intentId"`
		Target   string `json:"target"`
	} `json:"data"`
}

func (rc *Receiver) deliver(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	rc.mu.Lock()
	rc.deliveries = append(rc.deliveries, r.Header.Clone())
	rc.mu.Unlock()
	if err := rc.verify(body, r.Header); err != nil {
		rc.mu.Lock()
		rc.badSigs++
		rc.mu.Unlock()
		writeRcv(w, http.StatusUnauthorized, map[string]any{"code": "invalid_signature"})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" || key != r.Header.Get("webhook-id") {
		writeRcv(w, http.StatusBadRequest, map[string]any{"code": "invalid_request"})
		return
	}
	var env rcvEnvelope
	if json.Unmarshal(body, &env) != nil || env.Type == "" || env.Data.Target == "" {
		writeRcv(w, http.StatusBadRequest, map[string]any{"code": "invalid_request"})
		return
	}
	if strings.HasPrefix(env.Data.Target, "invalid") {
		writeRcv(w, http.StatusUnprocessableEntity, map[string]any{"code": "invalid_target"})
		return
	}
	f, hasFault := rc.faults.pop()
	if hasFault {
		switch f.Kind {
		case Reject:
			writeRcv(w, http.StatusUnprocessableEntity, map[string]any{"code": "invalid_payload"})
			return
		case Unauthorized:
			writeRcv(w, http.StatusForbidden, map[string]any{"code": "subscription_revoked"})
			return
		case RateLimit:
			w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
			writeRcv(w, http.StatusTooManyRequests, map[string]any{"code": "rate_limited"})
			return
		case Unavailable:
			writeRcv(w, http.StatusServiceUnavailable, map[string]any{"code": "unavailable"})
			return
		case ProviderError:
			writeRcv(w, errorStatus(w, f, http.StatusBadRequest), map[string]any{"code": f.Code})
			return
		case HangNoCommit:
			rc.mark(key, +1)
			rc.faults.hold(r)
			rc.mark(key, -1)
			writeRcv(w, http.StatusServiceUnavailable, map[string]any{"code": "unavailable"})
			return
		}
	}

	rc.mu.Lock()
	now := rc.opts.Now()
	k := rc.keys[key]
	if k == nil {
		k = &rcvKey{}
		rc.keys[key] = k
	}
	if rc.opts.HonoursKeys && k.committed && now.Sub(k.first) < rc.opts.Retention {
		id := k.id
		rc.mu.Unlock()
		if rc.opts.ConflictOnDuplicate {
			writeRcv(w, http.StatusConflict, map[string]any{"code": "duplicate", "id": id})
		} else {
			w.Header().Set("Idempotent-Replayed", "true")
			writeRcv(w, http.StatusOK, map[string]any{"id": id})
		}
		return
	}
	rc.seq++
	id := "rcv_" + strconv.Itoa(rc.seq)
	if !k.committed || (rc.opts.HonoursKeys && now.Sub(k.first) >= rc.opts.Retention) {
		k.id, k.first = id, now
	}
	k.committed = true
	k.effects++
	rc.effects = append(rc.effects, ReceiverEffect{ID: id, Key: key, IntentID: env.Data.IntentID, Type: env.Type, Target: env.Data.Target})
	rc.mu.Unlock()

	if rc.faults.afterCommit(w, r, f, hasFault, func() {
		writeRcv(w, http.StatusInternalServerError, map[string]any{"code": "internal"})
	}) {
		return
	}
	writeRcv(w, http.StatusCreated, map[string]any{"id": id})
}

func (rc *Receiver) mark(key string, d int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	k := rc.keys[key]
	if k == nil {
		k = &rcvKey{}
		rc.keys[key] = k
	}
	k.inflight += d
}

func (rc *Receiver) lookup(w http.ResponseWriter, r *http.Request) {
	if !rc.opts.Lookup {
		writeRcv(w, http.StatusNotFound, map[string]any{"code": "lookup_not_supported"})
		return
	}
	if err := rc.verify(nil, r.Header); err != nil {
		writeRcv(w, http.StatusUnauthorized, map[string]any{"code": "invalid_signature"})
		return
	}
	key := r.URL.Query().Get("key")
	if key == "" {
		writeRcv(w, http.StatusBadRequest, map[string]any{"code": "invalid_request"})
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	k := rc.keys[key]
	switch {
	case k != nil && k.committed:
		writeRcv(w, http.StatusOK, map[string]any{"state": "found", "id": k.id, "effectCount": k.effects})
	case k != nil && k.inflight > 0:
		writeRcv(w, http.StatusOK, map[string]any{"state": "pending"})
	default:
		writeRcv(w, http.StatusOK, map[string]any{"state": "absent"})
	}
}
