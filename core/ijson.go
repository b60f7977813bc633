package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// One identity per request (issue 24, docs/decisions.md "I-JSON only").
// Intake hashes the RFC 8785 canonical form of the body, and RFC 8785
// assumes I-JSON (RFC 7493): every number is an IEEE-754 double, names are
// unique, strings are valid Unicode. A body outside I-JSON would be rounded
// or silently reinterpreted by the canonicaliser (12345678901234567891 and
// 12345678901234567892 both become 12345678901234567000), so two different
// requests would share one hash and the provider would receive a number the
// bot never wrote. CheckIJSON refuses such a body instead, naming the value
// by its JSON pointer; what is accepted canonicalises without loss, so the
// bytes hashed, stored and sent are one and the same.

// CheckIJSON reports the first place where the JSON document doc is not
// I-JSON: a number that does not survive a double round trip
// (ExactDouble), a duplicate member name, or a string that is not valid
// Unicode (invalid UTF-8, an unpaired surrogate escape). The error is a
// *ValidationError (invalid_field) whose Field is the RFC 6901 pointer of
// the value, e.g. "/payload/orderId". Pure.
func CheckIJSON(doc []byte) error {
	if !json.Valid(doc) {
		return &ValidationError{Code: CodeMalformedJSON, Message: "the request body is not valid JSON"}
	}
	dec := jsontext.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return ijsonError(err)
		}
		if tok.Kind() == '0' {
			if lit := tok.String(); !ExactDouble(lit) {
				ptr := string(dec.StackPointer())
				return &ValidationError{Code: CodeInvalidField, Field: ptr,
					Message: fmt.Sprintf("the number at %s (%s) cannot be held exactly by an IEEE-754 double; send it as a string", pointerOrRoot(ptr), clip(lit, 40))}
			}
		}
	}
}

func ijsonError(err error) error {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return &ValidationError{Code: CodeMalformedJSON, Message: "the request body is not valid JSON"}
	}
	ptr := string(se.JSONPointer)
	switch {
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		return &ValidationError{Code: CodeInvalidField, Field: ptr,
			Message: fmt.Sprintf("the member %s appears more than once in its object", pointerOrRoot(ptr))}
	}
	// The body passed json.Valid, so what the stricter decoder refuses
	// besides duplicate names is a string that is not valid Unicode.
	return &ValidationError{Code: CodeInvalidField, Field: ptr,
		Message: fmt.Sprintf("the string at %s is not valid Unicode (invalid UTF-8 or an unpaired surrogate escape)", pointerOrRoot(ptr))}
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "the top level"
	}
	return p
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ExactDouble is the I-JSON number rule: the JSON number literal lit
// survives an IEEE-754 double round trip, i.e. parsing it to the nearest
// double and writing that double back in its shortest form gives the same
// decimal value. 9007199254740993 (2^53+1), 12345678901234567891,
// 0.10000000000000001, 1e400 and 1e-400 do not; 9007199254740992, 0.1,
// 1E2, 1.50, -0 and 5e-324 do. A literal that is exactly some double but
// not the double's shortest form (18446744073709551616 = 2^64 is written
// back as 18446744073709552000) does not either: the canonical form would
// send the provider other digits than the bot wrote. Pure.
func ExactDouble(lit string) bool {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		// Out of range (±Inf), or not a number literal at all.
		return false
	}
	a, ok := normDecimal(lit)
	if !ok {
		return false
	}
	b, ok := normDecimal(strconv.FormatFloat(f, 'e', -1, 64))
	return ok && a == b
}

// normDecimal renders a decimal literal as "<sign><digits>e<exp>" with no
// leading or trailing zeros in digits, so two literals of the same value
// give the same string ("0" for every zero, whatever its sign: -0 and 0 are
// the same value, RFC 8785 writes both as 0). ok is false for a literal
// that is not a number or whose exponent is far outside any double's.
func normDecimal(lit string) (string, bool) {
	s := lit
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	} else if strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	mant, expPart := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expPart = s[:i], s[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" {
		return "", false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return "", false
		}
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", true
	}
	exp := 0
	if expPart != "" {
		// A double's decimal exponent is within about ±350; anything with
		// ten exponent digits and a non-zero mantissa is no double.
		if len(strings.TrimLeft(strings.TrimLeft(expPart, "+-"), "0")) > 9 {
			return "", false
		}
		e, err := strconv.Atoi(expPart)
		if err != nil {
			return "", false
		}
		exp = e
	}
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.Itoa(exp), true
}
