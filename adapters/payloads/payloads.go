// Package payloads is the claim-check store for large intent payloads: S3
// objects under a content address, payloads/sha256/<hex>. The same bytes
// always land on the same key, so a repeated put (a replayed submission, two
// intents with one payload) is harmless, and a put whose intent was never
// committed leaves an object the bucket's lifecycle rule expires.
//
// Reads go through a small in-instance cache by reference: an intent's
// attempts (and other intents with the same payload) read the object once
// per warm function instance. The cache holds the bytes as read; core
// verifies their hash before every send, so a cached copy can never carry
// bytes the intent was not accepted with.
package payloads

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/botharness/outbox/core"
)

// API is the part of the S3 client the store uses.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Prefix is where payload objects live in the bucket (the lifecycle rule's filter).
const Prefix = "payloads/"

// MaxObjectBytes bounds a read (intake accepts at most core.MaxBodyBytes).
const MaxObjectBytes = core.MaxBodyBytes + 1

// Store is the S3 payload store.
type Store struct {
	s3     API
	bucket string
	cache  *lru.Cache[string, []byte]
}

var _ core.PayloadStore = (*Store)(nil)

// New returns a store on bucket with an in-instance read cache of up to
// cacheEntries payloads (0: no cache). Payloads are at most 256 KiB, so 64
// entries bound the cache at 16 MiB.
func New(api API, bucket string, cacheEntries int) *Store {
	s := &Store{s3: api, bucket: bucket}
	if cacheEntries > 0 {
		s.cache, _ = lru.New[string, []byte](cacheEntries)
	}
	return s
}

// Bucket is the bucket name.
func (s *Store) Bucket() string { return s.bucket }

// Ref is the content address of a payload with hash "sha256:<hex>".
func Ref(hash string) (string, error) {
	hexPart, ok := strings.CutPrefix(hash, "sha256:")
	if !ok || len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return "", fmt.Errorf("payloads: %q is not a sha256 content hash", hash)
	}
	return Prefix + "sha256/" + hexPart, nil
}

// Put stores b under its content address.
func (s *Store) Put(ctx context.Context, hash string, b []byte) (string, error) {
	ref, err := Ref(hash)
	if err != nil {
		return "", err
	}
	if _, err := s.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(ref), Body: bytes.NewReader(b),
		ContentLength: aws.Int64(int64(len(b))), ContentType: aws.String("application/json"),
	}); err != nil {
		return "", fmt.Errorf("put payload %s: %w", ref, err)
	}
	return ref, nil
}

// Get reads the object under ref (through the cache).
func (s *Store) Get(ctx context.Context, ref string) ([]byte, error) {
	if !strings.HasPrefix(ref, Prefix) {
		return nil, fmt.Errorf("payloads: %q is not a payload reference: %w", ref, core.ErrPayloadMissing)
	}
	if s.cache != nil {
		if b, ok := s.cache.Get(ref); ok {
			return b, nil
		}
	}
	b, err := s.GetObject(ctx, ref)
	if err != nil {
		return nil, err
	}
	if s.cache != nil {
		s.cache.Add(ref, b)
	}
	return b, nil
}

// GetObject reads the object under ref from S3 (no cache).
func (s *Store) GetObject(ctx context.Context, ref string) ([]byte, error) {
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(ref)})
	if err != nil {
		if isMissing(err) {
			return nil, fmt.Errorf("payload %s: %w", ref, core.ErrPayloadMissing)
		}
		return nil, fmt.Errorf("get payload %s: %w", ref, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, MaxObjectBytes))
	if err != nil {
		return nil, fmt.Errorf("read payload %s: %w", ref, err)
	}
	return b, nil
}

// PutObject writes raw bytes under ref (restore: the bytes were verified
// against their content address by the caller).
func (s *Store) PutObject(ctx context.Context, ref string, b []byte) error {
	if !strings.HasPrefix(ref, Prefix) {
		return fmt.Errorf("payloads: %q is not a payload reference", ref)
	}
	if _, err := s.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(ref), Body: bytes.NewReader(b),
		ContentLength: aws.Int64(int64(len(b))), ContentType: aws.String("application/json"),
	}); err != nil {
		return fmt.Errorf("put payload %s: %w", ref, err)
	}
	return nil
}

func isMissing(err error) bool {
	var nsk *s3types.NoSuchKey
	var nf *s3types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "NoSuchKey" || ae.ErrorCode() == "NotFound")
}
