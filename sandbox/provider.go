package sandbox

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// handleSend is POST /v1/accounts/{account}/messages.
//
// Pipeline: auth -> request validation -> fault pop -> pre-commit faults ->
// key ownership (key-honouring accounts) -> hold (hang faults) ->
// commit-or-replay -> post-commit faults -> response.
func (s *Server) handleSend(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("account")
	key := r.Header.Get("Idempotency-Key")
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	log := s.log.With(slog.String("account", name), slog.String("idempotencyKey", key))

	s.mu.Lock()
	a := s.accountLocked(name)
	if !a.authorised(r) {
		s.mu.Unlock()
		log.Info("send", slog.String("outcome", "invalid_auth"), slog.Int("status", http.StatusUnauthorized))
		writeError(w, http.StatusUnauthorized, "invalid_auth", "missing or wrong bearer token", nil)
		return
	}
	s.mu.Unlock()

	req, status, code, msg := validateSend(r, key, body, readErr)
	if status != 0 {
		log.Info("send", slog.String("outcome", code), slog.Int("status", status), slog.String("reason", msg))
		writeError(w, status, code, msg, nil)
		return
	}
	log = log.With(slog.String("action", req.Action), slog.String("target", req.Target),
		slog.String("intentId", req.IntentID), slog.String("payloadHash", req.PayloadHash))
	sw := &statusWriter{ResponseWriter: w}
	w = sw
	rec := RequestRecord{Account: name, Target: req.Target, IdempotencyKey: key, IntentID: req.IntentID, At: s.now(),
		TraceParent: r.Header.Get("traceparent")}
	defer func() { rec.Status = sw.status; s.logRequest(rec) }()

	s.mu.Lock()
	gen, genDone := s.gen, s.genDone
	a = s.accountLocked(name)
	if st, ra := a.admitLocked(rec.At); st != 0 {
		s.mu.Unlock()
		if st == http.StatusTooManyRequests {
			log.Info("send", slog.String("outcome", "rate_limited"), slog.Int("status", st), slog.Int("retryAfter", ra))
			writeRateLimited(w, ra, "rate limit of the account exceeded")
			return
		}
		log.Info("send", slog.String("outcome", "outage"), slog.Int("status", st))
		writeUnavailable(w)
		return
	}
	if req.Action == ActionUpdateMessage {
		if _, ok := s.texts[req.Target]; !ok {
			s.mu.Unlock()
			log.Info("send", slog.String("outcome", "message_not_found"), slog.Int("status", http.StatusNotFound))
			writeError(w, http.StatusNotFound, "message_not_found", "no message "+req.Target+" to update", nil)
			return
		}
	}
	fault, hasFault := a.popFault(req.Target)
	s.mu.Unlock()
	if hasFault {
		log = log.With(slog.String("fault", string(fault.Kind)))
	}

	// Faults that answer before anything is committed.
	switch fault.Kind {
	case FaultRateLimit:
		n := fault.RetryAfterSeconds
		if n == 0 {
			n = DefaultRetryAfterSeconds
		}
		w.Header().Set("Retry-After", strconv.Itoa(n))
		log.Info("send", slog.String("outcome", "rate_limited"), slog.Int("status", http.StatusTooManyRequests))
		writeError(w, http.StatusTooManyRequests, "rate_limited", "rate limited by fault injection", nil)
		return
	case FaultUnavailable:
		log.Info("send", slog.String("outcome", "unavailable"), slog.Int("status", http.StatusServiceUnavailable))
		writeUnavailable(w)
		return
	case FaultReject:
		log.Info("send", slog.String("outcome", "invalid_request"), slog.Int("status", http.StatusBadRequest))
		writeError(w, http.StatusBadRequest, "invalid_request", "rejected by fault injection", nil)
		return
	case FaultUnauthorized:
		log.Info("send", slog.String("outcome", "invalid_auth"), slog.Int("status", http.StatusUnauthorized))
		writeError(w, http.StatusUnauthorized, "invalid_auth", "unauthorized by fault injection", nil)
		return
	}

	// Become the key's owner (key-honouring accounts) and count as in flight.
	var ks *keyState
	var owned bool
	for {
		s.mu.Lock()
		if s.gen != gen {
			s.mu.Unlock()
			log.Info("send", slog.String("outcome", "abandoned_by_reset"), slog.Int("status", http.StatusServiceUnavailable))
			writeUnavailable(w)
			return
		}
		ks = a.key(key)
		if a.caps.IdempotencyKeys && ks.owner != nil {
			if a.caps.ConcurrentKeyPolicy == PolicyConflict {
				s.mu.Unlock()
				log.Info("send", slog.String("outcome", "request_in_progress"), slog.Int("status", http.StatusConflict))
				writeError(w, http.StatusConflict, "request_in_progress", "another request with this idempotency key is in progress", nil)
				return
			}
			wait := ks.owner
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-r.Context().Done():
				log.Info("send", slog.String("outcome", "client_gone_while_waiting"))
				writeError(w, http.StatusConflict, "request_in_progress", "another request with this idempotency key is in progress", nil)
				return
			case <-s.closed:
				log.Info("send", slog.String("outcome", "abandoned_by_close"), slog.Int("status", http.StatusServiceUnavailable))
				writeUnavailable(w)
				return
			case <-genDone:
				continue // the generation check above answers
			}
		}
		if a.caps.IdempotencyKeys {
			ks.owner = make(chan struct{})
			owned = true
		}
		ks.inflight++
		s.mu.Unlock()
		break
	}
	// finish ends this request's in-flight period; call with s.mu held.
	finish := func() {
		ks.inflight--
		if owned {
			close(ks.owner)
			ks.owner = nil
			owned = false
		}
	}
	// giveUp answers 503 for a request that ends before its commit (s.mu
	// not held).
	giveUp := func(outcome string) {
		s.mu.Lock()
		finish()
		s.mu.Unlock()
		log.Info("send", slog.String("outcome", outcome), slog.Int("status", http.StatusServiceUnavailable))
		writeUnavailable(w)
	}

	if fault.Kind == FaultHang || fault.Kind == FaultHangNoCommit {
		delay := time.Duration(fault.DelayMs) * time.Millisecond
		if fault.DelayMs == 0 {
			delay = s.defaultHang
		}
		if !s.hold(a, delay, genDone) {
			giveUp("abandoned_while_held")
			return
		}
		if fault.Kind == FaultHangNoCommit {
			giveUp("unavailable")
			return
		}
	}

	s.mu.Lock()
	if s.gen != gen { // reset while held: the old world is gone, commit nothing
		finish()
		s.mu.Unlock()
		log.Info("send", slog.String("outcome", "abandoned_by_reset"), slog.Int("status", http.StatusServiceUnavailable))
		writeUnavailable(w)
		return
	}
	if a.caps.ClientChosenIDs && ks.effects > 0 {
		// The key names a message that exists: a client-chosen id's repeat.
		finish()
		s.mu.Unlock()
		log.Info("send", slog.String("outcome", "duplicate"), slog.Int("status", http.StatusConflict))
		writeError(w, http.StatusConflict, "duplicate", "a message with this id already exists", nil)
		return
	}
	respBody, replayed, messageID := s.commitLocked(a, ks, key, req)
	emit := s.commitWebhooksLocked(a, key, req, messageID, replayed)
	finish()
	s.mu.Unlock()
	if emit != nil {
		emit() // early webhooks are delivered here, before the response
	}

	outcome := "committed"
	if replayed {
		outcome = "replayed"
	}
	log = log.With(slog.String("messageId", messageID), slog.String("outcome", outcome))

	// Faults that strike after the commit (or replay).
	switch fault.Kind {
	case FaultDropAfterCommit:
		log.Info("send", slog.String("response", "dropped"))
		dropConnection(w)
		return
	case FaultErrorAfterCommit:
		log.Info("send", slog.Int("status", http.StatusInternalServerError))
		writeError(w, http.StatusInternalServerError, "internal", "", nil)
		return
	}
	status = http.StatusCreated
	if replayed {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	}
	log.Info("send", slog.Int("status", status))
	writeRaw(w, status, respBody)
}

