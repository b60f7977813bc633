package core

import (
	"context"
	"errors"
	"fmt"
)

// Claim-check for large payloads. A payload over PayloadInlineMax bytes is
// stored once, under its content hash, in a PayloadStore (S3 in production);
// the intent keeps only the reference and the hash, so every write of the
// intent stays small. Before an attempt sends, the payload is read back and
// its hash verified: bytes that do not hash to what intake accepted are never
// sent, and the intent goes to a human with the evidence.

// PayloadInlineMax is the largest payload kept inside the intent item.
const PayloadInlineMax = 4 << 10

// PayloadStore keeps payloads by content address.
type PayloadStore interface {
	// Put stores b, whose hash is hash ("sha256:<hex>"), and returns its
	// reference. Storing the same bytes again is harmless (and refreshes
	// the object's age for the expiry rule).
	Put(ctx context.Context, hash string, b []byte) (ref string, err error)
	// Get returns the bytes stored under ref; ErrPayloadMissing (wrapped)
	// if there are none.
	Get(ctx context.Context, ref string) ([]byte, error)
}

// Payload errors.
var (
	// ErrPayloadMissing: the referenced object does not exist (deleted or
	// expired). It can never be sent.
	ErrPayloadMissing = errors.New("payload object missing")
	// ErrPayloadTampered: the object's bytes do not hash to the intent's
	// payload hash.
	ErrPayloadTampered = errors.New("payload object does not match the intent's payload hash")
)

// OffloadPayload decides whether a payload leaves the item: true when it is
// over PayloadInlineMax bytes. Pure.
func OffloadPayload(payload []byte) bool { return len(payload) > PayloadInlineMax }

// VerifyPayload is the rule applied to payload bytes read back before a
// send: they must hash to the hash intake accepted.
func VerifyPayload(wantHash string, b []byte) error {
	if got := HashBytes(b); got != wantHash {
		return fmt.Errorf("%w: object hashes to %s, the intent was accepted with %s", ErrPayloadTampered, got, wantHash)
	}
	return nil
}

// loadPayload returns the bytes to send for in: inline, or read through the
// claim check and verified.
func (d *Dispatcher) loadPayload(ctx context.Context, in *Intent) ([]byte, error) {
	if in.PayloadRef == "" {
		return in.Payload, nil
	}
	if d.Payloads == nil {
		return nil, fmt.Errorf("intent %s: payload %s is stored out of the item but no payload store is configured: %w", in.ID, in.PayloadRef, ErrPayloadMissing)
	}
	b, err := d.Payloads.Get(ctx, in.PayloadRef)
	if err != nil {
		return nil, err
	}
	if err := VerifyPayload(in.PayloadHash, b); err != nil {
		return nil, err
	}
	return b, nil
}
