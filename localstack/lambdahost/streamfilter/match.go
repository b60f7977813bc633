package streamfilter

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Match reports whether event satisfies an AWS Lambda event-filtering pattern
// (the "Pattern" string of one FilterCriteria filter). It implements the subset
// of the EventBridge-style pattern language Lambda supports that this project
// needs:
//
//   - nested objects: every key in the pattern must match (AND);
//   - arrays at the leaves: the event value must match at least one element
//     (OR); elements are exact strings, numbers (compared numerically), booleans,
//     null, or one of the operator objects below;
//   - {"exists": true|false}: the key is (not) present as a leaf value;
//   - {"prefix": "..."}, {"suffix": "..."}, {"equals-ignore-case": "..."};
//   - {"anything-but": [..] | value | {"prefix": ".."}}: present and none of them;
//   - {"numeric": [">", 0, "<=", 5]} (operators =, <, <=, >, >=), JSON numbers only.
//
// When the event value is an array, a leaf matches if any element matches, as
// in Lambda. Numbers in DynamoDB JSON ({"N": "5"}) are strings, so numeric
// operators never match them (same as Lambda). An invalid pattern returns an
// error; Lambda would refuse to create such a mapping.
func Match(pattern string, event map[string]any) (bool, error) {
	p, err := Compile(pattern)
	if err != nil {
		return false, err
	}
	return p.Match(event), nil
}

// Pattern is a parsed filter pattern. Use Compile once and Match per record in
// hot loops.
type Pattern struct {
	root map[string]any
}

// Compile parses and validates a filter pattern.
func Compile(pattern string) (*Pattern, error) {
	dec := json.NewDecoder(strings.NewReader(pattern))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("streamfilter: pattern is not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("streamfilter: trailing data after pattern")
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("streamfilter: pattern must be a JSON object")
	}
	if err := validateObject(obj, "$"); err != nil {
		return nil, err
	}
	return &Pattern{root: obj}, nil
}

// Match reports whether event satisfies the pattern.
func (p *Pattern) Match(event map[string]any) bool {
	return matchObject(p.root, event)
}