// validateSend checks headers and body; a non-zero status means the request is invalid.
func validateSend(r *http.Request, key string, body []byte, readErr error) (req MessageRequest, status int, code, msg string) {
	if readErr != nil {
		var tooBig *http.MaxBytesError
		if errors.As(readErr, &tooBig) {
			return req, http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("body exceeds %d bytes", tooBig.Limit)
		}
		return req, http.StatusBadRequest, "invalid_request", "could not read body"
	}
	if key == "" {
		return req, http.StatusBadRequest, "invalid_request", "Idempotency-Key header is required"
	}
	if utf8.RuneCountInString(key) > MaxIdempotencyKeyLength {
		return req, http.StatusBadRequest, "invalid_request", "Idempotency-Key must be at most 255 characters"
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return req, http.StatusBadRequest, "invalid_request", "Content-Type must be application/json"
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return req, http.StatusBadRequest, "invalid_request", "body is not a JSON object of the expected shape"
	}
	if dec.More() {
		return req, http.StatusBadRequest, "invalid_request", "trailing data after JSON body"
	}
	if req.Action == "" {
		return req, http.StatusBadRequest, "invalid_request", "action is required"
	}
	if req.Target == "" {
		return req, http.StatusBadRequest, "invalid_request", "target is required"
	}
	if strings.HasPrefix(req.Target, "invalid") {
		return req, http.StatusBadRequest, "invalid_target", "target does not exist"
	}
	return req, 0, "", ""
}

