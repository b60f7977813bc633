package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Canonicalize returns the RFC 8785 (JCS) form of an I-JSON document:
// object key order and insignificant whitespace never change it, and what
// it returns means exactly what doc means (core/ijson.go). A document that
// is not JSON is a *ValidationError malformed_json; one that is JSON but not
// I-JSON is invalid_field naming the value (CheckIJSON).
//
// One pass (issue 24): the document is tokenised once, by jsontext (which
// refuses duplicate names and invalid Unicode), and each value is checked
// and written in its canonical form as it is read. Objects are sorted in
// place in the output when their members are not already in order.
func Canonicalize(doc []byte) ([]byte, error) {
	return AppendCanonical(make([]byte, 0, len(doc)), doc)
}

// AppendCanonical appends the canonical form of doc to dst (Canonicalize).
// On error dst is returned unchanged in length.
func AppendCanonical(dst, doc []byte) ([]byte, error) {
	c := canonPool.Get().(*canonicaliser)
	defer c.release()
	n := len(dst)
	out, err := c.run(dst, doc)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

// CanonicalHash is "sha256:" + hex of the canonical form.
func CanonicalHash(doc []byte) (string, error) {
	c := canonPool.Get().(*canonicaliser)
	defer c.release()
	out, err := c.run(c.outBuf[:0], doc)
	c.outBuf = out[:0]
	if err != nil {
		return "", err
	}
	return HashBytes(out), nil
}

// HashBytes hashes already-canonical bytes.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	var s [len("sha256:") + 2*sha256.Size]byte
	copy(s[:], "sha256:")
	hex.Encode(s[len("sha256:"):], sum[:])
	return string(s[:])
}

// canonicaliser is the reusable state of one pass (pooled: a decoder and
// the scratch buffers are reused across requests).
type canonicaliser struct {
	dec     jsontext.Decoder
	src     bytes.Buffer
	members []canonMember // a stack: each open object's members, innermost last
	names   []byte        // unescaped names that had escapes
	scratch []byte        // an object's members while they are reordered
	unq     []byte        // an escaped string's unescaped text
	outBuf  []byte        // CanonicalHash's output
}

type canonMember struct {
	name       []byte // unescaped
	start, end int    // the member ("name":value) in the output
}

var canonPool = sync.Pool{New: func() any { return new(canonicaliser) }}

// canonKeepBytes bounds what a pooled canonicaliser keeps between uses (a
// 6 MiB body must not pin 6 MiB per pooled entry for ever).
const canonKeepBytes = 256 << 10

func (c *canonicaliser) release() {
	c.src = bytes.Buffer{} // drop doc; the decoder reads an empty buffer
	c.dec.Reset(&c.src)
	clear(c.members) // do not pin a request's names
	c.members = c.members[:0]
	for _, b := range []*[]byte{&c.names, &c.scratch, &c.unq, &c.outBuf} {
		if cap(*b) > canonKeepBytes {
			*b = nil
		}
	}
	canonPool.Put(c)
}

func (c *canonicaliser) run(out, doc []byte) ([]byte, error) {
	c.src = *bytes.NewBuffer(doc) // the decoder reads doc in place
	c.dec.Reset(&c.src)
	out, err := c.value(out)
	if err == nil {
		// Exactly one value: anything after it is not JSON.
		if _, err = c.dec.ReadToken(); errors.Is(err, io.EOF) {
			return out, nil
		} else if err == nil {
			err = errors.New("data after the top-level value")
		}
	}
	return out, refusal(doc, err)
}

// refusal says why the pass stopped (only ever on a refused body): not JSON
// at all (malformed_json, which wins over an I-JSON rule met earlier in the
// body), or JSON that is not I-JSON: an inexact number (err already says
// where), a duplicate name or a string that is not valid Unicode
// (invalid_field with its pointer).
func refusal(doc []byte, err error) error {
	if !json.Valid(doc) {
		return &ValidationError{Code: CodeMalformedJSON, Message: "the request body is not valid JSON"}
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return err
	}
	return ijsonError(err)
}

