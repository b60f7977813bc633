package core

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Canonicalize returns the RFC 8785 (JCS) form of a JSON document: object key
// order and insignificant whitespace never change it.
func Canonicalize(doc []byte) ([]byte, error) {
	out, err := jcs.Transform(doc)
	if err != nil {
		return nil, fmt.Errorf("canonicalize json: %w", err)
	}
	return out, nil
}

// CanonicalHash is "sha256:" + hex of the canonical form.
func CanonicalHash(doc []byte) (string, error) {
	c, err := Canonicalize(doc)
	if err != nil {
		return "", err
	}
	return HashBytes(c), nil
}

// HashBytes hashes already-canonical bytes.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
