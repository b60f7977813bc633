package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestExactDoubleEdges: the I-JSON number rule at and past the edges of a
// double. accepted numbers canonicalise to canon (RFC 8785) and every other
// spelling of the same value hashes the same; refused ones are
// 400 invalid_field naming the value's JSON pointer.
func TestExactDoubleEdges(t *testing.T) {
	cases := []struct {
		lit   string
		ok    bool
		canon string
	}{
		{"0", true, "0"},
		{"-0", true, "0"},
		{"-0.0e5", true, "0"},
		{"0e99999999999999999999", true, "0"},
		{"0.1", true, "0.1"},
		{"1E2", true, "100"},
		{"1e2", true, "100"},
		{"1.50", true, "1.5"},
		{"1e21", true, "1e+21"},
		{"1e-7", true, "1e-7"},
		{"123.456", true, "123.456"},
		{"9007199254740991", true, "9007199254740991"},   // 2^53 - 1
		{"9007199254740992", true, "9007199254740992"},   // 2^53
		{"-9007199254740991", true, "-9007199254740991"}, // -(2^53 - 1)
		{"1.7976931348623157e308", true, "1.7976931348623157e+308"},
		{"2.2250738585072014e-308", true, "2.2250738585072014e-308"},
		{"5e-324", true, "5e-324"},
		{"9007199254740993", false, ""},                                          // 2^53 + 1
		{"-9007199254740993", false, ""},                                         // -(2^53 + 1)
		{"12345678901234567891", false, ""},                                      // issue 24 finding 1
		{"12345678901234567892", false, ""},                                      //
		{"18446744073709551616", false, ""},                                      // 2^64: a double, but written back as ...552000
		{"0.10000000000000001", false, ""},                                       // the same double as 0.1, other digits
		{"0.1000000000000000055511151231257827021181583404541015625", false, ""}, // 0.1's exact value, not its shortest form
		{"3.141592653589793238", false, ""},                                      // more precision than a double holds
		{"1e400", false, ""},
		{"-1E400", false, ""},
		{"1.7976931348623159e308", false, ""}, // rounds to +Inf
		{"1e-400", false, ""},                 // underflows to 0
		{"2e-324", false, ""},                 // rounds to 0
		{"1e99999999999999999999", false, ""},
		{"100000000000000000000000000001", false, ""},
	}
	for _, c := range cases {
		t.Run(c.lit, func(t *testing.T) {
			if got := ExactDouble(c.lit); got != c.ok {
				t.Fatalf("ExactDouble(%s) = %v, want %v", c.lit, got, c.ok)
			}
			doc := []byte(`{"payload":{"orderId":` + c.lit + `}}`)
			err := CheckIJSON(doc)
			if !c.ok {
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Code != CodeInvalidField || ve.Field != "/payload/orderId" {
					t.Fatalf("CheckIJSON = %v, want invalid_field at /payload/orderId", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckIJSON refused an exact number: %v", err)
			}
			canon, err := Canonicalize([]byte(c.lit))
			if err != nil || string(canon) != c.canon {
				t.Fatalf("canonical form %q (%v), want %q", canon, err, c.canon)
			}
			if !ExactDouble(c.canon) {
				t.Fatalf("the canonical form %s of an accepted number is refused", c.canon)
			}
			if !decimalEqual(c.lit, c.canon) {
				t.Fatalf("canonicalising %s changed its value to %s", c.lit, c.canon)
			}
		})
	}
}

// TestCheckIJSONNamesAndStrings: the other two I-JSON rules, and where a
// refused value is reported.
func TestCheckIJSONNamesAndStrings(t *testing.T) {
	cases := []struct {
		doc, field string
	}{
		{`{"payload":{"a":1,"a":1}}`, "/payload/a"},
		{`{"kind":"reply","kind":"action"}`, "/kind"},
		{`{"payload":{"t":"\ud800"}}`, "/payload/t"},
		{`{"payload":{"t":"\udc00\ud800"}}`, "/payload/t"},
		{"{\"payload\":{\"t\":\"\xff\"}}", "/payload/t"},
		{`{"payload":{"list":[1,2,{"x~y/z":9007199254740993}]}}`, "/payload/list/2/x~0y~1z"},
		{`{"metadata":{"n":1e400}}`, "/metadata/n"},
	}
	for _, c := range cases {
		err := CheckIJSON([]byte(c.doc))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Code != CodeInvalidField || ve.Field != c.field {
			t.Errorf("%s: got %v, want invalid_field at %s", c.doc, err, c.field)
		}
	}
	for _, ok := range []string{`{"t":"\ud83d\ude00"}`, `{"t":"é\u00e9\u2028"}`, `{"a":{"a":{"a":1}}}`, `[{"a":1},{"a":1}]`} {
		if err := CheckIJSON([]byte(ok)); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
}

// TestSubmitRefusesInexactNumbers: finding 1 at the core. The same key with
// ...567891 and then ...567892 was a replay (both rounded to ...567000);
// now the first is refused and nothing is written.
func TestSubmitRefusesInexactNumbers(t *testing.T) {
	r := newRig(Capabilities{})
	for _, n := range []string{"12345678901234567891", "12345678901234567892", "9007199254740993"} {
		b := strings.Replace(body, `{"text":"hi"}`, `{"text":"hi","orderId":`+n+`}`, 1)
		_, err := r.in.Submit(context.Background(), "bot1", "k1", []byte(b))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Code != CodeInvalidField || ve.Field != "/payload/orderId" {
			t.Fatalf("%s: got %v, want invalid_field at /payload/orderId", n, err)
		}
	}
	if r.store.puts != 0 {
		t.Fatalf("refused bodies wrote %d items", r.store.puts)
	}
	// An exact number is accepted and stored, hashed and sent as written.
	b := strings.Replace(body, `{"text":"hi"}`, `{"text":"<&>","orderId":9007199254740991}`, 1)
	res, err := r.in.Submit(context.Background(), "bot1", "k2", []byte(b))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"orderId":9007199254740991,"text":"<&>"}`
	if string(res.Intent.Payload) != want || res.Intent.PayloadHash != HashBytes([]byte(want)) {
		t.Fatalf("stored payload %s (%s), want %s", res.Intent.Payload, res.Intent.PayloadHash, want)
	}
	mustAttempt(t, r.d, res.Intent.ID)
	if len(r.prov.payloads) != 1 || string(r.prov.payloads[0]) != want {
		t.Fatalf("sent %q, want %q", r.prov.payloads, want)
	}
}

// --- "same hash only if equal values" ------------------------------------

// jv is a generated JSON value: nil, bool, float64, string, []jv or jobj.
type jv = any

type jobj map[string]jv

func genValue(depth int) *rapid.Generator[jv] {
	return rapid.Custom(func(t *rapid.T) jv {
		max := 6
		if depth <= 0 {
			max = 3
		}
		switch rapid.IntRange(0, max).Draw(t, "kind") {
		case 0:
			return nil
		case 1:
			return rapid.Bool().Draw(t, "bool")
		case 2, 4:
			return genNumber().Draw(t, "num")
		case 3:
			return genString().Draw(t, "str")
		case 5:
			n := rapid.IntRange(0, 4).Draw(t, "len")
			a := make([]jv, n)
			for i := range a {
				a[i] = genValue(depth-1).Draw(t, "elem")
			}
			return a
		default:
			keys := rapid.SliceOfNDistinct(genString(), 0, 4, rapid.ID[string]).Draw(t, "keys")
			o := jobj{}
			for _, k := range keys {
				o[k] = genValue(depth-1).Draw(t, "member")
			}
			return o
		}
	})
}

// edgeNumbers are doubles around the places where decimal and binary meet.
var edgeNumbers = []float64{0, math.Copysign(0, -1), 0.1, 0.2, 0.3, 1, -1, 100, 1e21, 1e22, 1e-7,
	1 << 53, 1<<53 - 1, -(1<<53 - 1), 1 << 62, math.MaxFloat64, math.SmallestNonzeroFloat64, 2.2250738585072014e-308,
	123456789012345680000, 0.1 + 0.2}

func genNumber() *rapid.Generator[float64] {
	return rapid.Custom(func(t *rapid.T) float64 {
		if rapid.Bool().Draw(t, "edge") {
			f := rapid.SampledFrom(edgeNumbers).Draw(t, "edgeNum")
			switch rapid.IntRange(0, 2).Draw(t, "ulp") {
			case 1:
				f = math.Nextafter(f, math.Inf(1))
			case 2:
				f = math.Nextafter(f, math.Inf(-1))
			}
			if math.IsInf(f, 0) {
				f = math.MaxFloat64
			}
			return f
		}
		if rapid.Bool().Draw(t, "int") {
			return float64(rapid.Int64Range(-(1<<53-1), 1<<53-1).Draw(t, "i"))
		}
		f := rapid.Float64().Draw(t, "f")
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return 1.5
		}
		return f
	})
}

func genString() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		rs := rapid.SliceOfN(rapid.SampledFrom([]rune{'a', 'b', 'é', '"', '\\', '/', '<', '\u2028', '\n', 0x01, 0x7f, '😀', '中', 0xfffd}), 0, 5).Draw(t, "runes")
		return string(rs)
	})
}

// render writes v as JSON text in one of many equivalent spellings: member
// order, whitespace, number spelling and string escaping are drawn.
func render(t *rapid.T, v jv) string {
	ws := func() string { return rapid.SampledFrom([]string{"", "", " ", "\n\t"}).Draw(t, "ws") }
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return renderNumber(t, x)
	case string:
		return renderString(t, x)
	case []jv:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = ws() + render(t, e) + ws()
		}
		return "[" + strings.Join(parts, ",") + "]"
	case jobj:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		perm := rapid.Permutation(keys).Draw(t, "order")
		parts := make([]string, len(perm))
		for i, k := range perm {
			parts[i] = ws() + renderString(t, k) + ws() + ":" + ws() + render(t, x[k])
		}
		return "{" + strings.Join(parts, ",") + ws() + "}"
	}
	panic(fmt.Sprintf("render %T", v))
}

// renderNumber spells f exactly (same decimal value as its shortest form)
// in one of several ways.
func renderNumber(t *rapid.T, f float64) string {
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	switch rapid.IntRange(0, 4).Draw(t, "spelling") {
	case 0:
		return strconv.FormatFloat(f, 'g', -1, 64)
	case 1:
		return strings.ToUpper(s)
	case 2:
		// Trailing zeros in the mantissa, exponent with leading zeros.
		if !strings.Contains(mant, ".") {
			mant += "."
		}
		return fmt.Sprintf("%s00E%+04d", mant, e)
	case 3:
		if math.Abs(f) < 1e21 && (f == 0 || math.Abs(f) >= 1e-6) {
			return strconv.FormatFloat(f, 'f', -1, 64)
		}
		return s
	default:
		// Shift the point: 1.5e3 as 15e2.
		neg := strings.HasPrefix(mant, "-")
		digits := strings.Replace(strings.TrimPrefix(mant, "-"), ".", "", 1)
		sign := ""
		if neg {
			sign = "-"
		}
		return fmt.Sprintf("%s%se%d", sign, digits, e-(len(digits)-1))
	}
}

func renderString(t *rapid.T, s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		escape := rapid.IntRange(0, 3).Draw(t, "esc") == 0
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || escape:
			if r > 0xffff {
				hi, lo := utf16Pair(r)
				fmt.Fprintf(&b, `\u%04x\u%04X`, hi, lo)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// mutate returns a value near v: one number one ulp away, one string
// changed, two elements swapped, a member renamed, or v itself.
func mutate(t *rapid.T, v jv) jv {
	switch x := v.(type) {
	case float64:
		n := math.Nextafter(x, math.Inf(-1))
		if rapid.Bool().Draw(t, "up") {
			n = math.Nextafter(x, math.Inf(1))
		}
		if math.IsInf(n, 0) {
			return x / 2
		}
		return n
	case string:
		return x + "x"
	case bool:
		return !x
	case nil:
		return false
	case []jv:
		if len(x) == 0 {
			return []jv{nil}
		}
		c := append([]jv(nil), x...)
		i := rapid.IntRange(0, len(c)-1).Draw(t, "i")
		c[i] = mutate(t, c[i])
		return c
	case jobj:
		c := jobj{}
		for k, e := range x {
			c[k] = e
		}
		if len(c) == 0 {
			c["k"] = nil
			return c
		}
		keys := make([]string, 0, len(c))
		for k := range c {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		k := rapid.SampledFrom(keys).Draw(t, "key")
		c[k] = mutate(t, c[k])
		return c
	}
	return v
}

// sameValue is equality of generated values (doubles compare with ==, so
// -0 equals 0, as in RFC 8785).
func sameValue(a, b jv) bool {
	switch x := a.(type) {
	case []jv:
		y, ok := b.([]jv)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case jobj:
		y, ok := b.(jobj)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !sameValue(e, f) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		if ok && math.IsNaN(x) {
			return math.IsNaN(y)
		}
		return ok && x == y
	}
	return a == b
}

// TestPropertySameHashOnlyIfEqualValues: two bodies get the same canonical
// hash exactly when they parse to equal values, over every spelling of
// numbers, strings, order and whitespace; and an I-JSON body's canonical
// form parses back to the same value.
func TestPropertySameHashOnlyIfEqualValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v1 := genValue(3).Draw(t, "v1")
		var v2 jv
		switch rapid.IntRange(0, 2).Draw(t, "relation") {
		case 0:
			v2 = v1
		case 1:
			v2 = mutate(t, v1)
		default:
			v2 = genValue(3).Draw(t, "v2")
		}
		b1, b2 := render(t, v1), render(t, v2)
		for _, b := range []string{b1, b2} {
			if err := CheckIJSON([]byte(b)); err != nil {
				t.Fatalf("an exact I-JSON body was refused: %s: %v", b, err)
			}
		}
		h1, err1 := CanonicalHash([]byte(b1))
		h2, err2 := CanonicalHash([]byte(b2))
		if err1 != nil || err2 != nil {
			t.Fatalf("canonicalise: %v %v", err1, err2)
		}
		if eq := sameValue(v1, v2); (h1 == h2) != eq {
			t.Fatalf("equal values %v, equal hashes %v\nb1=%s\nb2=%s", eq, h1 == h2, b1, b2)
		}
		c1, _ := Canonicalize([]byte(b1))
		if !jsonEqual(t, c1, []byte(b1)) {
			t.Fatalf("the canonical form means something else:\n in  %s\n out %s", b1, c1)
		}
	})
}

// jsonEqual parses both documents (numbers as decimal text) and compares
// them value for value: numbers by their exact decimal value.
func jsonEqual(t interface{ Fatalf(string, ...any) }, a, b []byte) bool {
	pa, pb := parseExact(t, a), parseExact(t, b)
	return exactEqual(pa, pb)
}

func parseExact(t interface{ Fatalf(string, ...any) }, doc []byte) any {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("parse %q: %v", doc, err)
	}
	return v
}

func exactEqual(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !exactEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !exactEqual(e, f) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		return ok && decimalEqual(string(x), string(y))
	}
	return a == b
}

// decimalEqual compares two number literals by exact value (math/big), an
// implementation independent of normDecimal.
func decimalEqual(a, b string) bool {
	ra, oka := exactRat(a)
	rb, okb := exactRat(b)
	return oka && okb && ra.Cmp(rb) == 0
}

func exactRat(lit string) (*big.Rat, bool) {
	mant, exp, hasExp := strings.Cut(strings.ToLower(lit), "e")
	if strings.Trim(mant, "-+0.") == "" {
		return new(big.Rat), true // zero, whatever the exponent
	}
	if hasExp && len(strings.TrimLeft(exp, "+-0")) > 4 {
		return nil, false // no exact double has such an exponent
	}
	r, ok := new(big.Rat).SetString(lit)
	return r, ok
}
