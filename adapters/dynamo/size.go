package dynamo

import "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

// NumberBytes is how many bytes a number attribute value counts for in an
// item size estimate (its decimal text is passed).
type NumberBytes func(decimal string) int

// NumberBytesDynamoDB is DynamoDB's documented rule: about one byte per two
// significant digits, plus one. It estimates what a write costs (WCU).
func NumberBytesDynamoDB(decimal string) int { return (len(decimal)+1)/2 + 1 }

// NumberBytesGenerous counts a byte per character plus one: never less than
// DynamoDB's rule, so a size bound checked with it is an overestimate.
func NumberBytesGenerous(decimal string) int { return len(decimal) + 1 }

// ItemSize estimates an item's size by DynamoDB's rules: attribute names
// plus values, 3 bytes plus 1 per element for lists and maps, numbers
// counted by num. One estimator for every caller (the bench's write-unit
// figures use NumberBytesDynamoDB, the 400 KB bound test NumberBytesGenerous).
func ItemSize(item map[string]types.AttributeValue, num NumberBytes) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v, num)
	}
	return n
}

func valueSize(v types.AttributeValue, num NumberBytes) int {
	switch t := v.(type) {
	case *types.AttributeValueMemberS:
		return len(t.Value)
	case *types.AttributeValueMemberN:
		return num(t.Value)
	case *types.AttributeValueMemberB:
		return len(t.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range t.Value {
			n += 1 + len(k) + valueSize(e, num)
		}
		return n
	case *types.AttributeValueMemberL:
		return 3 + sizeOf(t.Value, func(e types.AttributeValue) int { return 1 + valueSize(e, num) })
	case *types.AttributeValueMemberSS:
		return sizeOf(t.Value, func(e string) int { return len(e) })
	case *types.AttributeValueMemberNS:
		return sizeOf(t.Value, num)
	case *types.AttributeValueMemberBS:
		return sizeOf(t.Value, func(e []byte) int { return len(e) })
	}
	return 0
}

// sizeOf sums the sizes of a list's or set's elements.
func sizeOf[E any](es []E, size func(E) int) int {
	n := 0
	for _, e := range es {
		n += size(e)
	}
	return n
}
