package dynamo

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// Cursors are validated field by field against the key shape the query
// expects (docs/decisions.md "Cursors"): a cursor that does not decode, has
// another listing's partition, a missing, extra, empty or oversized key
// attribute, or a table key of the wrong shape is core.CodeInvalidCursor
// (400) and never reaches DynamoDB, which would answer such an
// ExclusiveStartKey with a ValidationException (500).

// maxCursorBytes bounds a cursor before it is decoded: 100 shards' positions
// of at most ~600 bytes each fit well within it (docs/decisions.md "Cursors").
const maxCursorBytes = 64 << 10

// maxKeyPartBytes is DynamoDB's bound on a sort key value (1,024 bytes); a
// partition key may be 2,048, but no key this project writes comes near
// 1,024, so one bound serves both.
const maxKeyPartBytes = 1024

// cursorShape is what a single-partition gsi1 listing's start key must look like.
type cursorShape struct {
	partitionAttr string // gsi1pk
	partition     string // its value for this listing
	pkPrefix      string // the table partition key's prefix
	sk            string // the table sort key's value
}

func keyPartOK(v string) bool {
	return v != "" && len(v) <= maxKeyPartBytes && utf8.ValidString(v)
}

// encodeCursor turns a query's LastEvaluatedKey into an opaque page cursor
// ("" when there is no next page).
func encodeCursor(last map[string]types.AttributeValue) string {
	if len(last) == 0 {
		return ""
	}
	keys := map[string]string{}
	for k, v := range last {
		if sv, ok := v.(*types.AttributeValueMemberS); ok {
			keys[k] = sv.Value
		}
	}
	b, _ := json.Marshal(keys)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reverses encodeCursor and validates every field against
// shape: exactly the index and table key attributes, the listing's own
// partition (so a cursor can never widen what a caller may page through),
// a table key of the listing's shape, no empty or oversized value.
func decodeCursor(cursor string, shape cursorShape) (map[string]types.AttributeValue, error) {
	if cursor == "" {
		return nil, nil
	}
	if len(cursor) > maxCursorBytes {
		return nil, core.InvalidCursor("too long")
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	var keys map[string]string
	if err == nil {
		err = json.Unmarshal(raw, &keys)
	}
	if err != nil {
		return nil, core.InvalidCursor("it does not decode")
	}
	if len(keys) != 4 || keys[shape.partitionAttr] != shape.partition {
		return nil, core.InvalidCursor("it was made for another listing")
	}
	sortAttr := strings.TrimSuffix(shape.partitionAttr, "pk") + "sk"
	for _, a := range []string{sortAttr, "pk", "sk"} {
		if !keyPartOK(keys[a]) {
			return nil, core.InvalidCursor("a key is missing or malformed")
		}
	}
	if !strings.HasPrefix(keys["pk"], shape.pkPrefix) || len(keys["pk"]) == len(shape.pkPrefix) || keys["sk"] != shape.sk {
		return nil, core.InvalidCursor("a key is missing or malformed")
	}
	start := map[string]types.AttributeValue{}
	for k, v := range keys {
		start[k] = avS(v)
	}
	return start, nil
}

// mergedShape is what a sharded listing's positions must look like.
type mergedShape struct {
	listing  string
	shards   int
	pkPrefix string
	sk       string
}

// decodeMergedCursor decodes and validates a sharded listing's cursor:
// its listing, every shard number in range and named once, every position's
// keys of the listing's shape.
func decodeMergedCursor(cursor string, shape mergedShape) (mergedCursor, error) {
	cur := mergedCursor{Listing: shape.listing, Pos: map[string]repairPos{}}
	if cursor == "" {
		return cur, nil
	}
	if len(cursor) > maxCursorBytes {
		return cur, core.InvalidCursor("too long")
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		err = dec.Decode(&cur)
	}
	if err != nil {
		return cur, core.InvalidCursor("it does not decode")
	}
	if cur.Listing != shape.listing {
		return cur, core.InvalidCursor("it was made for another listing")
	}
	if cur.Pos == nil {
		cur.Pos = map[string]repairPos{}
	}
	done := map[int]bool{}
	for _, d := range cur.Done {
		if d < 0 || d >= shape.shards || done[d] {
			return cur, core.InvalidCursor("a shard is out of range")
		}
		done[d] = true
	}
	for k, p := range cur.Pos {
		if _, ok := shardNumber(k, shape.shards); !ok {
			return cur, core.InvalidCursor("a shard is out of range")
		}
		if !keyPartOK(p.SK) || !keyPartOK(p.PK) || !strings.HasPrefix(p.PK, shape.pkPrefix) || len(p.PK) == len(shape.pkPrefix) || p.SKey != shape.sk {
			return cur, core.InvalidCursor("a position is malformed")
		}
	}
	return cur, nil
}

// shardNumber parses a canonical decimal shard number below n.
func shardNumber(s string, n int) (int, bool) {
	if s == "" || len(s) > 4 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	v := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, v < n
}
