package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"
	"pgregory.net/rapid"
)

// The one-pass canonicaliser (core/hash.go) replaced a three-pass path:
// json.Valid, an I-JSON check that tokenised the body with jsontext, and
// gowebpki/jcs's Transform. referenceCanonical is that old path, kept as
// the oracle: for every input the new pass must give the same canonical
// bytes, or refuse it with the same code and field.

func referenceCanonical(doc []byte) ([]byte, error) {
	if !json.Valid(doc) {
		return nil, &ValidationError{Code: CodeMalformedJSON, Message: "the request body is not valid JSON"}
	}
	if err := referenceCheckIJSON(doc); err != nil {
		return nil, err
	}
	out, err := jcs.Transform(doc)
	if err != nil {
		return nil, &ValidationError{Code: CodeMalformedJSON, Message: err.Error()}
	}
	return out, nil
}

func referenceCheckIJSON(doc []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return ijsonError(err)
		}
		if tok.Kind() == '0' && !ExactDouble(tok.String()) {
			return &ValidationError{Code: CodeInvalidField, Field: string(dec.StackPointer())}
		}
	}
}

func sameAsReference(t interface {
	Helper()
	Fatalf(string, ...any)
}, doc []byte) {
	t.Helper()
	want, werr := referenceCanonical(doc)
	got, gerr := Canonicalize(doc)
	switch {
	case werr == nil && gerr == nil:
		if !bytes.Equal(got, want) {
			t.Fatalf("canonical bytes changed for %q:\n old %q\n new %q", doc, want, got)
		}
	case werr != nil && gerr != nil:
		var wv, gv *ValidationError
		if !errors.As(werr, &wv) || !errors.As(gerr, &gv) || wv.Code != gv.Code || wv.Field != gv.Field {
			t.Fatalf("refusal changed for %q:\n old %v\n new %v", doc, werr, gerr)
		}
	default:
		t.Fatalf("acceptance changed for %q:\n old %q %v\n new %q %v", doc, want, werr, got, gerr)
	}
	// CanonicalHash and CheckIJSON are the same pass.
	h, herr := CanonicalHash(doc)
	if (herr == nil) != (gerr == nil) || (herr == nil && h != HashBytes(got)) {
		t.Fatalf("CanonicalHash disagrees with Canonicalize for %q: %v %v", doc, herr, gerr)
	}
	if cerr := CheckIJSON(doc); (cerr == nil) != (gerr == nil) {
		t.Fatalf("CheckIJSON disagrees with Canonicalize for %q: %v %v", doc, cerr, gerr)
	}
}

// canonCorpus is every body the I-JSON and canonicalisation tests name:
// the fuzz seed corpora, the number edges, and hand-picked corners of RFC
// 8785 (sort order by UTF-16 code units, escapes, exponents, nesting).
func canonCorpus() []string {
	docs := []string{
		fuzzBody,
		`{ "grant":{"version":1,"id":"g1"},"target":"c1","payload":{"n":[1,2.5,{"a":true,"z":null}],"text":"hi"},"action":"send","account":"a1","provider":"fake","kind":"reply" }`,
		`{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","target":"c2","payload":{"text":"hi","n":[1,2.50,{"z":null,"a":true}]},"grant":{"id":"g1","version":1}}`,
		`{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","payload":{"text":"\u00e9","n":1e2},"grant":{"id":"g1","version":1}}`,
		`{"kind":"action","provider":"fake","account":"a1","action":"send","target":"c1","payload":{},"grant":{"id":"g1","version":2},"source":{"id":"s","revision":3},"deadline":"2031-01-01T00:00:00Z","metadata":{"b":1,"a":2}}`,
		`{"kind":"reply","payload":{"a":1,"a":2}}`, `[]`, `null`, `{}`,
		`{"kind":"reply","provider":"fake","account":"a1","action":"send","target":"c1","payload":{"x":1e400},"grant":{"id":"g1","version":1}}`,
		`{"b":1,"a":[1,2,{"d":null,"c":"\u00e9"}]}`, `1.0`, `-0`, `1e21`, `0.000001`, `"\ud83d\ude00"`, `{"a":1,"a":2}`, `[1e400]`, `"\u2028"`, `{"":{"":[]}}`,
		`{"orderId":12345678901234567891}`, `{"orderId":12345678901234567892}`, `{"orderId":9007199254740992}`, `{"orderId":9007199254740993}`,
		`{"n":1E2,"t":"\u00e9"}`, `{ "t" : "é", "n" : 100.0 }`, `{"n":-0}`, `{"n":0}`, `{"n":0.1}`, `{"n":0.10000000000000001}`, `{"n":1e400}`, `{"n":1}`,
		`{"t":"<a&b>\u2028","x":[1,2.5e-7,{"z":null}]}`, `{"x":[1,2.5E-7,{"z":null}],"t":"<a&b>\u2028"}`, `{"a":2}`, `{"t":"\ud800"}`, `{"t":"\ufffd"}`,
		`{"big":18446744073709551616}`, `{"big":18446744073709552000}`,
		`{"payload":{"a":1,"a":1}}`, `{"kind":"reply","kind":"action"}`, `{"payload":{"t":"\ud800"}}`, `{"payload":{"t":"\udc00\ud800"}}`, "{\"payload\":{\"t\":\"\xff\"}}",
		`{"payload":{"list":[1,2,{"x~y/z":9007199254740993}]}}`, `{"metadata":{"n":1e400}}`, `{"t":"\ud83d\ude00"}`, `{"t":"é\u00e9\u2028"}`, `{"a":{"a":{"a":1}}}`, `[{"a":1},{"a":1}]`,
		// RFC 8785 3.2.3's sorting example, and names that differ only past
		// the BMP (a surrogate pair sorts before U+E000..U+FFFF).
		`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
		`{"\uffff":1,"\ud800\udc00":2,"\ue000":3,"\ud83d\ude00":4,"\ud83d\ude01":5,"a":6,"":7}`,
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		`{"esc":"\b\f\n\r\t\u0001\u001f\u007f\/","k\u0065y":1,"key":2}`,
		`  {"z" : [ 1 , { "b":2 , "a" : 1 } ] , "a" : "x" }  `,
		`{"a":1} {"b":2}`, `{"a":1,}`, `[1,]`, `{"a"}`, `{"a":01}`, `"unterminated`, ``, ` `, `{"a":-}`, `1 2`,
		`[[[[[[[[[[{"z":1,"y":[{"b":1,"a":2}]}]]]]]]]]]]`,
		`{"n":123456789012345}`, `{"n":1234567890123456}`, `{"n":-123456789012345}`, `{"n":-0.0}`, `{"n":1e-6}`, `{"n":1e-7}`, `{"n":999999999999999999999}`, `{"n":1e+21}`,
		string(benchPayload1KiB()), string(benchPayload64KiB()),
	}
	for _, c := range exactDoubleCases {
		docs = append(docs, c, `{"payload":{"orderId":`+c+`}}`, `[`+c+`,-`+c+`]`)
	}
	// The fuzzers' stored corpora, when a longer `make fuzz` has left some.
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "*", "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if s, ok := strings.CutPrefix(line, "[]byte("); ok {
				var v string
				if _, err := fmt.Sscanf(strings.TrimSuffix(s, ")"), "%q", &v); err == nil {
					docs = append(docs, v)
				}
			}
		}
	}
	return docs
}

