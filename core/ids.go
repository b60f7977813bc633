package core

import (
	"unicode"
	"unicode/utf8"
)

// MaxIDBytes bounds every identifier the API accepts (intent, source, grant,
// backup, provider, account, action, target ids): well under DynamoDB's
// 2,048-byte key limit with the key's prefix.
const MaxIDBytes = 512

// CheckID is the one identifier rule, applied to every id in a path or a
// body: 1 to MaxIDBytes bytes of UTF-8 without control characters. A
// violation is a ValidationError naming field; nothing is read or written.
func CheckID(field, v string) error {
	switch {
	case v == "":
		return invalid(field, "%s must not be empty", field)
	case len(v) > MaxIDBytes:
		return invalid(field, "%s is longer than %d bytes", field, MaxIDBytes)
	case !utf8.ValidString(v):
		return invalid(field, "%s is not valid UTF-8", field)
	}
	for i, r := range v {
		if unicode.IsControl(r) {
			return invalid(field, "%s has a control character (%U) at byte %d", field, r, i)
		}
	}
	return nil
}
