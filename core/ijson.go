package core

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

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
// the value, e.g. "/payload/orderId". It is the check Canonicalize makes
// in its one pass (core/hash.go); intake calls Canonicalize alone. Pure.
func CheckIJSON(doc []byte) error {
	c := canonPool.Get().(*canonicaliser)
	defer c.release()
	out, err := c.run(c.outBuf[:0], doc)
	c.outBuf = out[:0]
	return err
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
	_, ok := exactDouble([]byte(lit))
	return ok
}

// exactDouble is ExactDouble of a literal in place, and the double it is;
// it allocates nothing for literals of ordinary length.
func exactDouble(lit []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		// Out of range (±Inf), or not a number literal at all.
		return 0, false
	}
	var ab, bb, sb [48]byte
	a, ok := normDecimal(ab[:0], lit)
	if !ok {
		return 0, false
	}
	b, ok := normDecimal(bb[:0], strconv.AppendFloat(sb[:0], f, 'e', -1, 64))
	return f, ok && bytes.Equal(a, b)
}

// normDecimal appends a decimal literal as "<sign><digits>e<exp>" with no
// leading or trailing zeros in digits, so two literals of the same value
// give the same text ("0" for every zero, whatever its sign: -0 and 0 are
// the same value, RFC 8785 writes both as 0). ok is false for a literal
// that is not a number or whose exponent is far outside any double's.
func normDecimal(dst, lit []byte) ([]byte, bool) {
	s := lit
	neg := false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	mant, expPart := s, []byte(nil)
	hasExp := false
	if i := bytes.IndexAny(s, "eE"); i >= 0 {
		mant, expPart, hasExp = s[:i], s[i+1:], true
	}
	intPart, frac := mant, []byte(nil)
	if i := bytes.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	if len(intPart)+len(frac) == 0 {
		return dst, false
	}
	for _, part := range [2][]byte{intPart, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return dst, false
			}
		}
	}
	// digits = intPart + frac without leading and trailing zeros; exp
	// places the decimal point after the last kept digit.
	exp := 0
	if hasExp {
		e := expPart
		eneg := false
		if len(e) > 0 && (e[0] == '-' || e[0] == '+') {
			eneg, e = e[0] == '-', e[1:]
		}
		if len(e) == 0 {
			return dst, false
		}
		e = bytes.TrimLeft(e, "0")
		// A double's decimal exponent is within about ±350; anything with
		// ten exponent digits and a non-zero mantissa is no double.
		if len(e) > 9 {
			if allZero(intPart) && allZero(frac) {
				return append(dst, '0'), true
			}
			return dst, false
		}
		for _, c := range e {
			if c < '0' || c > '9' {
				return dst, false
			}
			exp = exp*10 + int(c-'0')
		}
		if eneg {
			exp = -exp
		}
	}
	exp -= len(frac)
	// Walk the digits of intPart then frac as one sequence.
	n := len(intPart) + len(frac)
	at := func(i int) byte {
		if i < len(intPart) {
			return intPart[i]
		}
		return frac[i-len(intPart)]
	}
	first := 0
	for first < n && at(first) == '0' {
		first++
	}
	if first == n {
		return append(dst, '0'), true
	}
	last := n
	for at(last-1) == '0' {
		last--
	}
	exp += n - last
	if neg {
		dst = append(dst, '-')
	}
	for i := first; i < last; i++ {
		dst = append(dst, at(i))
	}
	dst = append(dst, 'e')
	return strconv.AppendInt(dst, int64(exp), 10), true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != '0' {
			return false
		}
	}
	return true
}
