package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
)

// handleEffects is GET /_sandbox/effects[?account=&idempotencyKey=&intentId=&target=].
func (s *Server) handleEffects(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	effects := s.Effects(EffectFilter{
		Account:        q.Get("account"),
		IdempotencyKey: q.Get("idempotencyKey"),
		IntentID:       q.Get("intentId"),
		Target:         q.Get("target"),
	})
	writeJSON(w, http.StatusOK, EffectsResponse{Count: len(effects), Effects: effects})
}

// handleGetFaults is GET /_sandbox/faults[?account=a1].
func (s *Server) handleGetFaults(w http.ResponseWriter, r *http.Request) {
	if name := r.URL.Query().Get("account"); name != "" {
		writeJSON(w, http.StatusOK, s.State(name))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Accounts []AccountState `json:"accounts"`
	}{s.States()})
}

// decodeControl reads a control request's body (at most maxBody) into v,
// refusing unknown fields; on failure it has answered 400 invalid_request
// (what prefixes a decoding error).
func (s *Server) decodeControl(w http.ResponseWriter, r *http.Request, v any, what string) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "could not read body", nil)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", what+": "+err.Error(), nil)
		return false
	}
	return true
}

// handlePostFaults is POST /_sandbox/faults.
func (s *Server) handlePostFaults(w http.ResponseWriter, r *http.Request) {
	var c Config
	if !s.decodeControl(w, r, &c, "bad config") {
		return
	}
	st, err := s.Configure(c)
	if err != nil {
		code := http.StatusBadRequest
		if !errors.Is(err, ErrInvalidConfig) {
			code = http.StatusInternalServerError
		}
		writeError(w, code, "invalid_request", err.Error(), nil)
		return
	}
	s.log.Info("configure", slog.String("account", st.Account),
		slog.Bool("idempotencyKeys", st.Capabilities.IdempotencyKeys),
		slog.Int("keyRetentionSeconds", st.Capabilities.KeyRetentionSeconds),
		slog.Bool("lookup", st.Capabilities.Lookup),
		slog.String("concurrentKeyPolicy", st.Capabilities.ConcurrentKeyPolicy),
		slog.Bool("tokenSet", st.TokenSet), slog.Int("faults", len(st.Faults)))
	writeJSON(w, http.StatusOK, st)
}

// handleReset is POST /_sandbox/reset.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	s.Reset()
	s.log.Info("reset")
	writeJSON(w, http.StatusOK, map[string]bool{"reset": true})
}

// handleRelease is POST /_sandbox/release[?account=a1].
func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) {
	n := s.Release(r.URL.Query().Get("account"))
	s.log.Info("release", slog.String("account", r.URL.Query().Get("account")), slog.Int("released", n))
	writeJSON(w, http.StatusOK, map[string]int{"released": n})
}

// handleHealth is GET /_sandbox/health.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}
