package backup

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// EncodeItem renders an item in DynamoDB's JSON form ({"S": ...}, {"N": ...}),
// so every item type round-trips exactly, not just the ones we model.
func EncodeItem(item map[string]types.AttributeValue) (map[string]any, error) {
	out := make(map[string]any, len(item))
	for k, v := range item {
		e, err := encode(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = e
	}
	return out, nil
}

func encode(v types.AttributeValue) (map[string]any, error) {
	switch t := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": t.Value}, nil
	case *types.AttributeValueMemberN:
		return map[string]any{"N": t.Value}, nil
	case *types.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(t.Value)}, nil
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": t.Value}, nil
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": true}, nil
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": t.Value}, nil
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": t.Value}, nil
	case *types.AttributeValueMemberBS:
		bs := make([]string, len(t.Value))
		for i, b := range t.Value {
			bs[i] = base64.StdEncoding.EncodeToString(b)
		}
		return map[string]any{"BS": bs}, nil
	case *types.AttributeValueMemberL:
		l := make([]any, len(t.Value))
		for i, e := range t.Value {
			x, err := encode(e)
			if err != nil {
				return nil, err
			}
			l[i] = x
		}
		return map[string]any{"L": l}, nil
	case *types.AttributeValueMemberM:
		m, err := EncodeItem(t.Value)
		if err != nil {
			return nil, err
		}
		return map[string]any{"M": m}, nil
	}
	return nil, fmt.Errorf("unsupported attribute type %T", v)
}

// DecodeItem is the inverse of EncodeItem.
func DecodeItem(raw map[string]json.RawMessage) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(raw))
	for k, v := range raw {
		d, err := decode(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = d
	}
	return out, nil
}

func decode(raw json.RawMessage) (types.AttributeValue, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
		return nil, fmt.Errorf("not a DynamoDB JSON value")
	}
	for typ, v := range m {
		switch typ {
		case "S":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberS{Value: s}, err
		case "N":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberN{Value: s}, err
		case "B":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, err
			}
			b, err := base64.StdEncoding.DecodeString(s)
			return &types.AttributeValueMemberB{Value: b}, err
		case "BOOL":
			var b bool
			err := json.Unmarshal(v, &b)
			return &types.AttributeValueMemberBOOL{Value: b}, err
		case "NULL":
			return &types.AttributeValueMemberNULL{Value: true}, nil
		case "SS":
			var ss []string
			err := json.Unmarshal(v, &ss)
			return &types.AttributeValueMemberSS{Value: ss}, err
		case "NS":
			var ss []string
			err := json.Unmarshal(v, &ss)
			return &types.AttributeValueMemberNS{Value: ss}, err
		case "BS":
			var ss []string
			if err := json.Unmarshal(v, &ss); err != nil {
				return nil, err
			}
			bs := make([][]byte, len(ss))
			for i, s := range ss {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return nil, err
				}
				bs[i] = b
			}
			return &types.AttributeValueMemberBS{Value: bs}, nil
		case "L":
			var l []json.RawMessage
			if err := json.Unmarshal(v, &l); err != nil {
				return nil, err
			}
			out := make([]types.AttributeValue, len(l))
			for i, e := range l {
				d, err := decode(e)
				if err != nil {
					return nil, err
				}
				out[i] = d
			}
			return &types.AttributeValueMemberL{Value: out}, nil
		case "M":
			var mm map[string]json.RawMessage
			if err := json.Unmarshal(v, &mm); err != nil {
				return nil, err
			}
			d, err := DecodeItem(mm)
			return &types.AttributeValueMemberM{Value: d}, err
		}
		return nil, fmt.Errorf("unknown DynamoDB JSON type %q", typ)
	}
	return nil, fmt.Errorf("empty value")
}