func (c *canonicaliser) value(out []byte) ([]byte, error) {
	switch c.dec.PeekKind() {
	case '{':
		return c.object(out)
	case '[':
		if _, err := c.dec.ReadToken(); err != nil {
			return out, err
		}
		out = append(out, '[')
		for first := true; c.dec.PeekKind() != ']'; first = false {
			if !first {
				out = append(out, ',')
			}
			var err error
			if out, err = c.value(out); err != nil {
				return out, err
			}
		}
		if _, err := c.dec.ReadToken(); err != nil {
			return out, err
		}
		return append(out, ']'), nil
	}
	raw, err := c.dec.ReadValue()
	if err != nil {
		return out, err
	}
	switch raw.Kind() {
	case '"':
		return c.appendString(out, raw)
	case '0':
		return c.appendNumber(out, raw)
	}
	return append(out, raw...), nil // true, false, null
}

func (c *canonicaliser) object(out []byte) ([]byte, error) {
	if _, err := c.dec.ReadToken(); err != nil {
		return out, err
	}
	out = append(out, '{')
	body := len(out)
	base := len(c.members)
	sorted := true
	for c.dec.PeekKind() != '}' {
		if len(c.members) > base {
			out = append(out, ',')
		}
		start := len(out)
		raw, err := c.dec.ReadValue()
		if err != nil {
			return out, err
		}
		var name []byte
		if bytes.IndexByte(raw, '\\') < 0 {
			name = raw[1 : len(raw)-1] // doc itself: stable for the pass
		} else {
			n := len(c.names)
			if c.names, err = jsontext.AppendUnquote(c.names, raw); err != nil {
				return out, err
			}
			name = c.names[n:len(c.names):len(c.names)]
		}
		if out, err = c.appendString(out, raw); err != nil {
			return out, err
		}
		out = append(out, ':')
		if out, err = c.value(out); err != nil {
			return out, err
		}
		if len(c.members) > base && compareUTF16(c.members[len(c.members)-1].name, name) > 0 {
			sorted = false
		}
		c.members = append(c.members, canonMember{name: name, start: start, end: len(out)})
	}
	if _, err := c.dec.ReadToken(); err != nil {
		return out, err
	}
	if !sorted {
		// RFC 8785 3.2.3: members in ascending order of their names' UTF-16
		// code units (names are unique: I-JSON).
		ms := c.members[base:]
		c.scratch = append(c.scratch[:0], out[body:]...)
		slices.SortFunc(ms, func(a, b canonMember) int { return compareUTF16(a.name, b.name) })
		out = out[:body]
		for i, m := range ms {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, c.scratch[m.start-body:m.end-body]...)
		}
	}
	clear(c.members[base:])
	c.members = c.members[:base]
	return append(out, '}'), nil
}

// appendString writes a string in RFC 8785 form (3.2.2.2): the decoder has
// already refused invalid UTF-8 and raw control characters, so a literal
// without escapes is already canonical; one with escapes is unescaped and
// quoted again (jsontext's quoting is RFC 8785's).
func (c *canonicaliser) appendString(out []byte, raw jsontext.Value) ([]byte, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return append(out, raw...), nil
	}
	var err error
	if c.unq, err = jsontext.AppendUnquote(c.unq[:0], raw); err != nil {
		return out, err
	}
	return jsontext.AppendQuote(out, c.unq)
}

// appendNumber writes a number in RFC 8785 form (3.2.2.3, ECMAScript's
// Number.prototype.toString) after the I-JSON rule: a literal that does not
// survive a double round trip is refused with its pointer.
func (c *canonicaliser) appendNumber(out []byte, raw jsontext.Value) ([]byte, error) {
	if smallInteger(raw) {
		// Up to 15 digits, no fraction or exponent: exactly a double, and
		// already its shortest form (JSON has no leading zeros), but -0 is 0.
		if len(raw) == 2 && raw[0] == '-' && raw[1] == '0' {
			return append(out, '0'), nil
		}
		return append(out, raw...), nil
	}
	f, ok := exactDouble(raw)
	if !ok {
		ptr := string(c.dec.StackPointer())
		return out, &ValidationError{Code: CodeInvalidField, Field: ptr,
			Message: "the number at " + pointerOrRoot(ptr) + " (" + clip(string(raw), 40) + ") cannot be held exactly by an IEEE-754 double; send it as a string"}
	}
	return appendES6Number(out, f), nil
}