// hold waits for the fault delay, an explicit Release, or abandonment (Close
// or Reset). It reports whether the request should go on (false = abandon).
func (s *Server) hold(a *account, delay time.Duration, genDone <-chan struct{}) bool {
	s.mu.Lock()
	if s.isClosed {
		s.mu.Unlock()
		return false
	}
	s.holds.Add(1)
	a.held++
	release := a.release
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		a.held--
		s.mu.Unlock()
		s.holds.Done()
	}()

	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-release:
		return true
	case <-s.closed:
		return false
	case <-genDone:
		return false
	}
}

// commitLocked performs the effect, or replays the key's recorded result when
// the account honours keys and the key's retention window is still open.
func (s *Server) commitLocked(a *account, ks *keyState, key string, req MessageRequest) (body []byte, replayed bool, messageID string) {
	now := s.now().UTC()
	if a.caps.IdempotencyKeys && ks.hasRecord && now.Before(ks.firstCommit.Add(a.retention())) {
		var m Message
		_ = json.Unmarshal(ks.recordBody, &m)
		return ks.recordBody, true, m.ID
	}
	s.nextID++
	m := Message{
		ID:             "sbx_" + strconv.FormatInt(s.nextID, 10),
		Status:         "delivered",
		IdempotencyKey: key,
		CommittedAt:    now.Format(time.RFC3339Nano),
	}
	body, err := json.Marshal(m)
	if err != nil {
		panic(err) // cannot happen: only strings
	}
	s.setTextLocked(req, m.ID, now)
	s.effects = append(s.effects, Effect{
		Account:        a.name,
		Action:         req.Action,
		Target:         req.Target,
		IdempotencyKey: key,
		PayloadHash:    req.PayloadHash,
		IntentID:       req.IntentID,
		MessageID:      m.ID,
		At:             now,
	})
	ks.effects++
	if ks.firstBody == nil {
		ks.firstBody = body
	}
	if a.caps.IdempotencyKeys {
		ks.hasRecord = true
		ks.recordBody = body
		ks.firstCommit = now
	}
	_ = s.saveLocked() // before the answer: an answered effect is never forgotten
	return body, false, m.ID
}

// handleLookup is GET /v1/accounts/{account}/messages?idempotencyKey=K.
func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("account")
	key := r.URL.Query().Get("idempotencyKey")
	s.mu.Lock()
	a, ok := s.accounts[name]
	if !ok {
		a = newAccount(name)
	}
	if !a.authorised(r) {
		s.mu.Unlock()
		writeError(w, http.StatusUnauthorized, "invalid_auth", "missing or wrong bearer token", nil)
		return
	}
	if !a.caps.Lookup {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "lookup_not_supported", "this account does not offer outcome lookup", nil)
		return
	}
	if key == "" {
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, "invalid_request", "idempotencyKey query parameter is required", nil)
		return
	}
	resp := LookupResponse{State: "absent"}
	if ks, ok := a.keys[key]; ok {
		switch {
		case ks.effects > 0:
			resp = LookupResponse{State: "found", Message: json.RawMessage(ks.firstBody), EffectCount: ks.effects}
		case ks.inflight > 0:
			resp = LookupResponse{State: "pending"}
		}
	}
	s.mu.Unlock()
	s.log.Info("lookup", slog.String("account", name), slog.String("idempotencyKey", key), slog.String("state", resp.State))
	writeJSON(w, http.StatusOK, resp)
}

// handleCapabilities is GET /v1/accounts/{account}/capabilities.
func (s *Server) handleCapabilities(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("account")
	s.mu.Lock()
	a, ok := s.accounts[name]
	if !ok {
		a = newAccount(name)
	}
	authorised, caps := a.authorised(r), a.caps
	s.mu.Unlock()
	if !authorised {
		writeError(w, http.StatusUnauthorized, "invalid_auth", "missing or wrong bearer token", nil)
		return
	}
	writeJSON(w, http.StatusOK, caps)
}

// authorised reports whether r carries the account's bearer token (any token,
// or none, when the account has no token). Call with s.mu held.
func (a *account) authorised(r *http.Request) bool {
	if a.token == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(a.token)) == 1
}

// dropConnection closes the connection without writing any response.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// HTTP/2 or a wrapped writer: abort the response instead.
	panic(http.ErrAbortHandler)
}

func writeUnavailable(w http.ResponseWriter) {
	f := false
	writeError(w, http.StatusServiceUnavailable, "unavailable", "", &f)
}

func writeError(w http.ResponseWriter, status int, code, msg string, committed *bool) {
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: msg, Committed: committed}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":{"code":"internal"}}`, http.StatusInternalServerError)
		return
	}
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte("\n"))
}
