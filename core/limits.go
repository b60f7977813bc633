package core

import (
	"fmt"
	"sort"
	"unicode/utf8"
)

// Size bounds. Every field a caller or a provider can fill is bounded, and the
// history that grows with them is capped inline (see SpillHistory), so no
// sequence of accepted calls can grow an intent item towards DynamoDB's
// 400 KB limit: a human decision must always be recordable.
//
// FieldLimits is the byte length allowed for each free-text field, by the
// name the API shows for it. A field over its limit is refused with
// 400 invalid_field naming it, and nothing is stored.
var FieldLimits = map[string]int{
	// Intake.
	"provider":  512,
	"account":   512,
	"action":    512,
	"target":    512,
	"source.id": 512,
	"grant.id":  512,
	"metadata":  8 << 10,
	// Human decisions and recommendations.
	"reason":     2048,
	"summary":    4096,
	"externalId": 512,
}

// CheckFieldLength is the rule for one free-text field: it must be valid
// UTF-8 and no longer than FieldLimits[field] bytes. A field without a limit
// is a programming error and is refused, so a new field cannot slip through
// unbounded.
func CheckFieldLength(field, value string) error {
	limit, ok := FieldLimits[field]
	if !ok {
		return fmt.Errorf("core: no length limit declared for field %q", field)
	}
	if len(value) > limit {
		return &ValidationError{Code: CodeInvalidField, Field: field,
			Message: fmt.Sprintf("%s is %d bytes; at most %d are allowed", field, len(value), limit)}
	}
	if !utf8.ValidString(value) {
		return &ValidationError{Code: CodeInvalidField, Field: field, Message: field + " is not valid UTF-8"}
	}
	return nil
}

// checkFieldBytes is CheckFieldLength for a field held as bytes (no copy).
func checkFieldBytes(field string, b []byte) error {
	if limit, ok := FieldLimits[field]; ok && len(b) <= limit && utf8.Valid(b) {
		return nil
	}
	return CheckFieldLength(field, string(b))
}

// Evidence bounds: what an adapter or a provider hands us is cut to these
// sizes before it goes into history.
const (
	MaxEvidenceDetail   = 1024
	MaxEvidenceCode     = 256
	MaxEvidenceExtra    = 12
	MaxEvidenceExtraKey = 64
	MaxEvidenceExtraVal = 512
	MaxExternalIDLen    = 512
)

// BoundEvidence is the rule that keeps one history entry's evidence bounded:
// detail, codes and extra values are truncated (on a UTF-8 boundary) and at
// most MaxEvidenceExtra extra entries are kept (by sorted key, so the choice
// is deterministic).
func BoundEvidence(e Evidence) Evidence {
	e.Detail = truncateUTF8(e.Detail, MaxEvidenceDetail)
	e.ProviderCode = truncateUTF8(e.ProviderCode, MaxEvidenceCode)
	e.RetryAfter = truncateUTF8(e.RetryAfter, MaxEvidenceCode)
	if len(e.Extra) == 0 {
		return e
	}
	keys := make([]string, 0, len(e.Extra))
	for k := range e.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, min(len(keys), MaxEvidenceExtra))
	for _, k := range keys {
		if len(out) == MaxEvidenceExtra {
			break
		}
		out[truncateUTF8(k, MaxEvidenceExtraKey)] = truncateUTF8(e.Extra[k], MaxEvidenceExtraVal)
	}
	e.Extra = out
	return e
}

// boundEntry bounds an attempt entry before it is appended.
func boundEntry(a Attempt) Attempt {
	a.Evidence = BoundEvidence(a.Evidence)
	a.ExternalID = truncateUTF8(a.ExternalID, MaxExternalIDLen)
	a.Result = AttemptResult(truncateUTF8(string(a.Result), MaxEvidenceCode))
	a.Trigger = Trigger(truncateUTF8(string(a.Trigger), MaxEvidenceCode))
	if a.Checks != nil {
		c := *a.Checks
		c.Reason = truncateUTF8(c.Reason, MaxEvidenceDetail)
		a.Checks = &c
	}
	return a
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