func smallInteger(lit []byte) bool {
	d := lit
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 {
		return false
	}
	for _, b := range d {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}

// appendES6Number is ECMAScript's Number.prototype.toString of a finite
// double, as RFC 8785 specifies it (the algorithm of gowebpki/jcs's
// NumberToJSON, appending instead of allocating).
func appendES6Number(dst []byte, f float64) []byte {
	if f == 0 { // 0 and -0
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	format := byte('e')
	if f < 1e21 && f >= 1e-6 {
		format = 'f'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Go writes 1e+09, ECMAScript 1e+9.
		if i := bytes.IndexByte(dst[start:], 'e'); i >= 0 && dst[start+i+2] == '0' {
			dst = append(dst[:start+i+2], dst[start+i+3:]...)
		}
	}
	return dst
}

// compareUTF16 orders two UTF-8 names by their UTF-16 code units (RFC 8785
// 3.2.3). Code point order is the same except that a supplementary
// character (a surrogate pair, 0xD800..) sorts before U+E000..U+FFFF.
func compareUTF16(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		if a[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf {
			if a[0] != b[0] {
				return int(a[0]) - int(b[0])
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb {
			ua, ub := ra, rb
			if ra >= 0x10000 {
				ua, _ = utf16.EncodeRune(ra)
			}
			if rb >= 0x10000 {
				ub, _ = utf16.EncodeRune(rb)
			}
			if ua != ub {
				return int(ua) - int(ub)
			}
			// Both supplementary with the same high surrogate.
			return int(ra) - int(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// EffectHashPrefix marks a request hash that covers the effect only
// (EffectHash); a stored hash without it covers the whole canonical request
// (intents stored before issue 50).
const EffectHashPrefix = "effect:"

// EffectHash is the idempotent identity's comparison (issue 50): what the
// effect is, not the context it is sent under. It covers kind, provider,
// account, action, target, payload (by its canonical hash) and the source
// revision the intent answers; it leaves out the grant reference (the
// authority the effect is sent under: a grant re-applied as a new version
// does not make a re-run a new operation), the deadline (a re-run computing
// "now + 5 min" asks for the same effect) and metadata (the bot's own
// annotations, such as a run or trace id). TestEffectHashCoversTheEffect has
// one row per request field.
func EffectHash(in *Intent) string {
	var src string
	if in.Source != nil {
		src = in.Source.ID + "@" + strconv.FormatInt(in.Source.Revision, 10)
	}
	h := sha256.New()
	for _, f := range [...]string{string(in.Kind), in.Provider, in.Account, in.Action, in.Target, in.PayloadHash, src} {
		// Length-prefixed, so no two field lists hash alike.
		h.Write(strconv.AppendInt(nil, int64(len(f)), 10))
		h.Write([]byte{':'})
		h.Write([]byte(f))
	}
	return EffectHashPrefix + "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// RequestHashes are the two comparisons a submission can be judged by.
type RequestHashes struct {
	// Effect is EffectHash of the submitted request.
	Effect string
	// Whole hashes the whole canonical request, as intents stored before
	// issue 50 recorded it; computed only when a stored hash needs it.
	Whole func() string
}

// Same reports whether stored (an intent's RequestHash) records this very
// request: by the effect where it was stored so, by the whole request
// otherwise (older intents answer replays exactly as before).
func (h RequestHashes) Same(stored string) bool {
	if strings.HasPrefix(stored, EffectHashPrefix) {
		return stored == h.Effect
	}
	return h.Whole != nil && stored == h.Whole()
}

// requestHashes are the hashes of in, built from the canonical body.
func requestHashes(in *Intent, canonical []byte) RequestHashes {
	return RequestHashes{Effect: in.RequestHash, Whole: func() string { return HashBytes(canonical) }}
}
