package httpjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
)

// The one request-decoding rule of every JSON route of the bot and admin APIs
// (provider webhooks take each provider's own format):
//
//   - Content-Type: missing is accepted (the body must still be JSON);
//     application/json or application/<x>+json, with any parameters, is
//     accepted; anything else is 415 unsupported_media_type and nothing is
//     read or written. A body API Gateway delivered base64-encoded (it does
//     so for a missing or non-text content type) is decoded first.
//   - The body is exactly one JSON object of the route's documented shape.
//   - Field names are exact: a field the shape does not name, including a
//     differently-cased one ("Kind" for "kind"), is 400 invalid_field naming
//     it. encoding/json alone would take "Kind" as "kind"; the body's hash
//     would then differ from the correctly-cased request's, and its replay
//     would be refused as idempotency_key_reused.
//   - A field of the wrong JSON type is 400 invalid_field naming it; anything
//     that is not JSON is 400 malformed_json.

// CodeUnsupportedMediaType is the 415 answer to a Content-Type that is not JSON.
const CodeUnsupportedMediaType = "unsupported_media_type"

// RequestBody applies the Content-Type rule and returns the raw body (base64
// decoded). ok is false with the answer to send when the request is refused.
func RequestBody(req events.APIGatewayV2HTTPRequest) (body []byte, resp events.APIGatewayV2HTTPResponse, ok bool) {
	if ct, found := Header(req, "Content-Type"); found && strings.TrimSpace(ct) != "" && !IsJSONMediaType(ct) {
		r, _ := Answer(&core.ValidationError{Code: CodeUnsupportedMediaType, Field: "Content-Type",
			Message: "send the body as JSON with Content-Type: application/json (or no Content-Type)"})
		return nil, r, false
	}
	b, err := Body(req)
	if err != nil {
		return nil, Error(http.StatusBadRequest, core.CodeMalformedJSON, "the body is not valid base64", ""), false
	}
	return b, events.APIGatewayV2HTTPResponse{}, true
}

// IsJSONMediaType reports whether a Content-Type value names JSON
// (application/json or application/<x>+json, parameters allowed).
func IsJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// DecodeStrict decodes body, one JSON object, into v under the rule above.
// Its errors are *core.ValidationError (Answer maps them).
func DecodeStrict(body []byte, v any) error {
	if !json.Valid(body) {
		return &core.ValidationError{Code: core.CodeMalformedJSON, Message: "the request body is not valid JSON"}
	}
	if f := InexactField(body, reflect.TypeOf(v)); f != "" {
		return unknownField(f)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field == "":
			return &core.ValidationError{Code: core.CodeMalformedJSON, Message: "the request body must be a JSON object"}
		case errors.As(err, &te):
			return &core.ValidationError{Code: core.CodeInvalidField, Field: te.Field,
				Message: te.Field + " must be a JSON " + jsonKind(te.Type.Kind())}
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return unknownField(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`))
		}
		return &core.ValidationError{Code: core.CodeMalformedJSON, Message: "the body must be a JSON object of the documented shape: " + err.Error()}
	}
	if dec.More() || dec.Decode(&struct{}{}) != io.EOF {
		return &core.ValidationError{Code: core.CodeMalformedJSON, Message: "the body must be exactly one JSON object"}
	}
	return nil
}

func unknownField(f string) error {
	return &core.ValidationError{Code: core.CodeInvalidField, Field: f,
		Message: "unknown field " + `"` + f + `"` + " (field names are case-sensitive)"}
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "value of another type"
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// InexactField returns the dotted name of the first object key in body that
// matches a field of t only case-insensitively (encoding/json would take it),
// or "" if every key is exact or simply unknown (the decoder refuses those).
// Values of fields with their own UnmarshalJSON, maps and json.RawMessage are
// not looked into. body must be valid JSON.
func InexactField(body []byte, t reflect.Type) string {
	return inexact(body, t, "")
}

func inexact(raw []byte, t reflect.Type, prefix string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(unmarshalerType) {
		return ""
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return ""
		}
		for _, it := range items {
			if f := inexact(it, t.Elem(), prefix); f != "" {
				return f
			}
		}
		return ""
	case reflect.Struct:
	default:
		return ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return ""
	}
	fields := jsonFields(t)
	for key, val := range obj {
		if ft, ok := fields[key]; ok {
			if f := inexact(val, ft, prefix+key+"."); f != "" {
				return f
			}
			continue
		}
		for name := range fields {
			if strings.EqualFold(name, key) {
				return prefix + key
			}
		}
	}
	return ""
}

// jsonFields maps the JSON names of t's fields (embedded structs flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, dup := out[k]; !dup {
						out[k] = v
					}
				}
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out[name] = sf.Type
	}
	return out
}