var exactDoubleCases = []string{"0", "-0", "-0.0e5", "0e99999999999999999999", "0.1", "1E2", "1e2", "1.50", "1e21", "1e-7", "123.456",
	"9007199254740991", "9007199254740992", "-9007199254740991", "1.7976931348623157e308", "2.2250738585072014e-308", "5e-324",
	"9007199254740993", "12345678901234567891", "18446744073709551616", "0.10000000000000001",
	"0.1000000000000000055511151231257827021181583404541015625", "3.141592653589793238", "1e400", "-1E400",
	"1.7976931348623159e308", "1e-400", "2e-324", "1e99999999999999999999", "100000000000000000000000000001",
	"1E+2", "1e-0", "0.0", "10", "1000000", "1e6", "100e-2", "0.00001", "5E-7", "12e20", "123e18", "1.5e300"}

// TestCanonicalMatchesReferenceOverCorpus: the new pass gives the old
// path's bytes (or its refusal) for every body of the corpora.
func TestCanonicalMatchesReferenceOverCorpus(t *testing.T) {
	for _, doc := range canonCorpus() {
		sameAsReference(t, []byte(doc))
	}
}

// TestCanonicalMatchesReferenceOverGenerator: and for every body the
// property test's generator renders (all spellings of numbers, strings,
// member order and whitespace), plus each body with a wrong number.
func TestCanonicalMatchesReferenceOverGenerator(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(4).Draw(t, "v")
		doc := render(t, v)
		sameAsReference(t, []byte(doc))
		bad := `{"x":` + doc + `,"n":` + rapid.SampledFrom([]string{"9007199254740993", "0.10000000000000001", "1e400", "1", "-0"}).Draw(t, "n") + `}`
		sameAsReference(t, []byte(bad))
	})
}

// FuzzCanonicalMatchesReference: the same over fuzzed documents.
func FuzzCanonicalMatchesReference(f *testing.F) {
	for _, doc := range canonCorpus() {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { sameAsReference(t, doc) })
}

// TestCanonicaliserDropsLargeBuffers: a pooled canonicaliser keeps its
// scratch buffers for the next request, but not above canonKeepBytes (a
// 1 MiB body with escapes and unsorted objects must not stay pinned).
func TestCanonicaliserDropsLargeBuffers(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"z":1,"s":"`)
	for b.Len() < 1<<20 {
		b.WriteString(`\u00e9x`)
	}
	b.WriteString(`","a":2}`)
	c := new(canonicaliser)
	out, err := c.run(c.outBuf[:0], []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	c.outBuf = out[:0]
	if cap(c.scratch) <= canonKeepBytes || cap(c.unq) <= canonKeepBytes || cap(c.outBuf) <= canonKeepBytes {
		t.Fatalf("the test body did not grow the buffers: %d %d %d", cap(c.scratch), cap(c.unq), cap(c.outBuf))
	}
	c.release()
	if cap(c.scratch) > canonKeepBytes || cap(c.unq) > canonKeepBytes || cap(c.outBuf) > canonKeepBytes || c.src.Len() != 0 {
		t.Fatalf("released canonicaliser keeps %d/%d/%d bytes, src %d", cap(c.scratch), cap(c.unq), cap(c.outBuf), c.src.Len())
	}
}