func validateObject(obj map[string]any, path string) error {
	if len(obj) == 0 {
		return fmt.Errorf("streamfilter: empty object at %s", path)
	}
	for k, v := range obj {
		at := path + "." + k
		switch v := v.(type) {
		case map[string]any:
			if isOperator(v) {
				return fmt.Errorf("streamfilter: operator at %s must be inside an array", at)
			}
			if err := validateObject(v, at); err != nil {
				return err
			}
		case []any:
			if len(v) == 0 {
				return fmt.Errorf("streamfilter: empty array at %s", at)
			}
			for _, el := range v {
				if err := validateLeaf(el, at); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("streamfilter: value at %s must be an object or an array, got %T", at, v)
		}
	}
	return nil
}

func isOperator(m map[string]any) bool {
	if len(m) != 1 {
		return false
	}
	for k := range m {
		switch k {
		case "exists", "prefix", "suffix", "equals-ignore-case", "anything-but", "numeric":
			return true
		}
	}
	return false
}

func validateLeaf(el any, at string) error {
	switch el := el.(type) {
	case string, bool, nil, json.Number:
		return nil
	case map[string]any:
		if len(el) != 1 {
			return fmt.Errorf("streamfilter: operator object at %s must have exactly one key", at)
		}
		for op, arg := range el {
			switch op {
			case "exists":
				if _, ok := arg.(bool); !ok {
					return fmt.Errorf("streamfilter: exists at %s takes true or false", at)
				}
			case "prefix", "suffix", "equals-ignore-case":
				if _, ok := arg.(string); !ok {
					return fmt.Errorf("streamfilter: %s at %s takes a string", op, at)
				}
			case "anything-but":
				switch a := arg.(type) {
				case string, json.Number, bool:
				case []any:
					if len(a) == 0 {
						return fmt.Errorf("streamfilter: anything-but at %s takes a non-empty list", at)
					}
					for _, x := range a {
						switch x.(type) {
						case string, json.Number, bool:
						default:
							return fmt.Errorf("streamfilter: anything-but at %s lists only strings, numbers or booleans", at)
						}
					}
				case map[string]any:
					if _, ok := a["prefix"].(string); len(a) != 1 || !ok {
						return fmt.Errorf("streamfilter: anything-but at %s takes a list, a value or {\"prefix\": string}", at)
					}
				default:
					return fmt.Errorf("streamfilter: anything-but at %s: unsupported argument %T", at, arg)
				}
			case "numeric":
				a, ok := arg.([]any)
				if !ok || len(a) == 0 || len(a)%2 != 0 || len(a) > 4 {
					return fmt.Errorf("streamfilter: numeric at %s takes [op, n] or [op, n, op, n]", at)
				}
				for i := 0; i < len(a); i += 2 {
					op, ok := a[i].(string)
					if !ok || !validNumericOp(op) {
						return fmt.Errorf("streamfilter: numeric at %s: bad operator %v", at, a[i])
					}
					if _, ok := a[i+1].(json.Number); !ok {
						return fmt.Errorf("streamfilter: numeric at %s: %v is not a number", at, a[i+1])
					}
				}
			default:
				return fmt.Errorf("streamfilter: unsupported operator %q at %s", op, at)
			}
		}
		return nil
	default:
		return fmt.Errorf("streamfilter: unsupported value %T in array at %s", el, at)
	}
}

func validNumericOp(op string) bool {
	switch op {
	case "=", "<", "<=", ">", ">=":
		return true
	}
	return false
}

func matchObject(pat map[string]any, ev map[string]any) bool {
	for k, pv := range pat {
		v, present := ev[k]
		switch pv := pv.(type) {
		case map[string]any:
			sub, ok := v.(map[string]any)
			if !present || !ok {
				// A nested pattern only matches an object, unless every leaf
				// below it asks for absence.
				if !allAbsent(pv) {
					return false
				}
				continue
			}
			if !matchObject(pv, sub) {
				return false
			}
		case []any:
			if !matchLeaf(pv, v, present) {
				return false
			}
		}
	}
	return true
}

// allAbsent reports whether a nested pattern consists only of
// {"exists": false} leaves, which a missing parent trivially satisfies.
func allAbsent(pat map[string]any) bool {
	for _, pv := range pat {
		switch pv := pv.(type) {
		case map[string]any:
			if !allAbsent(pv) {
				return false
			}
		case []any:
			ok := false
			for _, el := range pv {
				if m, isMap := el.(map[string]any); isMap {
					if b, isBool := m["exists"].(bool); isBool && !b {
						ok = true
					}
				}
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

func matchLeaf(alts []any, v any, present bool) bool {
	for _, alt := range alts {
		if m, ok := alt.(map[string]any); ok {
			if b, isExists := m["exists"].(bool); isExists {
				isLeaf := present
				if _, obj := v.(map[string]any); obj {
					isLeaf = false // exists matches leaf nodes only
				}
				if b == isLeaf {
					return true
				}
				continue
			}
		}
		if !present {
			continue
		}
		if arr, ok := v.([]any); ok {
			for _, el := range arr {
				if matchValue(alt, el) {
					return true
				}
			}
			continue
		}
		if matchValue(alt, v) {
			return true
		}
	}
	return false
}

// matchValue matches one pattern alternative against one scalar event value.
func matchValue(alt any, v any) bool {
	switch a := alt.(type) {
	case nil:
		return v == nil
	case string:
		s, ok := v.(string)
		return ok && s == a
	case bool:
		b, ok := v.(bool)
		return ok && b == a
	case json.Number:
		f, ok := toFloat(v)
		if !ok {
			return false
		}
		pf, err := a.Float64()
		return err == nil && pf == f
	case map[string]any:
		for op, arg := range a {
			switch op {
			case "prefix":
				s, ok := v.(string)
				return ok && strings.HasPrefix(s, arg.(string))
			case "suffix":
				s, ok := v.(string)
				return ok && strings.HasSuffix(s, arg.(string))
			case "equals-ignore-case":
				s, ok := v.(string)
				return ok && strings.EqualFold(s, arg.(string))
			case "anything-but":
				return anythingBut(arg, v)
			case "numeric":
				return numeric(arg.([]any), v)
			}
		}
	}
	return false
}

func anythingBut(arg any, v any) bool {
	switch a := arg.(type) {
	case []any:
		for _, x := range a {
			if matchValue(x, v) {
				return false
			}
		}
		return true
	case map[string]any:
		s, ok := v.(string)
		if !ok {
			return true
		}
		return !strings.HasPrefix(s, a["prefix"].(string))
	default:
		return !matchValue(a, v)
	}
}

func numeric(spec []any, v any) bool {
	f, ok := toFloat(v)
	if !ok {
		return false
	}
	for i := 0; i < len(spec); i += 2 {
		op := spec[i].(string)
		n, err := spec[i+1].(json.Number).Float64()
		if err != nil {
			return false
		}
		var r bool
		switch op {
		case "=":
			r = f == n
		case "<":
			r = f < n
		case "<=":
			r = f <= n
		case ">":
			r = f > n
		case ">=":
			r = f >= n
		}
		if !r {
			return false
		}
	}
	return true
}

// toFloat accepts the number representations an event map may hold: float64
// from encoding/json, json.Number from a UseNumber decoder, and Go integer and
// float types from maps built by hand. Strings are not numbers.
func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsNaN(n)
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// RecordForFilter renders a DynamoDB stream record as the JSON document Lambda
// evaluates filter patterns against: the record as it appears in the Lambda
// event (eventID, eventName, eventSource, eventSourceARN, awsRegion, and
// dynamodb.Keys/NewImage/OldImage in DynamoDB JSON form such as {"S": "x"} or
// {"N": "5"}). Absent images are absent keys.
func RecordForFilter(r events.DynamoDBEventRecord) map[string]any {
	b, err := json.Marshal(r)
	if err != nil {
		// Only reachable with an attribute value of an unknown type; fall
		// back to the fields that cannot fail so eventName filters still work.
		return map[string]any{
			"eventID":     r.EventID,
			"eventName":   r.EventName,
			"eventSource": r.EventSource,
			"awsRegion":   r.AWSRegion,
		}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"eventName": r.EventName}
	}
	return m
}
